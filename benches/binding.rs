//! Binding benchmark: binds N claims to N volumes on the in-memory API
//! server with the whole controller running, and prints time, throughput,
//! API writes per pair, conflicts and peak memory; then measures the volume
//! index's best-match search alone, and its search for a claim whose label
//! selector lists 100,000 values among 10,000 labelled volumes.
//!
//! Run with `cargo bench --bench binding` (sizes: `-- 1000 10000`).

// A test or benchmark reports a failure by panicking: unwrap and expect
// are its assertions.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::client::ClientBuilder;
use memapi::{MemApi, Verb};
use pv_controller::testing::VolumeIndex;
use pv_controller::{App, AppConfig, ClientOptions, Clients, ControllerSelection};
use testkit::{ClaimBuilder, RWO, VolumeBuilder, claim, volume};

/// The size of volume and claim `i`: 1 to 10 Gi, so that the index holds
/// ten sizes and a claim fits volumes of its own size and up.
fn size(i: usize) -> String {
    format!("{}Gi", 1 + i % 10)
}

/// Volume `i` of the benchmark: ReadWriteOnce only.
fn volume_of(i: usize) -> VolumeBuilder {
    volume(&format!("volume-{i:06}"), &size(i)).modes(&[RWO])
}

/// Claim `i` of the benchmark: ReadWriteOnce only.
fn claim_of(i: usize) -> ClaimBuilder {
    claim(&format!("claim-{i:06}"), &format!("uid-{i:06}"), &size(i)).modes(&[RWO])
}

/// Peak resident memory of this process, in MiB (Linux).
fn peak_rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<f64>().ok())
        })
        .map(|kb| kb / 1024.0)
        .unwrap_or(f64::NAN)
}

async fn bind(n: usize) {
    let api = MemApi::new();
    for i in 0..n {
        api.create(&volume_of(i).build()).expect("seed volume");
        api.create(&claim_of(i).build()).expect("seed claim");
    }
    api.reset_requests();
    let clients = Clients::build(
        ClientBuilder::new(api.service(), "default"),
        ClientBuilder::new(api.service(), "default"),
        ClientBuilder::new(api.service(), "default"),
        ClientOptions::default(),
    );
    let config = AppConfig {
        controllers: ControllerSelection::new([k8s_names::PERSISTENTVOLUME_BINDER_CONTROLLER]),
        ..AppConfig::default()
    };
    let app = App::start(clients, config)
        .await
        .expect("the process starts");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let start = Instant::now();
    let running = tokio::spawn(app.run(async move {
        let _ = stopped.await;
    }));
    let deadline = start + Duration::from_secs(600);
    while api
        .requests()
        .count(Verb::Patch, "persistentvolumeclaims", Some("status"))
        < n as u64
    {
        if Instant::now() > deadline {
            println!("bind {n}: did not finish within 10 minutes");
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let elapsed = start.elapsed();
    let stats = api.requests();
    let _ = stop.send(());
    let _ = running.await;
    let pv_writes = stats.count(Verb::Patch, "persistentvolumes", None)
        + stats.count(Verb::Patch, "persistentvolumes", Some("status"));
    let pvc_writes = stats.count(Verb::Patch, "persistentvolumeclaims", None)
        + stats.count(Verb::Patch, "persistentvolumeclaims", Some("status"));
    let bound = api
        .list::<PersistentVolumeClaim>()
        .iter()
        .filter(|c| c.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound"))
        .count();
    println!(
        "bind {n:>6} pairs: {:>8.1} ms, {:>8.0} pairs/s, {bound} bound, {:.2} PV+PVC writes/pair, {} conflicts, {} requests, peak RSS {:.0} MiB",
        elapsed.as_secs_f64() * 1000.0,
        n as f64 / elapsed.as_secs_f64(),
        (pv_writes + pvc_writes) as f64 / n as f64,
        stats.total_with_code(409),
        stats.total(),
        peak_rss_mib(),
    );
}

fn search(n: usize) {
    let mut index = VolumeIndex::default();
    let volumes: Vec<_> = (0..n)
        .map(|i| volume_of(i).phase("Available").arc())
        .collect();
    let start = Instant::now();
    for v in &volumes {
        index.insert(&**v).expect("packed");
    }
    let insert = start.elapsed();
    let claims: Vec<_> = (0..1000).map(|i| claim_of(i).build()).collect();
    let start = Instant::now();
    let mut found = 0;
    for c in &claims {
        if matches!(index.find_best_match(c, false), Ok(Some(_))) {
            found += 1;
        }
    }
    let per_search = start.elapsed() / claims.len() as u32;
    println!(
        "index {n:>6} volumes: insert {:>6.0} ns/volume, best match {:>6.0} ns/search ({found}/1000 found)",
        insert.as_nanos() as f64 / n as f64,
        per_search.as_nanos() as f64
    );
    // `/explain`: every volume of the index judged for one claim.
    let rounds = 20;
    let start = Instant::now();
    for c in claims.iter().take(rounds) {
        let explained = index.explain(c, false).expect("explained");
        assert_eq!(explained.len(), n);
    }
    println!(
        "index {n:>6} volumes: explain a claim {:>8.2} ms",
        start.elapsed().as_secs_f64() * 1000.0 / rounds as f64
    );
}

/// A claim whose `In` requirement lists 100,000 values, among 10,000
/// volumes of distinct labels: the worst case, where only the last volume
/// of the search's order (the largest, last by name) matches, so every
/// volume is checked. The first search compiles the selector; the next
/// ones find it compiled.
fn large_selector() {
    const VOLUMES: usize = 10_000;
    const VALUES: usize = 100_000;
    let mut index = VolumeIndex::default();
    for i in 0..VOLUMES {
        let rack = format!("rack-{i:06}");
        let volume = volume_of(i)
            .phase("Available")
            .labels(&[("rack", &rack)])
            .build();
        index.insert(&volume).expect("packed");
    }
    let last = format!("rack-{:06}", VOLUMES - 1);
    let mut values: Vec<String> = (1..VALUES).map(|j| format!("elsewhere-{j:06}")).collect();
    values.push(last);
    let values: Vec<&str> = values.iter().map(String::as_str).collect();
    let mut claim = claim_of(0)
        .selector_expression("rack", "In", &values)
        .build();
    claim.metadata.resource_version = Some("1".to_string());
    let start = Instant::now();
    let found = index.find_best_match(&claim, false).expect("searched");
    let first = start.elapsed();
    let expected = format!("volume-{:06}", VOLUMES - 1);
    assert_eq!(
        found.and_then(|v| v.metadata.name.clone()).as_deref(),
        Some(expected.as_str())
    );
    let rounds = 100;
    let start = Instant::now();
    for _ in 0..rounds {
        assert!(
            index
                .find_best_match(&claim, false)
                .expect("searched")
                .is_some()
        );
    }
    println!(
        "index {VOLUMES:>6} volumes, a {VALUES}-value In selector: first search {:>7.2} ms (compiles it), then {:>7.3} ms/search",
        first.as_secs_f64() * 1000.0,
        start.elapsed().as_secs_f64() * 1000.0 / f64::from(rounds),
    );
}

#[tokio::main]
async fn main() {
    // Logs only when asked (RUST_LOG), so figures are not skewed by output.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .try_init();
    let sizes: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let sizes = if sizes.is_empty() {
        vec![1000, 10000]
    } else {
        sizes
    };
    for &n in &sizes {
        search(n);
    }
    large_selector();
    for &n in &sizes {
        bind(n).await;
    }
}
