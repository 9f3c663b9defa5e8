//! pv-controller in shadow mode beside kube-controller-manager 1.20 on a
//! real API server: upstream's persistentvolume-binder and ephemeral-volume
//! controllers act, pv-controller (`--shadow`) judges each of its own
//! decisions against theirs. The workload: `--volumes` volumes and
//! `--claims` claims of the bind storm's mix (the volumes beyond the claims
//! are twins of the first pairs, so a claim has two equivalent choices),
//! pods with an ephemeral volume, then a share of the claims deleted so
//! their volumes are retained, deleted or recycled. It prints the shadow
//! report's counts and every difference, and the shadow process's CPU
//! seconds and peak RSS; `--mode normal` runs pv-controller alone, acting,
//! on the same workload, for the cost of the normal mode.
//!
//! ```sh
//! CP_APISERVER_EXTRA_ARGS=--feature-gates=GenericEphemeralVolume=true \
//!     ../shared/tools/kube-apiserver.sh up
//! cargo bench --bench shadow_beside -- --kubeconfig /tmp/cp/kubeconfig
//!     [--mode shadow|normal] [--claims 1000] [--volumes 1100] [--pods 50]
//!     [--upstream-qps 20] [--keep (the objects, to look at)] [-- more pv-controller flags, e.g. --shadow-window 5m]
//! ```
//!
//! kube-controller-manager's client allows 20 requests per second by
//! default, so it takes minutes to bind a thousand claims, longer than
//! shadow mode's default window; `--upstream-qps` raises its limit.

// A benchmark reports a failure by panicking: unwrap and expect are its
// assertions.
#![allow(clippy::unwrap_used, clippy::expect_used)]

// The bind storm's modules, of which this bench uses a part.
#[allow(dead_code)]
#[path = "bind_storm/cluster.rs"]
mod cluster;
#[allow(dead_code)]
#[path = "bind_storm/process.rs"]
mod process;
#[allow(dead_code)]
#[path = "bind_storm/workload.rs"]
mod workload;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use futures::{StreamExt, stream};
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use kube::Api;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use cluster::Server;
use process::{Controller, Which};
use workload::{LABEL, Shape};

/// The controllers both processes run.
const CONTROLLERS: &str = "--controllers=persistentvolume-binder,ephemeral-volume";

/// The sync period of both (kube-controller-manager's default).
const SYNC: Duration = Duration::from_secs(15);

struct Args {
    kubeconfig: PathBuf,
    shadow: bool,
    claims: usize,
    volumes: usize,
    pods: usize,
    upstream_qps: u32,
    keep: bool,
    extra: Vec<String>,
}

impl Args {
    fn parse() -> Self {
        let mut kubeconfig = None;
        let mut args = Self {
            kubeconfig: PathBuf::new(),
            shadow: true,
            claims: 1000,
            volumes: 1100,
            pods: 50,
            upstream_qps: 20,
            keep: false,
            extra: Vec::new(),
        };
        let mut it = std::env::args().skip(1);
        while let Some(arg) = it.next() {
            let mut value = || it.next().expect("a value after the flag");
            match arg.as_str() {
                "--kubeconfig" => kubeconfig = Some(PathBuf::from(value())),
                "--mode" => args.shadow = value() == "shadow",
                "--claims" => args.claims = value().parse().expect("--claims N"),
                "--volumes" => args.volumes = value().parse().expect("--volumes N"),
                "--pods" => args.pods = value().parse().expect("--pods N"),
                "--upstream-qps" => {
                    args.upstream_qps = value().parse().expect("--upstream-qps N");
                }
                "--keep" => args.keep = true,
                "--" => args
                    .extra
                    .extend(it.by_ref().filter(|extra| extra != "--bench")),
                // cargo bench passes --bench to every harness-less target.
                "--bench" => {}
                other => panic!("unknown flag {other}"),
            }
        }
        args.kubeconfig = kubeconfig.expect("--kubeconfig: a real API server");
        assert!(args.volumes >= args.claims, "--volumes at least --claims");
        args
    }
}

/// The reclaim policy of pair `i`'s volume: most Retain, some Delete and
/// some Recycle, so releasing them exercises every policy.
fn policy(i: usize) -> &'static str {
    match i % 20 {
        0 => "Delete",
        1 => "Recycle",
        _ => "Retain",
    }
}

/// Whether the second phase deletes pair `i`'s claim.
fn released(i: usize) -> bool {
    i % 20 < 3
}

/// A pod with one ephemeral volume, whose claim the ephemeral volume
/// controller makes.
fn ephemeral_pod(i: usize) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": { "name": format!("eph-{i:04}"), "namespace": "default",
                      "labels": { LABEL.0: LABEL.1 } },
        "spec": {
            "containers": [ { "name": "c", "image": "busybox" } ],
            "volumes": [ { "name": "scratch", "ephemeral": { "volumeClaimTemplate": {
                "metadata": { "labels": { LABEL.0: LABEL.1 } },
                "spec": { "accessModes": ["ReadWriteOnce"], "storageClassName": "",
                          "resources": { "requests": { "storage": "1Gi" } } } } } } ]
        }
    })
}

/// A port free now, for the admin server of the process under test.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|address| address.port())
        .expect("a free port")
}

/// A plain HTTP GET of the process's admin server; `None` while it is not
/// listening.
async fn admin_get(port: u16, path: &str) -> Option<String> {
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .ok()?;
    let request = format!("GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n");
    stream.write_all(request.as_bytes()).await.ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).await.ok()?;
    let (head, body) = response.split_once("\r\n\r\n")?;
    head.starts_with("HTTP/1.1 200")
        .then(|| body.to_string())
        .or_else(|| head.starts_with("HTTP/1.0 200").then(|| body.to_string()))
}

/// The shadow process's pending decisions, from its metrics.
async fn pending_decisions(port: u16) -> Option<f64> {
    let metrics = admin_get(port, "/metrics").await?;
    metrics
        .lines()
        .find(|l| l.starts_with("pv_controller_shadow_pending_decisions"))
        .and_then(|l| l.rsplit_once(' '))
        .and_then(|(_, v)| v.parse().ok())
}

/// Claims of the bench not yet Bound.
async fn unbound(server: &Server) -> usize {
    let claims: Api<PersistentVolumeClaim> = Api::all(server.client());
    let selector = ListParams::default().labels(&format!("{}={}", LABEL.0, LABEL.1));
    let list = claims.list(&selector).await.expect("list claims");
    list.items
        .iter()
        .filter(|c| c.status.as_ref().and_then(|s| s.phase.as_deref()) != Some("Bound"))
        .count()
}

/// Creates the workload's volumes (`pre_bound`: only the delayed pairs',
/// pre-bound to their claims' UIDs; otherwise every other one).
async fn create_volumes(server: &Server, args: &Args, uids: Option<&[String]>) {
    let mut volumes: Vec<PersistentVolume> = Vec::new();
    for i in 0..args.volumes {
        let (pair, prefix) = if i < args.claims {
            (i, "pair")
        } else {
            (i - args.claims, "twin")
        };
        let shape = Shape::of(pair, false);
        let delayed = shape.delayed();
        let claim = match (uids, delayed && prefix == "pair") {
            (Some(uids), true) => Some(("default", uids[pair].as_str())),
            (None, false) => None,
            _ => continue,
        };
        // Twins of delayed pairs would wait for a scheduler: leave them out.
        if prefix == "twin" && delayed {
            continue;
        }
        let mut volume = workload::volume_of(prefix, pair, &shape, claim);
        if let Some(spec) = volume.spec.as_mut() {
            spec.persistent_volume_reclaim_policy = Some(policy(pair).to_string());
        }
        volumes.push(volume);
    }
    server.create_volumes(volumes).await;
}

/// Waits until `done` holds or `limit` passes; returns the time taken.
async fn wait_for<F, Fut>(limit: Duration, mut done: F) -> Duration
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let start = Instant::now();
    while start.elapsed() < limit && !done().await {
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    start.elapsed()
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    let mut server = Server::real(&args.kubeconfig).await;
    clean_up(&server).await;
    server.create_classes(workload::classes()).await;
    server.start_counting().await;

    let dir = std::env::temp_dir().join(format!("shadow-beside-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("log dir");
    let port = free_port();
    let mut ours_flags = vec![
        CONTROLLERS.to_string(),
        format!("--metrics-bind-address=127.0.0.1:{port}"),
    ];
    ours_flags.extend(args.extra.iter().cloned());
    let upstream = if args.shadow {
        ours_flags.push("--shadow".to_string());
        Some(Controller::start(
            Which::Upstream,
            server.kubeconfig(),
            &[
                "--controllers=ephemeral-volume".to_string(),
                "--feature-gates=GenericEphemeralVolume=true".to_string(),
                format!("--kube-api-qps={}", args.upstream_qps),
                format!("--kube-api-burst={}", args.upstream_qps * 3 / 2),
            ],
            &dir.join("kube-controller-manager.log"),
        ))
    } else {
        None
    };
    let mut ours = Controller::start(
        Which::Ours,
        server.kubeconfig(),
        &ours_flags,
        &dir.join("pv-controller.log"),
    );
    wait_for(Duration::from_secs(60), || async {
        admin_get(port, "/readyz").await.is_some()
    })
    .await;
    let cpu_idle = ours.cpu_seconds();
    let rss_idle = ours.peak_rss_mib();
    println!(
        "{} ready; logs in {}",
        if args.shadow { "shadow" } else { "normal" },
        dir.display()
    );

    let start = Instant::now();
    create_volumes(&server, &args, None).await;
    let claims: Vec<PersistentVolumeClaim> = (0..args.claims)
        .map(|i| workload::claim_of("pair", i, &Shape::of(i, false), "default"))
        .collect();
    let uids = server.create_claims(claims).await;
    create_volumes(&server, &args, Some(&uids)).await;
    let client = server.client();
    stream::iter(0..args.pods)
        .map(|i| {
            let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
            async move {
                let pod: Pod = serde_json::from_value(ephemeral_pod(i)).expect("a pod");
                pods.create(&PostParams::default(), &pod).await.map(drop)
            }
        })
        .buffer_unordered(16)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect::<Result<Vec<()>, _>>()
        .expect("create pods (GenericEphemeralVolume on the API server?)");
    let binding = wait_for(Duration::from_secs(300), || async {
        unbound(&server).await <= args.pods
    })
    .await;
    println!(
        "bound in {:.1} s ({} claims not Bound)",
        binding.as_secs_f64(),
        unbound(&server).await
    );

    let claims: Api<PersistentVolumeClaim> = Api::namespaced(server.client(), "default");
    stream::iter((0..args.claims).filter(|i| released(*i)))
        .map(|i| {
            let claims = claims.clone();
            async move {
                // No PVC-protection controller runs to remove its finalizer.
                let name = workload::name("pair", i);
                let unprotect = Patch::Merge(json!({ "metadata": { "finalizers": null } }));
                let _ = claims
                    .patch(&name, &PatchParams::default(), &unprotect)
                    .await;
                let _ = claims.delete(&name, &DeleteParams::default()).await;
            }
        })
        .buffer_unordered(16)
        .collect::<Vec<()>>()
        .await;
    // Released volumes are reclaimed at the next sync; then every decision
    // needs up to a window (two sync periods) to be judged.
    tokio::time::sleep(SYNC * 2).await;
    if args.shadow {
        wait_for(Duration::from_secs(300), || async {
            pending_decisions(port).await == Some(0.0)
        })
        .await;
    }
    tokio::time::sleep(SYNC * 3).await;
    let elapsed = start.elapsed();
    let cpu = ours.cpu_seconds();
    let rss = ours.peak_rss_mib();
    assert!(ours.running(), "pv-controller exited; see its log");
    let writes = server.writes().await;
    println!(
        "{}: {:.0} s, CPU {:.2} s ({:.2} s idle at start), peak RSS {:.1} MiB ({:.1} MiB ready)",
        if args.shadow { "shadow" } else { "normal" },
        elapsed.as_secs_f64(),
        cpu,
        cpu_idle,
        rss,
        rss_idle
    );
    println!(
        "writes seen by the API server (every writer): {:.0} volume, {:.0} claim, {:.0} conflicts",
        writes.volume, writes.claim, writes.conflicts
    );
    let metrics = admin_get(port, "/metrics").await.unwrap_or_default();
    for line in metrics.lines().filter(|l| {
        l.starts_with("pv_controller_shadow_")
            || l.starts_with("pv_controller_api_requests")
            || l.starts_with("pv_controller_sync_duration_seconds_count")
    }) {
        println!("{line}");
    }
    if args.shadow {
        let report = admin_get(port, "/shadow").await.unwrap_or_default();
        std::fs::write(dir.join("shadow.json"), &report).expect("write the report");
        let report: Value = serde_json::from_str(&report).unwrap_or(Value::Null);
        print_differences(&report);
        println!("the whole report: {}", dir.join("shadow.json").display());
        drop(upstream);
    }
    drop(ours);
    if !args.keep {
        clean_up(&server).await;
    }
}

/// Removes the bench's objects and the recycler pods made for its volumes.
async fn clean_up(server: &Server) {
    server.clean_up().await;
    let pods: Api<Pod> = Api::namespaced(server.client(), "default");
    let selector = ListParams::default().labels(&format!("{}={}", LABEL.0, LABEL.1));
    let _ = pods
        .delete_collection(&DeleteParams::default(), &selector)
        .await;
    let listed = pods
        .list_metadata(&ListParams::default())
        .await
        .expect("list pods");
    for pod in listed.items {
        let name = pod.metadata.name.unwrap_or_default();
        if name.starts_with("recycler-for-") {
            let _ = pods.delete(&name, &DeleteParams::default()).await;
        }
    }
}

/// The differences of a report, grouped by kind and by what each side did
/// (words with digits, such as names, left out), with a count and one
/// example each.
fn print_differences(report: &Value) {
    let generic = |text: &str| -> String {
        text.split(' ')
            .map(|word| {
                if word.chars().any(|c| c.is_ascii_digit()) {
                    "…"
                } else {
                    word
                }
            })
            .collect::<Vec<_>>()
            .join(" ")
    };
    let mut groups: std::collections::BTreeMap<(String, String, String), (usize, String)> =
        std::collections::BTreeMap::new();
    for difference in report["differences"].as_array().into_iter().flatten() {
        let text = |key: &str| difference[key].as_str().unwrap_or_default().to_string();
        let group = (
            text("kind"),
            generic(&text("ours")),
            generic(&text("upstream")),
        );
        let entry = groups.entry(group).or_insert((0, String::new()));
        entry.0 += 1;
        if entry.1.is_empty() {
            entry.1 = format!(
                "{}: {} / {}",
                text("object"),
                text("ours"),
                text("upstream")
            );
        }
    }
    println!("counts: {}", report["counts"]);
    println!("differences (newest 1,000), grouped:");
    for ((kind, ours, upstream), (count, example)) in groups {
        println!("  {count:5}  {kind}: ours \"{ours}\", upstream \"{upstream}\"  (e.g. {example})");
    }
}
