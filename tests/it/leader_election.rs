//! Two controllers on one API server, competing for one Lease: only the
//! leader writes, the follower keeps its caches warm, and when the leader
//! stops (cleanly or not) the follower takes over and binding goes on.

use std::sync::Arc;
use std::time::Duration;

use crate::harness::{binder_only, check_invariants, settle};
use crate::process::summed;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Event as CoreEvent, PersistentVolume, PersistentVolumeClaim};
use kube::client::ClientBuilder;
use memapi::{MemApi, Reactor, Verb};
use pv_controller::ClientOptions;
use pv_controller::Clients;
use pv_controller::IdleProbe;
use pv_controller::LeaseConfig;
use pv_controller::Metrics;
use pv_controller::Readiness;
use pv_controller::WriteGate;
use pv_controller::pv;
use pv_controller::{App, AppConfig, AppError, RunError};
use testkit::*;
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

/// The production wiring on `api`: a gated, limited controller client and
/// the lease's own client.
fn clients(api: &MemApi, options: ClientOptions) -> Clients {
    Clients::build(
        ClientBuilder::new(api.service(), "default"),
        ClientBuilder::new(api.service(), "default"),
        ClientBuilder::new(api.service(), "default"),
        options,
    )
}

/// The PersistentVolume controller alone, elected on the test Lease as
/// `identity`.
fn elected(identity: &str, resync_period: Duration) -> AppConfig {
    AppConfig {
        instance: identity.to_string(),
        election: Some(LeaseConfig::new("kube-system", "pv-controller", identity)),
        ..binder_only(pv::Config {
            resync_period,
            ..pv::Config::default()
        })
    }
}

async fn start(api: &MemApi, identity: &str) -> Candidate {
    let clients = clients(api, ClientOptions::default());
    let app = App::start(clients, elected(identity, Duration::from_secs(5)))
        .await
        .unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    Candidate {
        metrics: app.metrics(),
        idle: app.idle_probe(),
        readiness: app.health().readiness,
        stop: Some(stop),
        task: tokio::spawn(async move {
            app.run(async move {
                let _ = stopped.await;
            })
            .await
            .unwrap();
        }),
    }
}

/// Writes `metrics` counted to `resource`/`subresource`, whatever their
/// controller, verb and outcome.
fn writes_to(metrics: &Metrics, resource: &str, subresource: &str) -> u64 {
    summed(
        metrics,
        "pv_controller_api_writes_total",
        &[("resource", resource), ("subresource", subresource)],
    )
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
    .map(|(resource, sub)| writes_to(&candidate.metrics, resource, sub))
    .sum()
}

/// Binding writes the server saw, from anyone.
fn served_writes(api: &MemApi) -> u64 {
    let stats = api.requests();
    ["persistentvolumes", "persistentvolumeclaims"]
        .iter()
        .flat_map(|r| [(*r, None), (*r, Some("status"))])
        .map(|(r, s)| stats.count(Verb::Patch, r, s))
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
    let mut a = start(&api, "a").await;
    until_holder(&api, "a").await;
    let b = start(&api, "b").await;
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
    let mut a = start(&api, "a").await;
    until_holder(&api, "a").await;
    let b = start(&api, "b").await;
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

/// A leader started on `clients`, with the handle of its run.
struct Leader {
    controller: Arc<pv_controller::pv::Controller>,
    task: JoinHandle<Result<(), AppError>>,
    _stop: oneshot::Sender<()>,
}

async fn lead(
    controller_client: kube::Client,
    lease_client: kube::Client,
    gate: WriteGate,
) -> Leader {
    // No admin port here, so no review is ever sent.
    let clients = Clients::with_gate(controller_client, lease_client.clone(), lease_client, gate);
    let app = App::start(clients, elected("a", Duration::from_secs(15)))
        .await
        .unwrap();
    let controller = app.controllers().persistentvolume.clone().unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(app.run(async move {
        let _ = stopped.await;
    }));
    Leader {
        controller,
        task,
        _stop: stop,
    }
}

/// The highest resourceVersion among volumes, claims and events: the last
/// write the controller got through.
fn last_controller_write(api: &MemApi) -> u64 {
    let rv = |meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta| {
        meta.resource_version
            .as_deref()
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    let volumes = api
        .list::<PersistentVolume>()
        .iter()
        .map(|v| rv(&v.metadata))
        .max();
    let claims = api
        .list::<PersistentVolumeClaim>()
        .iter()
        .map(|c| rv(&c.metadata))
        .max();
    let events = api
        .list::<CoreEvent>()
        .iter()
        .map(|e| rv(&e.metadata))
        .max();
    [volumes, claims, events]
        .into_iter()
        .flatten()
        .max()
        .unwrap_or(0)
}

/// A slow API server: renewals hang, and the controller's writes take
/// seconds. The moment the renew deadline passes, no write of the leader
/// reaches the server any more, not even one it started before (in-flight
/// syncs are cancelled), and the process gives up leadership.
#[tokio::test(start_paused = true)]
async fn losing_the_lease_stops_every_write_at_once() {
    let api = MemApi::new();
    let clients = clients(&api, ClientOptions::default());
    let gate = clients.gate.clone();
    let leader = lead(clients.controller, clients.lease, gate.clone()).await;
    until_holder(&api, "a").await;

    api.add_reactor(
        Reactor::on(Verb::Update, "leases")
            .delay(Duration::from_secs(60))
            .always(),
    );
    api.add_reactor(
        Reactor::on(Verb::Patch, "persistentvolumeclaims")
            .delay(Duration::from_secs(4))
            .always(),
    );
    // More claims than workers, so that some are still to be written when
    // the deadline passes, whatever the number of workers.
    let pairs = 2 * pv::DEFAULT_CLAIM_WORKERS;
    for i in 0..pairs {
        seed_pair(&api, i);
    }
    while gate.is_open() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let closed_at = Instant::now();
    let last_allowed = last_controller_write(&api);
    let result = leader.task.await.unwrap();
    assert!(
        matches!(result, Err(AppError::Run(RunError::LeadershipLost))),
        "{result:?}"
    );
    assert!(
        closed_at.elapsed() <= Duration::from_millis(10),
        "leadership is given up as the gate closes: {:?}",
        closed_at.elapsed()
    );
    assert_eq!(leader.controller.operations().running_count(), 0);
    tokio::time::sleep(Duration::from_secs(120)).await;
    assert_eq!(
        last_controller_write(&api),
        last_allowed,
        "no write of the controller landed after the renew deadline"
    );
    assert!(
        bound_claims(&api) < pairs,
        "the test must catch writes in flight"
    );
}

/// 500 claims wait on an external provisioner, with the default client
/// limit of 20 requests per second and 50 ms of latency: the controller's
/// traffic saturates its limit for two minutes, but renewals travel on the
/// lease's own client, so the leader keeps the lease all along.
#[tokio::test(start_paused = true)]
async fn a_queue_of_controller_traffic_never_costs_the_lease() {
    let api = MemApi::new();
    api.create(&storage_class("ext", "example.com/external", "Immediate"))
        .unwrap();
    for i in 0..500 {
        api.create(
            &claim(&format!("claim-{i}"), &format!("uid-{i}"), "1Gi")
                .class("ext")
                .build(),
        )
        .unwrap();
    }
    api.add_reactor(Reactor::any().delay(Duration::from_millis(50)).always());
    let options = ClientOptions {
        qps: 20.0,
        burst: 30,
        ..ClientOptions::default()
    };
    let clients = clients(&api, options);
    let gate = clients.gate.clone();
    let leader = lead(clients.controller, clients.lease, gate).await;
    until_holder(&api, "a").await;
    api.reset_requests();
    tokio::time::sleep(Duration::from_secs(120)).await;
    assert!(
        !leader.task.is_finished(),
        "still leading after two minutes"
    );
    assert_eq!(holder(&api).as_deref(), Some("a"));
    let lease = api
        .get::<Lease>(Some("kube-system"), "pv-controller")
        .unwrap();
    assert_eq!(lease.spec.unwrap().lease_transitions, Some(0));
    let stats = api.requests();
    let lease_writes = stats.count(Verb::Update, "leases", None);
    let controller_requests = stats.log().len() as u64 - lease_writes;
    assert!(
        controller_requests >= 20 * 100,
        "the controller's limit was saturated: {controller_requests} requests in 120 s"
    );
    assert!(lease_writes >= 55, "renewed every 2 s: {lease_writes}");
    leader.task.abort();
}

/// A follower whose claim watch missed a deletion must not act on the
/// claim once it leads: it lists every kind again first. Without that, the
/// new leader binds the deleted claim to the next volume that fits (the
/// volume's claimRef written, then the volume released for a claim that
/// never used it, and reclaimed by its policy).
#[tokio::test(start_paused = true)]
async fn a_new_leader_lists_again_before_acting_on_a_watch_that_missed_a_deletion() {
    let api = MemApi::new();
    let mut a = start(&api, "a").await;
    until_holder(&api, "a").await;
    let b = start(&api, "b").await;
    api.create(&claim("gone", "uid-gone", "1Gi").build())
        .unwrap();
    settle(&api, &a.idle).await;
    assert!(b.readiness.is_ready(), "b holds the claim in its store");

    // Every open watch misses the claim's deletion.
    api.lose_events("persistentvolumeclaims", 1).unwrap();
    assert!(api.remove::<PersistentVolumeClaim>(Some("default"), "gone"));
    let _ = a.stop.take().map(|stop| stop.send(()));
    (&mut a.task).await.unwrap();

    // A volume the deleted claim would fit, seen by b before it leads.
    api.create(&volume("fits", "1Gi").build()).unwrap();
    until_holder(&api, "b").await;
    settle(&api, &b.idle).await;

    let fits = api.get::<PersistentVolume>(None, "fits").unwrap();
    assert_eq!(
        fits.spec.and_then(|spec| spec.claim_ref),
        None,
        "the new leader bound the volume to a claim deleted before it led"
    );
    assert_eq!(
        fits.status.and_then(|status| status.phase).as_deref(),
        Some("Available")
    );
    assert_eq!(
        writes_to(&b.metrics, "persistentvolumes", ""),
        0,
        "no volume spec written"
    );
    assert_eq!(
        writes_to(&b.metrics, "persistentvolumeclaims", ""),
        0,
        "no claim written"
    );
}

/// A replica that wins the Lease at its first attempt lists every kind
/// once: its first lists began after it held the Lease, so they already
/// hold everything an earlier leader wrote. A replica that won the Lease
/// only after its lists began lists again (the test above).
#[tokio::test(start_paused = true)]
async fn a_replica_that_leads_from_its_first_attempt_lists_each_kind_once() {
    let api = MemApi::new();
    for i in 0..3 {
        seed_pair(&api, i);
    }
    let a = start(&api, "a").await;
    until_holder(&api, "a").await;
    settle(&api, &a.idle).await;

    assert_eq!(bound_claims(&api), 3, "the leader bound the claims");
    let stats = api.requests();
    for resource in ["persistentvolumes", "persistentvolumeclaims"] {
        assert_eq!(
            stats.count(Verb::List, resource, None),
            1,
            "{resource} listed once"
        );
    }
}
