//! The wiring of the PersistentVolume controller: what it asks of the
//! process's informers (volumes and claims kept in its shadow cache,
//! StorageClasses, nodes, and pods by the claims they use), the handlers
//! that queue volumes and claims, the claim queue with its deciding lane
//! (claims decided one at a time, their plans executing beside each other)
//! and the volume queue with its workers, the periodic resync, and what
//! follows a decision (claims woken when a volume
//! is freed, new volumes parked behind the claims queued before them).
//! Decisions live in [`crate::pv::controller`]; the runner of
//! [`crate::runtime::runner`] runs the workers while the process leads.

mod collector;
mod parking;
mod waiting;
mod work;

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};

use crate::kinds::pod::{PODS_BY_CLAIM, claims_of_pod};
use crate::kinds::{NODE, PERSISTENT_VOLUME, PERSISTENT_VOLUME_CLAIM, POD, STORAGE_CLASS};
use crate::pv::cache::ShadowCache;
use crate::pv::constants::CONTROLLER_NAME;
use crate::pv::controller::{Controller, Listers, Parts, Settings, Writers};
use crate::pv::metrics::PvMetrics;
use crate::pv::packed::RECENT;
use crate::runtime::informer::Store;
use crate::runtime::operations::{DEFAULT_CONCURRENCY, OperationTracker};
use crate::runtime::queue::WorkQueue;
use crate::runtime::shared::{BuildError, Shared};
use crate::runtime::workload::{Pool, Workload};
use collector::StateCollector;
use parking::Parking;
use waiting::FollowUp;
#[cfg(feature = "testing")]
pub use work::sync_claim;
#[cfg(any(test, feature = "testing"))]
pub use work::sync_volume;
use work::{ClaimWork, Handlers, VolumeWork};

/// The controller's name in `--controllers` and in the metrics, as
/// kube-controller-manager's.
pub(crate) const NAME: &str = k8s_names::PERSISTENTVOLUME_BINDER_CONTROLLER;

/// The controller's own settings.
#[derive(Clone, Debug)]
pub struct Config {
    /// How often every volume and claim is synced again, whatever happened
    /// (`--pvclaimbinder-sync-period`).
    pub resync_period: Duration,
    /// What the controller decides.
    pub settings: Settings,
    /// How many long operations (provision, delete, recycle) run at once
    /// (`--max-concurrent-operations`).
    pub max_concurrent_operations: usize,
    /// How many claims' plans execute at once (`--concurrent-claim-syncs`,
    /// at least one); claims are decided one at a time, in queue order.
    pub claim_workers: usize,
    /// How many volumes are synced at once (`--concurrent-volume-syncs`,
    /// at least one).
    pub volume_workers: usize,
}

/// Default of [`Config::claim_workers`]: binding is four writes one after
/// another, each a round trip to the API server, and a busy server takes
/// the most writes a second, spending the least CPU on each, with well
/// over a hundred in flight (its writes to etcd are batched); each plan
/// executing holds its objects and a connection, about 100 KB, and this
/// many keep 100,000 pairs under 1 KB an object (docs/performance-notes.md,
/// "Claim workers"). A slot not in use costs nothing.
pub const DEFAULT_CLAIM_WORKERS: usize = 256;

/// Default of [`Config::volume_workers`]: most volume syncs write nothing.
pub(crate) const DEFAULT_VOLUME_WORKERS: usize = 4;

/// Default of [`Config::resync_period`] (kube-controller-manager's).
pub(crate) const DEFAULT_RESYNC_PERIOD: Duration = Duration::from_secs(15);

impl Default for Config {
    fn default() -> Self {
        Self {
            resync_period: DEFAULT_RESYNC_PERIOD,
            settings: Settings::default(),
            max_concurrent_operations: DEFAULT_CONCURRENCY,
            claim_workers: DEFAULT_CLAIM_WORKERS,
            volume_workers: DEFAULT_VOLUME_WORKERS,
        }
    }
}

/// Builds the controller on the process's parts: its shadow cache becomes
/// the process's store of volumes and claims, its handlers subscribe to
/// them, and its workload (two pools and the resync) is returned for the
/// runner.
pub(crate) fn build(
    shared: &mut Shared,
    config: &Config,
) -> Result<(Arc<Controller>, Workload), BuildError> {
    // Each worker has at most one claim and one volume in flight; each kind
    // keeps as many unpacked as there are workers, and never fewer than the
    // default.
    let in_flight = config.claim_workers + config.volume_workers;
    let cache = Arc::new(ShadowCache::with_recent(RECENT.max(in_flight)));
    let informers = &mut shared.informers;
    informers.provide(
        &PERSISTENT_VOLUME,
        Arc::clone(&cache) as Arc<dyn Store<PersistentVolume>>,
    )?;
    informers.provide(
        &PERSISTENT_VOLUME_CLAIM,
        Arc::clone(&cache) as Arc<dyn Store<PersistentVolumeClaim>>,
    )?;
    let listers = Listers {
        classes: informers.mem_store(&STORAGE_CLASS)?,
        pods: informers.index(&POD, PODS_BY_CLAIM, claims_of_pod)?,
        nodes: informers.store(&NODE)?,
    };
    let writers = Writers {
        volumes: shared
            .writes
            .writer(NAME, informers.store(&PERSISTENT_VOLUME)?),
        claims: shared
            .writes
            .writer(NAME, informers.store(&PERSISTENT_VOLUME_CLAIM)?),
        pods: shared.writes.writer(NAME, informers.store(&POD)?),
    };
    let volume_queue = WorkQueue::new();
    let claim_queue = WorkQueue::new();
    let pv_metrics = PvMetrics::new(&shared.metrics)?;
    let follow_up = FollowUp::new(claim_queue.clone(), Arc::clone(&cache));
    shared.metrics.register(Box::new(StateCollector::new(
        Arc::clone(&cache),
        volume_queue.clone(),
        claim_queue.clone(),
        {
            let follow_up = follow_up.clone();
            move || follow_up.waiting()
        },
    )?))?;
    // A process whose plans go to a journal wakes nobody when a volume is
    // freed: beside the controller that acts, that controller's binds free
    // the volumes this process held for other choices all the time, and
    // each wake would sync every waiting claim again for nothing (the
    // resync still tries waiting claims).
    if shared.journal.is_none() {
        cache.on_volume_freed({
            let follow_up = follow_up.clone();
            move || follow_up.volume_freed()
        });
    }
    let parking = Parking::new(claim_queue.clone(), volume_queue.clone());
    let operations = operation_tracker(config.max_concurrent_operations, pv_metrics.clone());
    let controller = Arc::new(Controller::new(Parts {
        client: shared.client.clone(),
        cache: Arc::clone(&cache),
        listers,
        writers,
        recorder: shared.recorder.for_component(CONTROLLER_NAME),
        operations: operations.clone(),
        settings: config.settings.clone(),
        pv_metrics,
        journal: shared.journal.clone(),
    }));
    let handlers = Handlers {
        cache: Arc::clone(&cache),
        volume_queue: volume_queue.clone(),
        claim_queue: claim_queue.clone(),
        leading: shared.leading.clone(),
        follow_up: follow_up.clone(),
        controller: Arc::clone(&controller),
    };
    let on_claims = handlers.clone();
    informers.on(&PERSISTENT_VOLUME, move |change| handlers.on_volume(change))?;
    informers.on(&PERSISTENT_VOLUME_CLAIM, move |change| {
        on_claims.on_claim(change);
    })?;

    let mut workload = Workload::new(NAME);
    let volume_work = Arc::new(VolumeWork {
        controller: Arc::clone(&controller),
        follow_up: follow_up.clone(),
        parking: parking.clone(),
    });
    workload.pool(Pool::new(
        volume_queue.clone(),
        config.volume_workers,
        |_| "volume",
        move |name, _| Arc::clone(&volume_work).sync(name),
    ));
    let claim_work = Arc::new(ClaimWork {
        controller: Arc::clone(&controller),
        follow_up,
    });
    let released = parking.clone();
    workload.pool(
        Pool::lane(
            claim_queue.clone(),
            config.claim_workers,
            |_| "claim",
            move |key| claim_work.decide(key),
        )
        .after_each(move || released.release_passed()),
    );
    workload.every(config.resync_period, move || {
        work::resync(&cache, &volume_queue, &claim_queue, &parking);
    });
    let stopping = operations.clone();
    workload.on_stop(move || stopping.abort_all());
    workload.busy_while(move || operations.running_count() > 0);
    Ok((controller, workload))
}

/// The tracker of long operations, at most `concurrency` at once, counting
/// each finished one in the controller's operation series.
fn operation_tracker(concurrency: usize, metrics: PvMetrics) -> OperationTracker {
    OperationTracker::with_completion_hook(concurrency, move |report| {
        let operation = report.name.kind();
        if report.outcome.is_success() {
            metrics.volume_operation_completed("", operation, report.elapsed);
        } else {
            metrics.volume_operation_failed("", operation);
        }
    })
}
