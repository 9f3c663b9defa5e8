//! A second client beside the storm (`--neighbour-writes-per-second N`):
//! it writes Leases of its own, N times a second on a steady clock, each
//! write to the next of [`LEASES`] in turn (each in its own task, at most
//! [`MOST_IN_FLIGHT`] at once; a tick that finds them all busy is a write
//! not made), for [`ALONE`] before the controller starts and then through
//! the storm. It reports its writes a second and their latency alone and
//! during the storm: what our storm costs another client of the server.
//! Its writes go to as many objects as it may have in flight, as a
//! controller's do, so they never wait for each other: a client that
//! wrote one object at that rate would, once the server slows, queue its
//! own writes behind each other on that object.

use std::sync::Arc;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::{Value, json};

/// How long the neighbour writes alone before the controller starts.
pub(crate) const ALONE: Duration = Duration::from_secs(5);

/// The most writes of the neighbour in flight at once.
const MOST_IN_FLIGHT: usize = 64;

/// How many Leases the neighbour writes, in turn.
const LEASES: u64 = MOST_IN_FLIGHT as u64;

/// The name of the neighbour's Lease `i`.
fn name(i: u64) -> String {
    format!("bind-storm-neighbour-{i}")
}

/// Each write that ended: when it was sent (from the neighbour's start),
/// how long it took, and whether it succeeded.
type Log = Arc<Mutex<Vec<(f64, f64, bool)>>>;

/// The neighbour, writing; it stops when dropped.
pub(crate) struct Neighbour {
    rate: f64,
    started: Instant,
    log: Log,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Neighbour {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Neighbour {
    /// Creates its Leases and starts writing `rate` times a second.
    pub(crate) async fn start(client: kube::Client, rate: f64) -> Self {
        let leases: Api<Lease> = Api::namespaced(client, "default");
        for i in 0..LEASES {
            let lease: Lease = serde_json::from_value(json!({
                "metadata": {"name": name(i)},
                "spec": {"holderIdentity": "bind-storm-neighbour"},
            }))
            .expect("a Lease");
            match leases.create(&PostParams::default(), &lease).await {
                Ok(_) => {}
                Err(kube::Error::Api(status)) if status.code == 409 => {}
                Err(error) => panic!("the neighbour's Lease: {error}"),
            }
        }
        let log: Log = Arc::default();
        let started = Instant::now();
        let kept = Arc::clone(&log);
        let task = tokio::spawn(async move {
            let slots = Arc::new(tokio::sync::Semaphore::new(MOST_IN_FLIGHT));
            let mut ticker = tokio::time::interval(Duration::from_secs_f64(1.0 / rate));
            ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
            let mut count: u64 = 0;
            loop {
                ticker.tick().await;
                let Ok(slot) = Arc::clone(&slots).try_acquire_owned() else {
                    continue;
                };
                count += 1;
                let (leases, log) = (leases.clone(), Arc::clone(&kept));
                tokio::spawn(async move {
                    let sent = Instant::now();
                    let patch = json!({"spec": {"leaseTransitions": count % 1_000_000}});
                    let result = leases
                        .patch(
                            &name(count % LEASES),
                            &PatchParams::default(),
                            &Patch::Merge(&patch),
                        )
                        .await;
                    let took = sent.elapsed().as_secs_f64();
                    log.lock().expect("log").push((
                        sent.duration_since(started).as_secs_f64(),
                        took,
                        result.is_ok(),
                    ));
                    drop(slot);
                });
            }
        });
        Self {
            rate,
            started,
            log,
            task,
        }
    }

    /// Seconds since the neighbour started.
    pub(crate) fn now(&self) -> f64 {
        self.started.elapsed().as_secs_f64()
    }

    /// Its writes a second and their latency between `from` and `to`
    /// (seconds since it started).
    fn between(&self, from: f64, to: f64) -> Value {
        let log = self.log.lock().expect("log");
        let mut latencies: Vec<f64> = log
            .iter()
            .filter(|(sent, _, ok)| *ok && (from..to).contains(sent))
            .map(|(_, took, _)| took * 1000.0)
            .collect();
        let failed = log
            .iter()
            .filter(|(sent, _, ok)| !*ok && (from..to).contains(sent))
            .count();
        latencies.sort_by(f64::total_cmp);
        let at = |q: f64| {
            latencies
                .get(((latencies.len() as f64 - 1.0) * q).round() as usize)
                .copied()
        };
        json!({
            "seconds": to - from,
            "writes_per_second": latencies.len() as f64 / (to - from).max(1e-9),
            "failed": failed,
            "latency_ms_median": at(0.5),
            "latency_ms_p99": at(0.99),
        })
    }

    /// Its figures alone (the first [`ALONE`]) and from `storm_from` to
    /// `storm_to` (seconds since it started).
    pub(crate) fn report(&self, storm_from: f64, storm_to: f64) -> Value {
        json!({
            "target_writes_per_second": self.rate,
            "alone": self.between(0.0, ALONE.as_secs_f64().min(storm_from)),
            "during_storm": self.between(storm_from, storm_to),
        })
    }
}
