//! The wiring of the PersistentVolume controller: what it asks of the
//! process's informers (volumes and claims kept in its store,
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
mod work;

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};

use crate::kinds::pod::{PODS_BY_CLAIM, claims_of_pod};
use crate::kinds::{NODE, PERSISTENT_VOLUME, PERSISTENT_VOLUME_CLAIM, POD, STORAGE_CLASS};
use crate::pv::constants::CONTROLLER_NAME;
use crate::pv::controller::{Binder, Explanation, Settings, binding_order};
use crate::pv::memory::ClaimMemory;
use crate::pv::metrics::PvMetrics;
use crate::pv::operations::Operations;
use crate::pv::packed::RECENT;
use crate::pv::store::PvStore;
use crate::runtime::executor::{Executor, Parts};
use crate::runtime::informer::Store;
use crate::runtime::keys::ObjectKey;
use crate::runtime::operations::{DEFAULT_CONCURRENCY, OperationTracker};
use crate::runtime::queue::WorkQueue;
use crate::runtime::shared::{BuildError, Shared};
use crate::runtime::waiting::Waiting;
#[cfg(any(test, feature = "testing"))]
use crate::runtime::workload::{Ended, turn};
use crate::runtime::workload::{Pool, Workload};
use crate::runtime::write::WriterSet;
use collector::StateCollector;
use parking::Parking;
use work::{Applier, Handlers, Reservations};

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
/// executing holds a connection and the patches it sends, which is what
/// this many cost at the peak of a storm (docs/performance-notes.md,
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

/// The PersistentVolume controller as the process and its tests hold it:
/// what it decides by ([`Binder`]) and the executor of its plans. Cheap to
/// clone.
#[derive(Clone)]
pub struct Controller {
    binder: Binder,
    #[cfg(any(test, feature = "testing"))]
    executor: Executor<crate::pv::controller::PvEffect>,
    #[cfg(any(test, feature = "testing"))]
    operations: OperationTracker,
}

impl std::fmt::Debug for Controller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Controller").finish_non_exhaustive()
    }
}

impl Controller {
    /// What the controller decides by.
    pub(crate) fn binder(&self) -> &Binder {
        &self.binder
    }

    /// The store of volumes and claims the controller decides from.
    pub fn store(&self) -> &Arc<PvStore> {
        &self.binder.store
    }

    /// Why the claim `key` is as it is; `None` for a claim the store does
    /// not hold.
    pub fn explain(&self, key: &ObjectKey) -> Option<Explanation> {
        self.binder.explain(key)
    }

    /// The tracker of running provision, delete and recycle operations.
    #[cfg(any(test, feature = "testing"))]
    pub fn operations(&self) -> &OperationTracker {
        &self.operations
    }

    /// Decides about `claim` and carries the plan out, as a claim's turn
    /// does (reads asked for are made, reservations taken and released).
    #[cfg(any(test, feature = "testing"))]
    pub async fn sync_claim(&self, claim: &Arc<PersistentVolumeClaim>) -> Ended {
        turn(&self.executor, |_| self.binder.decide_claim(claim)).await
    }

    /// Decides about `volume` and carries the plan out, as a volume's turn
    /// does (reading its claim from the API server when the decision asks).
    #[cfg(any(test, feature = "testing"))]
    pub async fn sync_volume(&self, volume: &Arc<PersistentVolume>) -> Ended {
        turn(&self.executor, |reads| {
            self.binder.decide_volume(volume, reads)
        })
        .await
    }
}

/// Builds the controller on the process's parts: its store becomes the
/// process's store of volumes and claims, its handlers subscribe to them,
/// and its workload (two pools and the resync) is returned for the runner.
pub(crate) fn build(
    shared: &mut Shared,
    config: &Config,
) -> Result<(Arc<Controller>, Workload), BuildError> {
    // Each worker has at most one claim and one volume in flight; each kind
    // keeps as many unpacked as there are workers, and never fewer than the
    // default.
    let in_flight = config.claim_workers + config.volume_workers;
    let store = Arc::new(PvStore::with_recent(RECENT.max(in_flight)));
    let informers = &mut shared.informers;
    informers.provide(
        &PERSISTENT_VOLUME,
        Arc::clone(&store) as Arc<dyn Store<PersistentVolume>>,
    )?;
    informers.provide(
        &PERSISTENT_VOLUME_CLAIM,
        Arc::clone(&store) as Arc<dyn Store<PersistentVolumeClaim>>,
    )?;
    let metrics = PvMetrics::new(&shared.metrics)?;
    let operations = operation_tracker(config.max_concurrent_operations, metrics.clone());
    let memory = Arc::new(ClaimMemory::default());
    let binder = Binder {
        store: Arc::clone(&store),
        classes: informers.mem_store(&STORAGE_CLASS)?,
        pods: informers.index(&POD, PODS_BY_CLAIM, claims_of_pod)?,
        nodes: informers.store(&NODE)?,
        running: operations.running(),
        memory: Arc::clone(&memory),
        settings: config.settings.clone(),
    };
    let writers = WriterSet::default()
        .with(
            shared
                .writes
                .writer(NAME, informers.store(&PERSISTENT_VOLUME)?),
        )
        .with(
            shared
                .writes
                .writer(NAME, informers.store(&PERSISTENT_VOLUME_CLAIM)?),
        )
        .with(shared.writes.writer(NAME, informers.store(&POD)?));
    let volume_queue = WorkQueue::new();
    let claim_queue = WorkQueue::new();
    let waiting = Waiting::new(claim_queue.clone());
    let runner = Operations {
        binder: binder.clone(),
        client: shared.client.clone(),
    }
    .runner();
    let executor = Executor::new(Parts {
        controller: NAME,
        writers,
        recorder: shared.recorder.for_component(CONTROLLER_NAME),
        effects: Arc::new(Applier {
            store: Arc::clone(&store),
            memory: Arc::clone(&memory),
            claim_queue: claim_queue.clone(),
            metrics,
        }),
        reserver: Some(Arc::new(Reservations(Arc::clone(&store)))),
        operations: Some((operations.clone(), runner)),
        shadow: shared.shadow.clone(),
    });
    shared.metrics.register(Box::new(StateCollector::new(
        Arc::clone(&store),
        volume_queue.clone(),
        claim_queue.clone(),
        {
            let waiting = waiting.clone();
            move || waiting.len()
        },
    )?))?;
    // In shadow mode nobody is woken when a volume is freed: beside the
    // controller that acts, that controller's binds free the volumes this
    // process reserved for other choices all the time, and each wake would
    // sync every waiting claim again for nothing (the resync still tries
    // waiting claims).
    if shared.shadow.is_none() {
        let (waiting, weak) = (waiting.clone(), Arc::downgrade(&store));
        store.on_volume_freed(move || {
            let Some(store) = weak.upgrade() else {
                return;
            };
            waiting.wake(|keys| binding_order(keys.iter().filter_map(|key| store.claim(key))));
        });
    }
    let parking = Parking::new(claim_queue.clone(), volume_queue.clone());
    let handlers = Handlers {
        store: Arc::clone(&store),
        volume_queue: volume_queue.clone(),
        claim_queue: claim_queue.clone(),
        leading: shared.leading.clone(),
        waiting: waiting.clone(),
        memory: Arc::clone(&memory),
    };
    let on_claims = handlers.clone();
    informers.on(&PERSISTENT_VOLUME, move |change| handlers.on_volume(change))?;
    informers.on(&PERSISTENT_VOLUME_CLAIM, move |change| {
        on_claims.on_claim(change);
    })?;

    let mut workload = Workload::new(NAME);
    let (deciding, parked, gone) = (binder.clone(), parking.clone(), Arc::clone(&store));
    workload.pool(
        Pool::new(
            volume_queue.clone(),
            config.volume_workers,
            |_| "volume",
            move |name, reads| deciding.decide_volume_of(name, reads),
            executor.clone(),
        )
        .passing(move |name| {
            // A parked volume is queued again once the claims ahead had
            // their turn.
            if let Some(volume) = gone.listed_volume(name) {
                parked.park(name, &volume)
            } else {
                parked.forget(name);
                false
            }
        }),
    );
    let (deciding, released) = (binder.clone(), parking.clone());
    workload.pool(
        Pool::new(
            claim_queue.clone(),
            config.claim_workers,
            |_| "claim",
            move |key, _| deciding.decide_claim_of(key),
            executor.clone(),
        )
        .in_one_lane()
        .waiting(waiting)
        .after_each(move |key, ended| work::claim_turn_ended(&memory, &released, key, ended)),
    );
    let resynced = Arc::clone(&store);
    workload.every(config.resync_period, move || {
        work::resync(&resynced, &volume_queue, &claim_queue, &parking);
    });
    let stopping = operations.clone();
    workload.on_stop(move || stopping.abort_all());
    let busy = operations.clone();
    workload.busy_while(move || busy.running_count() > 0);
    let controller = Arc::new(Controller {
        binder,
        #[cfg(any(test, feature = "testing"))]
        executor,
        #[cfg(any(test, feature = "testing"))]
        operations,
    });
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

#[cfg(test)]
pub(crate) mod tests;
