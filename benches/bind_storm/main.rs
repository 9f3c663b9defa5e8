//! The bind storm: N volume/claim pairs created before the controller
//! starts, then the controller started as its own process (so its CPU and
//! memory are measured alone) on memapi served over loopback, or on a real
//! API server (`--kubeconfig`); it reports, as one JSON object and a table,
//! the time until every claim is Bound (or until the last claim bound, when
//! nothing more was bound for `--stall` seconds: some stay Pending), writes per pair, 409s, claims left
//! Pending, claims bound to a volume larger than their best fit, CPU
//! seconds, peak RSS (and the empty-cluster baseline), and the bind latency
//! of single claims on the idle controller afterwards.
//!
//! ```sh
//! cargo bench --bench bind_storm -- --pairs 1000,10000 [--kubeconfig FILE]
//!     [--upstream] [--plain] [--latency 100] [--out results.jsonl] [--repeat 3]
//!     [--stall 90] [--timeout 1800] [--ceiling] [--wire-form merge-patch|replace|protobuf-replace] [--cold-start]
//!     [--neighbour-writes-per-second N] [--as-service-accounts] [--limit-path]
//!     [-- controller flags, e.g. --kube-api-qps 20 --kube-api-burst 30]
//! cargo bench --bench bind_storm -- --plot docs/performance-results.jsonl docs/
//! cargo bench --bench bind_storm -- --plot-limit-path results.jsonl docs/performance-limit-path.svg
//! ```

// A test or benchmark reports a failure by panicking: unwrap and expect
// are its assertions.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod ceiling;
mod cluster;
mod cold;
mod identity;
mod limit_path;
mod neighbour;
mod plot;
mod process;
mod proto;
mod workload;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use kube::Api;
use kube::api::{ListParams, PostParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, watcher};
use serde_json::{Value, json};

use cluster::Server;
use process::{Controller, Which};
use workload::{LABEL, Shape};

/// The bench serves memapi in its own process, on the same two cores as
/// the controller, so memapi's cost is part of every run's time. jemalloc,
/// as the controller's: with the C library's allocator memapi's own CPU
/// per pair grows with the heap (its free lists grow with it), and the
/// runs would measure that more than the controller.
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

struct Args {
    pairs: Vec<usize>,
    kubeconfig: Option<PathBuf>,
    which: Which,
    plain: bool,
    latency: usize,
    out: Option<PathBuf>,
    plot: Option<(PathBuf, PathBuf)>,
    /// Draw the limit's path of the newest run that recorded one
    /// (`--plot-limit-path results.jsonl OUT.svg`).
    plot_limit_path: Option<(PathBuf, PathBuf)>,
    extra: Vec<String>,
    timeout: Duration,
    stall: Duration,
    repeat: usize,
    /// The commit measured (see [`commit`]), read once before the first run.
    commit: Option<String>,
    /// Whether to probe the server's write ceiling first (`--ceiling`).
    probe_ceiling: bool,
    /// The ceiling found.
    ceiling: Option<ceiling::Ceiling>,
    /// How the ceiling probe's writers write (`--wire-form`).
    wire_form: ceiling::WireForm,
    /// Whether to start a second controller on the settled cluster after
    /// the storm (`--cold-start`).
    cold_start: bool,
    /// A second client's steady writes a second beside the storm
    /// (`--neighbour-writes-per-second`).
    neighbour: Option<f64>,
    /// Whether the controller and the neighbour send as ServiceAccounts of
    /// their own rather than as the kubeconfig's user
    /// (`--as-service-accounts`, a real server only).
    as_service_accounts: bool,
    /// Whether to record the write limit's path through the storm
    /// (`--limit-path`).
    limit_path: bool,
}

impl Args {
    fn parse() -> Self {
        let mut args = Self {
            pairs: vec![1000],
            kubeconfig: None,
            which: Which::Ours,
            plain: false,
            latency: 100,
            out: None,
            plot: None,
            plot_limit_path: None,
            extra: Vec::new(),
            timeout: Duration::from_secs(1800),
            stall: Duration::from_secs(90),
            repeat: 1,
            commit: None,
            probe_ceiling: false,
            ceiling: None,
            wire_form: ceiling::WireForm::MergePatch,
            cold_start: false,
            neighbour: None,
            as_service_accounts: false,
            limit_path: false,
        };
        let mut it = std::env::args().skip(1);
        while let Some(arg) = it.next() {
            let mut value = || it.next().expect("a value after the flag");
            match arg.as_str() {
                "--pairs" => {
                    args.pairs = value()
                        .split(',')
                        .map(|n| n.parse().expect("pairs"))
                        .collect();
                }
                "--kubeconfig" => args.kubeconfig = Some(value().into()),
                "--upstream" => args.which = Which::Upstream,
                "--plain" => args.plain = true,
                "--ceiling" => args.probe_ceiling = true,
                "--wire-form" => args.wire_form = ceiling::WireForm::parse(&value()),
                "--cold-start" => args.cold_start = true,
                "--neighbour-writes-per-second" => {
                    let rate: f64 = value().parse().expect("writes a second");
                    assert!(rate > 0.0, "--neighbour-writes-per-second: more than 0");
                    args.neighbour = Some(rate);
                }
                "--as-service-accounts" => args.as_service_accounts = true,
                "--limit-path" => args.limit_path = true,
                "--plot-limit-path" => {
                    let input = value().into();
                    args.plot_limit_path = Some((input, value().into()));
                }
                "--latency" => args.latency = value().parse().expect("tries"),
                "--out" => args.out = Some(value().into()),
                "--repeat" => args.repeat = value().parse().expect("runs per N"),
                "--timeout" => {
                    args.timeout = Duration::from_secs(value().parse().expect("seconds"));
                }
                "--stall" => args.stall = Duration::from_secs(value().parse().expect("seconds")),
                "--plot" => {
                    let input = value().into();
                    args.plot = Some((input, value().into()));
                }
                "--bench" => {}
                // `cargo bench` appends its own `--bench` after everything.
                "--" => args.extra = it.by_ref().filter(|a| a != "--bench").collect(),
                other => panic!("unknown argument {other:?}"),
            }
        }
        args
    }
}

/// The name prefix of the storm's claims and volumes.
const STORM: &str = "pair";

/// Whether `name` is one of the storm's claims or volumes.
fn is_storm(name: &str) -> bool {
    name.strip_prefix(STORM)
        .is_some_and(|rest| rest.starts_with('-'))
}

/// When each claim was first seen Bound, from a watch of the bench's claims.
/// The watch ends with the tracker: a watch left running would keep its
/// run's server, and every object of it, alive in the bench's process
/// through the rounds that follow, and slow them down.
struct Tracker {
    bound: Arc<Mutex<Bound>>,
    watch: tokio::task::JoinHandle<()>,
}

impl Drop for Tracker {
    fn drop(&mut self) {
        self.watch.abort();
    }
}

/// What the tracker saw: when each claim was first Bound, and how many of
/// them are the storm's (counted as they come: the bench asks every few
/// milliseconds, and counting 100,000 names each time would take a core
/// from the controller it measures).
#[derive(Default)]
struct Bound {
    at: HashMap<String, Instant>,
    storm: usize,
}

impl Tracker {
    /// Watches the bench's claims; returns once the first list is in.
    async fn start(client: kube::Client) -> Self {
        let bound = Arc::new(Mutex::new(Bound::default()));
        let (ready, listed) = tokio::sync::oneshot::channel();
        let api: Api<PersistentVolumeClaim> = Api::all(client);
        let config = watcher::Config::default().labels(&format!("{}={}", LABEL.0, LABEL.1));
        let seen = Arc::clone(&bound);
        let watch = tokio::spawn(async move {
            let mut ready = Some(ready);
            let mut events = std::pin::pin!(watcher(api, config).default_backoff());
            while let Some(event) = events.next().await {
                let now = Instant::now();
                match event {
                    Ok(watcher::Event::Apply(c) | watcher::Event::InitApply(c)) => {
                        let phase = c.status.as_ref().and_then(|s| s.phase.as_deref());
                        if phase == Some("Bound") {
                            let name = c.metadata.name.clone().unwrap_or_default();
                            let mut seen = seen.lock().expect("tracker");
                            let storm = is_storm(&name);
                            if seen.at.insert(name, now).is_none() && storm {
                                seen.storm += 1;
                            }
                        }
                    }
                    Ok(watcher::Event::InitDone) => {
                        if let Some(ready) = ready.take() {
                            let _ = ready.send(());
                        }
                    }
                    _ => {}
                }
            }
        });
        listed.await.expect("first list of claims");
        Self { bound, watch }
    }

    /// How many of the storm's claims were seen Bound.
    fn storm_bound(&self) -> usize {
        self.bound.lock().expect("tracker").storm
    }

    /// When the storm's claims were seen Bound, in seconds after `start`,
    /// at some fractions of the storm: the first claim, 10%, half, 90% and
    /// the last (the start-up's share, and the pace once binding runs).
    fn storm_timeline(&self, start: Instant) -> Value {
        let bound = self.bound.lock().expect("tracker");
        let mut times: Vec<f64> = bound
            .at
            .iter()
            .filter(|(name, _)| is_storm(name))
            .map(|(_, at)| at.saturating_duration_since(start).as_secs_f64())
            .collect();
        times.sort_by(f64::total_cmp);
        let at = |p: f64| percentile(&times, p);
        json!({
            "first": times.first(),
            "p10": at(0.1),
            "p50": at(0.5),
            "p90": at(0.9),
            "last": times.last(),
        })
    }

    fn bound_at(&self, name: &str) -> Option<Instant> {
        self.bound.lock().expect("tracker").at.get(name).copied()
    }
}

/// What the final objects say: claims left Pending, claims bound to a
/// volume larger than their request (every claim has a volume of exactly
/// its request), and broken bindings (a claim whose volume does not point
/// back at it, a volume claimed twice).
async fn check(client: kube::Client, n: usize) -> (usize, usize, usize) {
    let params = ListParams::default().labels(&format!("{}={}", LABEL.0, LABEL.1));
    let claims = Api::<PersistentVolumeClaim>::all(client.clone())
        .list(&params)
        .await
        .expect("list claims");
    let volumes = Api::<PersistentVolume>::all(client)
        .list(&params)
        .await
        .expect("list volumes");
    let gib = |q: Option<&str>| {
        q.and_then(|q| q.strip_suffix("Gi"))
            .and_then(|q| q.parse::<u64>().ok())
            .unwrap_or(0)
    };
    let capacity: HashMap<String, (u64, Option<String>)> = volumes
        .items
        .iter()
        .map(|v| {
            let spec = v.spec.as_ref();
            let cap = spec
                .and_then(|s| s.capacity.as_ref())
                .and_then(|c| c.get("storage"))
                .map(|q| q.0.as_str());
            let owner = spec
                .and_then(|s| s.claim_ref.as_ref())
                .and_then(|r| r.name.clone());
            (
                v.metadata.name.clone().unwrap_or_default(),
                (gib(cap), owner),
            )
        })
        .collect();
    let (mut pending, mut oversized, mut broken) = (n, 0, 0);
    for claim in claims
        .items
        .iter()
        .filter(|c| c.metadata.name.as_deref().is_some_and(is_storm))
    {
        let name = claim.metadata.name.clone().unwrap_or_default();
        let phase = claim.status.as_ref().and_then(|s| s.phase.as_deref());
        let request = claim
            .spec
            .as_ref()
            .and_then(|s| s.resources.as_ref())
            .and_then(|r| r.requests.as_ref())
            .and_then(|r| r.get("storage"))
            .map(|q| q.0.as_str());
        if phase != Some("Bound") {
            continue;
        }
        pending -= 1;
        let volume = claim
            .spec
            .as_ref()
            .and_then(|s| s.volume_name.clone())
            .unwrap_or_default();
        match capacity.get(&volume) {
            Some((cap, owner)) => {
                if *cap > gib(request) {
                    oversized += 1;
                }
                if owner.as_deref() != Some(name.as_str()) {
                    broken += 1;
                }
            }
            None => broken += 1,
        }
    }
    (pending, oversized, broken)
}

/// Binds single claims on the idle controller: a volume is created and
/// left to turn Available, then a claim that fits it; the latency is from
/// the claim's create request to the watch showing it Bound.
async fn latency(server: &Server, tracker: &Tracker, tries: usize) -> Vec<f64> {
    let client = server.client();
    let volumes: Api<PersistentVolume> = Api::all(client.clone());
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client, "default");
    let shape = Shape::of(1, true);
    let mut latencies = Vec::new();
    for i in 0..tries {
        let volume = workload::volume_of("lat", i, &shape, None);
        volumes
            .create(&PostParams::default(), &volume)
            .await
            .expect("latency volume");
        let name = workload::name("lat", i);
        for _ in 0..5000 {
            let phase = volumes.get(&name).await.ok().and_then(|v| v.status?.phase);
            if phase.as_deref() == Some("Available") {
                break;
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        let claim = workload::claim_of("lat", i, &shape, "default");
        let start = Instant::now();
        claims
            .create(&PostParams::default(), &claim)
            .await
            .expect("latency claim");
        let deadline = start + Duration::from_secs(10);
        loop {
            if let Some(at) = tracker.bound_at(&name) {
                latencies.push(at.duration_since(start).as_secs_f64() * 1000.0);
                break;
            }
            if Instant::now() > deadline {
                latencies.push(f64::INFINITY);
                break;
            }
            tokio::time::sleep(Duration::from_micros(500)).await;
        }
    }
    latencies.sort_by(f64::total_cmp);
    latencies
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let at = ((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[at]
}

async fn run(args: &Args, n: usize) -> Value {
    let dir = std::env::temp_dir().join("bind-storm");
    std::fs::create_dir_all(&dir).expect("work dir");
    let mut server = match &args.kubeconfig {
        Some(path) => Server::real(path).await,
        None => Server::memapi(&dir).await,
    };
    let log = dir.join(format!("{}.log", args.which.label()));
    server.clean_up().await;
    let accounts = match (args.as_service_accounts, server.is_real()) {
        (true, true) => {
            let client = server.client();
            Some((
                identity::account(&client, server.kubeconfig(), &dir, "pv-controller").await,
                identity::account(&client, server.kubeconfig(), &dir, "neighbour").await,
            ))
        }
        (true, false) => panic!("--as-service-accounts needs a real API server (--kubeconfig)"),
        (false, _) => None,
    };
    let controller_kubeconfig = accounts.as_ref().map_or_else(
        || server.kubeconfig().to_path_buf(),
        |(controller, _)| controller.kubeconfig.clone(),
    );
    // The empty-cluster baseline: the controller started on a cluster
    // without the bench's objects, measured after it settled.
    let baseline = {
        let controller = Controller::start(args.which, &controller_kubeconfig, &args.extra, &log);
        tokio::time::sleep(Duration::from_secs(5)).await;
        controller.peak_rss_mib()
    };
    server.create_classes(workload::classes()).await;
    let shapes: Vec<Shape> = (0..n).map(|i| Shape::of(i, args.plain)).collect();
    let seeding = Instant::now();
    let claims = shapes
        .iter()
        .enumerate()
        .map(|(i, shape)| workload::claim_of(STORM, i, shape, "default"))
        .collect();
    let uids = server.create_claims(claims).await;
    let volumes = shapes
        .iter()
        .enumerate()
        .map(|(i, shape)| {
            let prebound = shape.delayed().then(|| ("default", uids[i].as_str()));
            workload::volume_of(STORM, i, shape, prebound)
        })
        .collect();
    server.create_volumes(volumes).await;
    eprintln!(
        "seeded {n} pairs in {:.1} s",
        seeding.elapsed().as_secs_f64()
    );
    let tracker = Tracker::start(server.client()).await;
    server.start_counting().await;

    let neighbour = match args.neighbour {
        Some(rate) => {
            let client = accounts.as_ref().map_or_else(
                || server.client(),
                |(_, neighbour)| neighbour.client.clone(),
            );
            let neighbour = neighbour::Neighbour::start(client, rate).await;
            tokio::time::sleep(neighbour::ALONE).await;
            Some(neighbour)
        }
        None => None,
    };
    let mut controller = Controller::start(args.which, &controller_kubeconfig, &args.extra, &log);
    let start = Instant::now();
    let limit_path = args
        .limit_path
        .then(|| limit_path::LimitPath::start(log.clone(), start));
    let storm_from = neighbour.as_ref().map(neighbour::Neighbour::now);
    let bench_cpu = process::cpu_seconds("self");
    // Until every claim is Bound, or nothing was bound for `stall` (a
    // controller that leaves claims Pending for good), or the time is up.
    let (mut last_count, mut last_progress) = (0, start);
    loop {
        let count = tracker.storm_bound();
        if count > last_count {
            (last_count, last_progress) = (count, Instant::now());
        }
        let stalled = last_progress.elapsed() > args.stall;
        if count >= n || stalled || start.elapsed() > args.timeout || !controller.running() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let neighbour = neighbour
        .zip(storm_from)
        .map_or(Value::Null, |(neighbour, from)| {
            neighbour.report(from, neighbour.now())
        });
    let all_bound = last_count >= n;
    let seconds = last_progress.duration_since(start).as_secs_f64();
    let cpu = controller.cpu_seconds();
    // The bench's own CPU meanwhile: memapi serving the storm (on a real
    // server, only the bench's watch of claims).
    let bench_cpu = process::cpu_seconds("self") - bench_cpu;
    let rss = controller.peak_rss_mib();
    let timeline = tracker.storm_timeline(start);
    let limit_path = limit_path.map_or(Value::Null, |path| path.points());
    // Writes that follow the last Bound (phase writes of spare volumes,
    // say) count too.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let writes = server.writes().await;
    let latencies = latency(&server, &tracker, args.latency).await;
    let (pending, oversized, broken) = check(server.client(), n).await;
    let rss_after = controller.peak_rss_mib();
    drop(controller);
    let cold_start = if args.cold_start && args.which == Which::Ours {
        let objects = n + latencies.len();
        cold::measure(
            &mut server,
            objects,
            &args.extra,
            &dir.join("cold-start.log"),
        )
        .await
    } else {
        Value::Null
    };
    // The after pass below writes on a server without the run's objects.
    if server.is_real() || args.ceiling.is_some() {
        server.clean_up().await;
    }
    let ceiling_after = match &args.ceiling {
        Some(before) => Some(write_ceiling_after(&server, args.plain, n, before).await),
        None => None,
    };
    // The server's sustained pace before the run and after it, on the
    // history the run left in etcd: the run happened between the two.
    let around = args
        .ceiling
        .as_ref()
        .zip(ceiling_after)
        .map(|(before, after)| (before.writes_per_second + after) / 2.0);
    let efficiency = |ceiling: Option<f64>| match (ceiling, writes.known) {
        (Some(ceiling), true) => {
            json!((n as f64 / seconds) / (ceiling / ((writes.volume + writes.claim) / n as f64)))
        }
        _ => Value::Null,
    };
    let per_pair = |x: f64| {
        if writes.known {
            json!(x / n as f64)
        } else {
            Value::Null
        }
    };
    let mut result = json!({
        "commit": args.commit,
        "controller": args.which.label(),
        "server": if server.is_real() { "kube-apiserver" } else { "memapi" },
        "mix": if args.plain { "plain" } else { "full" },
        "controller_flags": args.extra.join(" "),
        "pairs": n,
        "all_bound": all_bound,
        "seconds_to_all_bound": seconds,
        "seconds_bound_at": timeline,
        "pairs_per_second": n as f64 / seconds,
        "writes_per_pair": per_pair(writes.volume + writes.claim),
        "pv_writes_per_pair": per_pair(writes.volume),
        "pvc_writes_per_pair": per_pair(writes.claim),
        "conflicts_409": if writes.known { json!(writes.conflicts) } else { Value::Null },
        "ceiling_writes_per_second": args.ceiling.as_ref().map(|c| c.writes_per_second),
        "ceiling_burst_writes_per_second": args.ceiling.as_ref().map(|c| c.burst_writes_per_second),
        "ceiling_writers": args.ceiling.as_ref().map(|c| c.writers),
        "ceiling_wire_form": args.ceiling.as_ref().map(|c| c.wire_form.name()),
        "ceiling_server_cpu_us_per_write": args.ceiling.as_ref().and_then(|c| c.server_cpu_per_write).map(|s| s * 1e6),
        "ceiling_etcd_cpu_us_per_write": args.ceiling.as_ref().and_then(|c| c.etcd_cpu_per_write).map(|s| s * 1e6),
        // Pairs a second against the pairs a second the server could take
        // at the controller's writes per pair: the sustained ceiling, and
        // the best 5 s of the burst pass.
        "efficiency": efficiency(args.ceiling.as_ref().map(|c| c.writes_per_second)),
        "efficiency_against_burst": efficiency(args.ceiling.as_ref().map(|c| c.burst_writes_per_second)),
        "ceiling_after_writes_per_second": ceiling_after,
        // Against the mean of the sustained pace before and after the run.
        "efficiency_around": efficiency(around),
        "claims_pending": pending,
        "claims_oversized": oversized,
        "bindings_broken": broken,
        "cpu_seconds": cpu,
        "bench_cpu_seconds": bench_cpu,
        "peak_rss_mib": rss,
        "peak_rss_mib_with_latency_runs": rss_after,
        "baseline_rss_mib": baseline,
        "bytes_per_object": (rss - baseline) * 1_048_576.0 / (2.0 * n as f64),
        "cold_start": cold_start,
        "identity": if accounts.is_some() { "service-accounts" } else { "kubeconfig" },
        "neighbour": neighbour,
        "latency_ms": {
            "tries": latencies.len(),
            "median": percentile(&latencies, 0.5),
            "p99": percentile(&latencies, 0.99),
            "max": latencies.last().copied().unwrap_or(f64::NAN),
        },
    });
    result["limit_path"] = limit_path;
    result
}

/// The commit the bench runs on (with `+` when the tree has changes other
/// than to the results file `out`), so the results file tells each
/// version's runs apart.
fn commit(out: Option<&Path>) -> Option<String> {
    let git = |args: &[&str]| {
        let output = std::process::Command::new("git").args(args).output().ok()?;
        output
            .status
            .success()
            .then(|| String::from_utf8_lossy(&output.stdout).trim().to_owned())
    };
    let head = git(&["rev-parse", "--short", "HEAD"])?;
    let mut status = vec!["status", "--porcelain", "--untracked-files=no", "--", "."];
    // A results file outside the tree is no change of it (and git refuses
    // a pathspec outside the repository).
    let inside = |out: &&Path| {
        out.is_relative() || std::env::current_dir().is_ok_and(|dir| out.starts_with(dir))
    };
    let exclude = out
        .filter(inside)
        .map(|out| format!(":(exclude){}", out.display()));
    status.extend(exclude.as_deref());
    let dirty = git(&status)?;
    Some(if dirty.is_empty() {
        head
    } else {
        format!("{head}+")
    })
}

/// The median of `values`, as the latency figures take it ([`percentile`]).
fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    percentile(values, 0.5)
}

/// Microseconds per pair (wall clock and CPU), median over the runs of
/// each N, and their growth from the smallest N: on a small shared
/// machine a single run can be off by a quarter.
fn summary(results: &[Value]) {
    let mut by_n: std::collections::BTreeMap<u64, (Vec<f64>, Vec<f64>)> = Default::default();
    for r in results {
        if let (Some(n), Some(wall), Some(cpu)) = (
            r["pairs"].as_u64(),
            r["seconds_to_all_bound"].as_f64(),
            r["cpu_seconds"].as_f64(),
        ) {
            let entry = by_n.entry(n).or_default();
            entry.0.push(wall / n as f64 * 1e6);
            entry.1.push(cpu / n as f64 * 1e6);
        }
    }
    println!("| pairs | runs | median µs per pair | growth | median CPU µs per pair | growth |");
    println!("|---|---|---|---|---|---|");
    let mut first = None;
    for (n, (mut wall, mut cpu)) in by_n {
        let runs = wall.len();
        let (wall, cpu) = (median(&mut wall), median(&mut cpu));
        let (wall0, cpu0) = *first.get_or_insert((wall, cpu));
        println!(
            "| {n} | {runs} | {wall:.0} | {:.2}x | {cpu:.0} | {:.2}x |",
            wall / wall0,
            cpu / cpu0
        );
    }
}

fn table(result: &Value) {
    let Some(fields) = result.as_object() else {
        return;
    };
    println!("| figure | value |\n|---|---|");
    for (key, value) in fields {
        match value {
            Value::Object(inner) => {
                for (k, v) in inner {
                    println!("| {key}.{k} | {} |", show(v));
                }
            }
            _ => println!("| {key} | {} |", show(value)),
        }
    }
}

fn show(value: &Value) -> String {
    match value {
        Value::Number(n) if n.is_f64() => format!("{:.3}", n.as_f64().unwrap_or(f64::NAN)),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

#[tokio::main]
async fn main() {
    let mut args = Args::parse();
    if let Some((input, dir)) = &args.plot {
        plot::draw(input, dir).expect("draw the plots");
        return;
    }
    if let Some((input, out)) = &args.plot_limit_path {
        plot::draw_limit_path(input, out).expect("draw the limit's path");
        println!("plot written to {}", out.display());
        return;
    }
    args.commit = commit(args.out.as_deref());
    if args.probe_ceiling {
        args.ceiling = Some(write_ceiling(&args).await);
    }
    let mut results = Vec::new();
    // Round by round, so that every N sees the machine as it is at the
    // time (a shared machine's speed drifts by more than the growth
    // measured).
    for _ in 0..args.repeat.max(1) {
        for &n in &args.pairs {
            let result = run(&args, n).await;
            println!("{result}");
            table(&result);
            append(&args, &result);
            results.push(result);
        }
    }
    summary(&results);
}

/// The sustained pass again after a run of `storm` pairs, on the run's
/// server once its objects are gone (the caller cleans up), with the
/// writers that won it before: the server's pace on the history the run
/// left in etcd.
async fn write_ceiling_after(
    server: &Server,
    plain: bool,
    storm: usize,
    before: &ceiling::Ceiling,
) -> f64 {
    let rate = ceiling::after(server, plain, storm, before.writers, before.wire_form).await;
    server.clean_up().await;
    eprintln!(
        "write ceiling after the run: {rate:.0} writes/s sustained over {storm} pairs ({} writers), against {:.0} before",
        before.writers, before.writes_per_second
    );
    rate
}

/// The pairs of the invocation's largest storm, which the ceiling's
/// sustained passes write as many of.
fn largest_storm(args: &Args) -> usize {
    args.pairs.iter().copied().max().unwrap_or(1000)
}

/// The server the ceiling is measured on: the runs' real one, or a memapi
/// of its own.
async fn probe_server(args: &Args) -> Server {
    let dir = std::env::temp_dir().join("bind-storm");
    std::fs::create_dir_all(&dir).expect("work dir");
    match &args.kubeconfig {
        Some(path) => Server::real(path).await,
        None => Server::memapi(&dir).await,
    }
}

/// The server's write ceiling for the controller's write mix, measured on
/// a server as the runs get it, with no controller running, for a storm
/// of the largest N of the runs.
async fn write_ceiling(args: &Args) -> ceiling::Ceiling {
    let server = probe_server(args).await;
    server.clean_up().await;
    let storm = largest_storm(args);
    let found = ceiling::probe(&server, args.plain, storm, args.wire_form).await;
    server.clean_up().await;
    println!(
        "write ceiling: {:.0} writes/s sustained over {storm} pairs, best 5 s {:.0} writes/s ({} writers)",
        found.writes_per_second, found.burst_writes_per_second, found.writers
    );
    found
}

/// Appends one run to the `--out` file, if any.
fn append(args: &Args, result: &Value) {
    if let Some(out) = &args.out {
        use std::io::Write;
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(out)
            .expect("results file");
        writeln!(file, "{result}").expect("write results");
    }
}
