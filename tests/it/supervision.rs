//! The process an operator can trust: it never dies silently or hangs
//! (a watch that keeps failing or a worker that panics stops it with an
//! error and an unhealthy `/livez`; a shutdown is honoured while the caches
//! fill), and it does not grow without bound (a standby forgets deleted
//! objects; claims waiting for a volume are forgotten when deleted and are
//! not re-synced by every resync of a volume that was Available already).

use std::sync::Arc;
use std::time::Duration;

use crate::harness::{binder_only, clients, settle};
use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use memapi::{MemApi, Reactor, Verb};
use pv_controller::LeaseConfig;
use pv_controller::pv;
use pv_controller::pv::PluginError;
use pv_controller::pv::ProvisionRequest;
use pv_controller::pv::Settings;
use pv_controller::pv::VolumePlugin;
use pv_controller::pv::VolumePlugins;
use pv_controller::testing::LeaderElector;
use pv_controller::{App, AppConfig, AppError, RunError, WatchFailure};
use testkit::*;
use tokio::time::Instant;

/// The process on `api` with `config`, built, not running.
async fn process(api: &MemApi, config: AppConfig) -> App {
    App::start(clients(api), config)
        .await
        .expect("the process starts")
}

/// The PersistentVolume controller alone, with `config`, built, not
/// running.
async fn base(api: &MemApi, config: pv::Config) -> App {
    process(api, binder_only(config)).await
}

#[tokio::test(start_paused = true)]
async fn a_watch_that_keeps_failing_stops_the_controller_and_fails_livez() {
    let api = MemApi::new();
    for verb in [Verb::List, Verb::Watch] {
        api.add_reactor(Reactor::on(verb, "pods").error(500).always());
    }
    let base = process(
        &api,
        AppConfig {
            watch_failure_limit: Duration::from_secs(60),
            ..binder_only(pv::Config::default())
        },
    )
    .await;
    let liveness = base.health().liveness;
    let started = Instant::now();
    let result = base.run(std::future::pending()).await;
    match result {
        Err(AppError::Run(RunError::Watch(WatchFailure::Failing { kind, .. }))) => {
            assert_eq!(kind, "pod");
        }
        other => panic!("expected the pod watch to give up, got {other:?}"),
    }
    assert!(started.elapsed() >= Duration::from_secs(60));
    assert!(started.elapsed() < Duration::from_secs(120));
    let failure = liveness.failure().expect("/livez reports the failure");
    assert!(failure.contains("pod watch"), "{failure}");
}

#[tokio::test(start_paused = true)]
async fn a_shutdown_while_the_caches_fill_is_honoured() {
    let api = MemApi::new();
    api.add_reactor(Reactor::on(Verb::List, "nodes").error(500).always());
    let base = base(&api, pv::Config::default()).await;
    let readiness = base.health().readiness;
    let started = Instant::now();
    let result = base.run(tokio::time::sleep(Duration::from_secs(5))).await;
    assert!(result.is_ok(), "{result:?}");
    assert_eq!(started.elapsed(), Duration::from_secs(5));
    assert!(!readiness.is_ready());
}

/// A plugin whose provisioner check panics, on the claim worker's task.
struct Panicking;

impl VolumePlugin for Panicking {
    fn name(&self) -> &str {
        "kubernetes.io/panicking"
    }

    fn can_provision(&self) -> bool {
        panic!("a bug in a plugin")
    }

    fn provision<'a>(
        &'a self,
        _request: &'a ProvisionRequest,
    ) -> BoxFuture<'a, Result<PersistentVolume, PluginError>> {
        Box::pin(async { Err(PluginError::Failed("never".to_string())) })
    }
}

#[tokio::test(start_paused = true)]
async fn a_worker_that_panics_stops_the_controller_and_fails_livez() {
    let api = MemApi::new();
    api.create(&storage_class(
        "buggy",
        "kubernetes.io/panicking",
        "Immediate",
    ))
    .expect("class");
    api.create(&claim("claim", "uid", "1Gi").class("buggy").build())
        .expect("claim");
    let base = base(
        &api,
        pv::Config {
            settings: Settings {
                plugins: VolumePlugins::default().with(Arc::new(Panicking)),
                ..Settings::default()
            },
            ..pv::Config::default()
        },
    )
    .await;
    let liveness = base.health().liveness;
    let result = base.run(std::future::pending()).await;
    match result {
        Err(AppError::Run(RunError::TaskEnded { task, .. })) => {
            assert!(task.contains("panicked"), "{task}");
        }
        other => panic!("expected the worker's panic to stop the controller, got {other:?}"),
    }
    assert!(liveness.failure().is_some());
}

#[tokio::test(start_paused = true)]
async fn a_standby_forgets_deleted_objects_and_queues_nothing() {
    let api = MemApi::new();
    for i in 0..20 {
        api.create(&volume(&format!("volume-{i}"), "1Gi").build())
            .expect("volume");
        api.create(&claim(&format!("claim-{i}"), &format!("uid-{i}"), "1Gi").build())
            .expect("claim");
    }
    // Another replica holds the lease for the whole test.
    let other = LeaderElector::new(
        api.client(),
        LeaseConfig::new("kube-system", "pv-controller", "other"),
        Default::default(),
    );
    let mut other = other;
    assert!(other.try_acquire_or_renew().await.expect("lease"));
    let renewals = tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_secs(2)).await;
            let _ = other.try_acquire_or_renew().await;
        }
    });

    let standby = process(
        &api,
        AppConfig {
            election: Some(LeaseConfig::new("kube-system", "pv-controller", "standby")),
            ..binder_only(pv::Config::default())
        },
    )
    .await;
    let controller = standby
        .controllers()
        .persistentvolume
        .clone()
        .expect("built");
    let idle = standby.idle_probe();
    let task = tokio::spawn(standby.run(std::future::pending()));
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(
        controller.store().volumes_len(),
        20,
        "the standby's cache is warm"
    );
    for i in 0..20 {
        api.remove::<PersistentVolume>(None, &format!("volume-{i}"));
        api.remove::<PersistentVolumeClaim>(Some("default"), &format!("claim-{i}"));
    }
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(
        controller.store().volumes_len(),
        0,
        "deleted volumes forgotten"
    );
    assert_eq!(
        controller.store().claims_len(),
        0,
        "deleted claims forgotten"
    );
    assert!(idle.is_idle(), "a standby collects no work");
    assert!(!task.is_finished());
    task.abort();
    renewals.abort();
}

/// `pv_controller_waiting_claims`.
fn waiting_claims(metrics: &pv_controller::Metrics) -> u64 {
    let text = metrics.render().expect("metrics");
    text.lines()
        .find_map(|l| l.strip_prefix("pv_controller_waiting_claims "))
        .and_then(|value| value.parse().ok())
        .expect("the gauge")
}

/// `pv_controller_sync_duration_seconds_count` of claim syncs.
fn claim_syncs(metrics: &pv_controller::Metrics) -> u64 {
    let text = metrics.render().expect("metrics");
    text.lines()
        .filter(|l| {
            l.starts_with("pv_controller_sync_duration_seconds_count{")
                && l.contains("kind=\"claim\"")
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

#[tokio::test(start_paused = true)]
async fn waiting_claims_are_forgotten_when_deleted_and_not_resynced_twice() {
    let api = MemApi::new();
    api.create(&volume("small", "1Gi").phase("Available").build())
        .expect("volume");
    for i in 0..10 {
        api.create(&claim(&format!("big-{i}"), &format!("uid-{i}"), "10Gi").build())
            .expect("claim");
    }
    let base = base(
        &api,
        pv::Config {
            resync_period: Duration::from_secs(10),
            ..pv::Config::default()
        },
    )
    .await;
    let metrics = base.metrics();
    let idle = base.idle_probe();
    let task = tokio::spawn(base.run(std::future::pending()));
    settle(&api, &idle).await;
    assert_eq!(waiting_claims(&metrics), 10, "ten claims wait for a volume");

    // The small volume stays Available through every resync: that is no
    // news, so the waiting claims are synced once per period, not twice.
    let before = claim_syncs(&metrics);
    tokio::time::sleep(Duration::from_secs(100)).await;
    let synced = claim_syncs(&metrics) - before;
    assert!(
        synced <= 10 * 11,
        "ten claims over ten periods: {synced} syncs"
    );

    for i in 0..10 {
        api.remove::<PersistentVolumeClaim>(Some("default"), &format!("big-{i}"));
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(waiting_claims(&metrics), 0, "deleted claims no longer wait");
    task.abort();
}
