//! Two controllers on one API server, competing for one Lease: only the
//! leader writes, the follower keeps its caches warm, and when the leader
//! stops (cleanly or not) the follower takes over and binding goes on.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::builders::*;
use common::harness::{check_invariants, settle};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use pv_controller::controller_base::{BaseConfig, ControllerBase, IdleProbe};
use pv_controller::leader::{LeaderElector, LeaseConfig};
use pv_controller::memapi::{MemApi, Verb};
use pv_controller::metrics::Metrics;
use pv_controller::server::Readiness;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// One running controller and the levers a test needs.
struct Candidate {
    metrics: Arc<Metrics>,
    idle: IdleProbe,
    readiness: Readiness,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<()>,
}

fn start(api: &MemApi, identity: &str) -> Candidate {
    let base = ControllerBase::new(
        api.client(),
        BaseConfig {
            resync_period: Duration::from_secs(5),
            instance: identity.to_string(),
            ..BaseConfig::default()
        },
    )
    .unwrap();
    let elector = LeaderElector::new(
        api.client(),
        LeaseConfig::new("kube-system", "pv-controller", identity),
    );
    let (stop, stopped) = oneshot::channel::<()>();
    Candidate {
        metrics: base.metrics(),
        idle: base.idle_probe(),
        readiness: base.readiness(),
        stop: Some(stop),
        task: tokio::spawn(async move {
            base.run_elected(elector, async move {
                let _ = stopped.await;
            })
            .await
            .unwrap();
        }),
    }
}

/// Binding writes this controller sent (spec and status of PVs and PVCs).
fn writes(candidate: &Candidate) -> u64 {
    [
        ("persistentvolumes", ""),
        ("persistentvolumes", "status"),
        ("persistentvolumeclaims", ""),
        ("persistentvolumeclaims", "status"),
    ]
    .iter()
    .map(|(resource, sub)| candidate.metrics.api_writes_to(resource, sub))
    .sum()
}

/// Binding writes the server saw, from anyone.
fn served_writes(api: &MemApi) -> u64 {
    let stats = api.requests();
    ["persistentvolumes", "persistentvolumeclaims"]
        .iter()
        .flat_map(|r| [(*r, None), (*r, Some("status"))])
        .map(|(r, s)| stats.count(Verb::Update, r, s))
        .sum()
}

fn holder(api: &MemApi) -> Option<String> {
    api.get::<Lease>(Some("kube-system"), "pv-controller")?
        .spec?
        .holder_identity
}

fn bound_claims(api: &MemApi) -> usize {
    api.list::<PersistentVolumeClaim>()
        .iter()
        .filter(|c| c.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound"))
        .count()
}

fn seed_pair(api: &MemApi, i: usize) {
    api.create(&volume(&format!("volume-{i}"), "1Gi").build())
        .unwrap();
    api.create(&claim(&format!("claim-{i}"), &format!("uid-{i}"), "1Gi").build())
        .unwrap();
}

/// Waits (paused time) until `identity` holds the lease; returns how long.
async fn until_holder(api: &MemApi, identity: &str) -> Duration {
    let started = Instant::now();
    while holder(api).as_deref() != Some(identity) {
        assert!(started.elapsed() < Duration::from_secs(120), "no takeover");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    started.elapsed()
}

#[tokio::test(start_paused = true)]
async fn only_the_leader_writes_and_a_clean_stop_hands_over_at_once() {
    let api = MemApi::new();
    for i in 0..3 {
        seed_pair(&api, i);
    }
    let mut a = start(&api, "a");
    until_holder(&api, "a").await;
    let b = start(&api, "b");
    settle(&api, &a.idle).await;

    assert_eq!(bound_claims(&api), 3);
    assert!(writes(&a) > 0, "the leader bound the claims");
    assert_eq!(writes(&b), 0, "the follower wrote nothing");
    assert_eq!(served_writes(&api), writes(&a), "every write came from a");
    assert!(
        b.readiness.is_ready(),
        "a follower is ready: its caches synced"
    );
    assert_eq!(holder(&api).as_deref(), Some("a"));

    let _ = a.stop.take().map(|stop| stop.send(()));
    (&mut a.task).await.unwrap();
    assert_eq!(holder(&api), None, "a released the lease on shutdown");
    let a_writes = writes(&a);
    let handover = until_holder(&api, "b").await;
    assert!(
        handover <= Duration::from_secs(3),
        "b takes over at its next retry, not after the lease duration: {handover:?}"
    );

    seed_pair(&api, 3);
    settle(&api, &b.idle).await;
    assert_eq!(bound_claims(&api), 4, "binding goes on under b");
    assert!(writes(&b) > 0);
    assert_eq!(writes(&a), a_writes, "a wrote nothing after stopping");
    assert_eq!(check_invariants(&api), Vec::<String>::new());
    let lease = api
        .get::<Lease>(Some("kube-system"), "pv-controller")
        .unwrap();
    assert_eq!(lease.spec.unwrap().lease_transitions, Some(1));
}

#[tokio::test(start_paused = true)]
async fn a_crashed_leader_is_replaced_after_the_lease_expires() {
    let api = MemApi::new();
    seed_pair(&api, 0);
    let mut a = start(&api, "a");
    until_holder(&api, "a").await;
    let b = start(&api, "b");
    settle(&api, &a.idle).await;
    assert_eq!(writes(&b), 0);

    a.task.abort();
    let _ = (&mut a.task).await;
    assert_eq!(
        holder(&api).as_deref(),
        Some("a"),
        "a crash releases nothing"
    );
    let takeover = until_holder(&api, "b").await;
    assert!(
        (Duration::from_secs(13)..=Duration::from_secs(18)).contains(&takeover),
        "b waits out the 15 s lease (renewed up to 2 s before the crash), then takes over at its next retry: {takeover:?}"
    );
    seed_pair(&api, 1);
    settle(&api, &b.idle).await;
    assert_eq!(bound_claims(&api), 2);
    assert!(writes(&b) > 0);
}
