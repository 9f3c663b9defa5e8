//! The wiring of the controller: watchers feeding the shadow cache and
//! listers, the volume and claim queues, their workers, the periodic resync,
//! leadership, and start-up and shutdown. Decisions live in
//! [`crate::pv::controller`].
//!
//! The base supervises everything it starts. A watcher that keeps failing,
//! a watcher or worker that ends or panics, stops the controller with an
//! error and turns `/livez` unhealthy, so the process exits non-zero and is
//! restarted, rather than looking healthy while doing nothing. Losing the
//! lease cancels every sync and operation in flight at once (the write gate
//! of [`crate::runtime::client`] has already closed by then). A shutdown signal is
//! honoured at any point, also while the caches are still filling.

mod informers;
mod parking;
mod run;
mod waiting;
mod workers;

use std::future::Future;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::runtime::WatchStreamExt;
use kube::runtime::reflector::{self, Store};
use kube::{Client, Resource};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::pv::cache::ShadowCache;
use crate::pv::constants::CONTROLLER_NAME;
use crate::pv::controller::{Controller, Listers, Parts, Settings};
use crate::pv::keys::{ClaimKey, VolumeName};
use crate::pv::metrics::{PvMetrics, StateCollector};
use crate::runtime::events::{EventRecorder, RecorderError};
use crate::runtime::metrics::{Metrics, MetricsError};
use crate::runtime::operations::{DEFAULT_CONCURRENCY, OperationTracker};
use crate::runtime::queue::WorkQueue;
use crate::runtime::server::{Liveness, Readiness};
use crate::runtime::shared::{ControllerFailure, Idle, Shared, StartContext, Started};
use crate::runtime::watch::WatchFailure;
use informers::{Handlers, Listing, Synced, drop_unread_fields, keep_pod_essentials, pump, watch};
use parking::Parking;
use run::next_failure;
use waiting::FollowUp;
use workers::{ClaimWork, VolumeWork};

/// The controller's name in `--controllers`, as kube-controller-manager's.
pub const NAME: &str = "persistentvolume-binder";

/// How the controller is wired; the decision settings ride along.
#[derive(Clone, Debug)]
pub struct BaseConfig {
    /// How often every volume and claim is synced again, whatever happened
    /// (`--pvclaimbinder-sync-period`).
    pub resync_period: Duration,
    /// What the controller decides.
    pub settings: Settings,
    /// Name of this controller instance in events (for example the pod name).
    pub instance: String,
    /// How long a watch may fail without one success before the controller
    /// gives up and stops with an error.
    pub watch_failure_limit: Duration,
    /// How many long operations (provision, delete, recycle) run at once.
    pub max_concurrent_operations: usize,
    /// How many claims are synced at once (at least one).
    pub claim_workers: usize,
    /// How many volumes are synced at once (at least one).
    pub volume_workers: usize,
}

/// Default of [`BaseConfig::watch_failure_limit`].
pub const DEFAULT_WATCH_FAILURE_LIMIT: Duration = Duration::from_secs(180);

/// Default of [`BaseConfig::claim_workers`]: binding is four writes one
/// after another, each a round trip to the API server, so this many claims
/// in flight keep a server busy that answers a write in a few milliseconds.
pub const DEFAULT_CLAIM_WORKERS: usize = 16;

/// Default of [`BaseConfig::volume_workers`]: most volume syncs write
/// nothing.
pub const DEFAULT_VOLUME_WORKERS: usize = 4;

impl Default for BaseConfig {
    fn default() -> Self {
        Self {
            resync_period: Duration::from_secs(15),
            settings: Settings::default(),
            instance: CONTROLLER_NAME.to_string(),
            watch_failure_limit: DEFAULT_WATCH_FAILURE_LIMIT,
            max_concurrent_operations: DEFAULT_CONCURRENCY,
            claim_workers: DEFAULT_CLAIM_WORKERS,
            volume_workers: DEFAULT_VOLUME_WORKERS,
        }
    }
}

/// Failures of the wiring itself (not of one object's sync).
#[derive(Debug, thiserror::Error)]
pub enum BaseError {
    /// A lister never got its first complete list.
    #[error("waiting for the {0} cache to sync: {1}")]
    CacheSync(&'static str, String),
    /// The metrics could not be set up.
    #[error(transparent)]
    Metrics(#[from] MetricsError),
    /// The event recorder could not start (no tokio runtime).
    #[error(transparent)]
    Events(#[from] RecorderError),
    /// This instance could not renew its leader lease in time; it stopped
    /// writing and must restart to compete again (as kube-controller-manager
    /// exits).
    #[error("leader lease lost")]
    LeadershipLost,
    /// A watch failed again and again, without one success, for `limit`.
    #[error("the {kind} watch has been failing for {limit:?}: {last_error}")]
    WatchFailing {
        /// The watched kind.
        kind: &'static str,
        /// How long it failed.
        limit: Duration,
        /// The last failure.
        last_error: String,
    },
    /// A task that should run as long as the controller ended or panicked.
    #[error("{0} stopped unexpectedly")]
    TaskEnded(String),
}

impl From<WatchFailure> for BaseError {
    fn from(failure: WatchFailure) -> Self {
        match failure {
            WatchFailure::Failing {
                kind,
                limit,
                last_error,
            } => Self::WatchFailing {
                kind,
                limit,
                last_error,
            },
            WatchFailure::Ended(kind) => Self::TaskEnded(format!("the {kind} watch")),
        }
    }
}

/// Tells whether the controller's queues are idle; see
/// [`ControllerBase::idle_probe`].
#[derive(Clone)]
pub struct IdleProbe {
    volumes: WorkQueue<VolumeName>,
    claims: WorkQueue<ClaimKey>,
    operations: OperationTracker,
    follow_up: FollowUp,
}

impl IdleProbe {
    /// Whether nothing is queued, being processed, waiting for a retry, or
    /// running as a long operation.
    pub fn is_idle(&self) -> bool {
        self.volumes.is_idle() && self.claims.is_idle() && self.operations.running_count() == 0
    }

    /// How many claims found no volume and wait for one to become Available.
    pub fn waiting_claims(&self) -> usize {
        self.follow_up.waiting()
    }
}

impl Idle for IdleProbe {
    fn is_idle(&self) -> bool {
        IdleProbe::is_idle(self)
    }
}

/// The running parts of the controller, built once and then run.
pub struct ControllerBase {
    controller: Arc<Controller>,
    cache: Arc<ShadowCache>,
    volumes_synced: Synced,
    claims_synced: Synced,
    volume_queue: WorkQueue<VolumeName>,
    claim_queue: WorkQueue<ClaimKey>,
    config: BaseConfig,
    client: Client,
    /// The watchers; each runs as long as the controller.
    watchers: JoinSet<Result<(), BaseError>>,
    listers: Listers,
    writers: Option<Writers>,
    metrics: Arc<Metrics>,
    readiness: Readiness,
    liveness: Liveness,
    leading: Arc<AtomicBool>,
    follow_up: FollowUp,
    parking: Parking,
}

/// The write halves of the listers, consumed when the watchers start.
struct Writers {
    classes: reflector::store::Writer<StorageClass>,
    pods: reflector::store::Writer<Pod>,
    nodes: reflector::store::Writer<Node>,
}

/// The running workers and the token that stops the resync.
struct Workers {
    tasks: JoinSet<Result<(), BaseError>>,
    stop: CancellationToken,
}

impl ControllerBase {
    /// Builds the controller and its wiring; nothing runs until
    /// [`ControllerBase::start_informers`] or [`ControllerBase::run`], except
    /// the event recorder's sender task. Fails only when the metrics cannot
    /// be registered or there is no tokio runtime for that task.
    pub fn new(client: Client, config: BaseConfig) -> Result<Self, BaseError> {
        Self::with_shared(client, config, Shared::new()?)
    }

    /// Builds the controller as [`ControllerBase::new`] does, its series in
    /// the process's one registry and its failure on the process's one
    /// `/livez`, beside the other controllers of the process.
    pub fn with_shared(
        client: Client,
        config: BaseConfig,
        shared: Shared,
    ) -> Result<Self, BaseError> {
        let (classes, classes_writer) = reflector::store();
        let (pods, pods_writer) = reflector::store();
        let (nodes, nodes_writer) = reflector::store();
        let cache = Arc::new(ShadowCache::default());
        let volume_queue = WorkQueue::new();
        let claim_queue = WorkQueue::new();
        let listers = Listers {
            classes,
            pods,
            nodes,
        };
        let metrics = shared.metrics;
        let pv_metrics = PvMetrics::new(&metrics)?;
        let recorder = EventRecorder::new(
            client.clone(),
            Arc::clone(&metrics),
            CONTROLLER_NAME,
            config.instance.clone(),
        )?;
        metrics.register(Box::new(StateCollector::new(
            Arc::clone(&cache),
            volume_queue.clone(),
            claim_queue.clone(),
        )?))?;
        let follow_up = FollowUp::new(claim_queue.clone(), Arc::clone(&cache));
        cache.on_volume_freed({
            let follow_up = follow_up.clone();
            move || follow_up.volume_freed()
        });
        let parking = Parking::new(claim_queue.clone(), volume_queue.clone());
        let controller = Arc::new(Controller::new(Parts {
            client: client.clone(),
            cache: Arc::clone(&cache),
            listers: listers.clone(),
            recorder,
            operations: operation_tracker(config.max_concurrent_operations, pv_metrics.clone()),
            settings: config.settings.clone(),
            metrics: Arc::clone(&metrics),
            pv_metrics,
        }));
        Ok(Self {
            controller,
            cache,
            volumes_synced: Synced::default(),
            claims_synced: Synced::default(),
            volume_queue,
            claim_queue,
            config,
            client,
            watchers: JoinSet::new(),
            listers,
            writers: Some(Writers {
                classes: classes_writer,
                pods: pods_writer,
                nodes: nodes_writer,
            }),
            metrics,
            readiness: Readiness::default(),
            liveness: shared.liveness,
            leading: Arc::default(),
            follow_up,
            parking,
        })
    }

    /// Builds the controller as one of the process's (`persistentvolume-binder`
    /// in `--controllers`): the context's instance and watch failure limit
    /// override `config`'s.
    pub(crate) fn start(context: &StartContext, config: BaseConfig) -> Result<Started, BaseError> {
        let config = BaseConfig {
            instance: context.instance.clone(),
            watch_failure_limit: context.watch_failure_limit,
            ..config
        };
        let base = Self::with_shared(context.client.clone(), config, context.shared.clone())?;
        Ok(Started {
            readiness: base.readiness(),
            idle: Arc::new(base.idle_probe()),
            run: Box::new(|leadership, stop| {
                Box::pin(async move {
                    base.run_led(leadership, stop)
                        .await
                        .map_err(|error| ControllerFailure::new(NAME, error))
                })
            }),
        })
    }

    /// The controller's metrics, for the admin server.
    pub fn metrics(&self) -> Arc<Metrics> {
        Arc::clone(&self.metrics)
    }

    /// A handle that turns ready once every cache has synced, for `/readyz`.
    pub fn readiness(&self) -> Readiness {
        self.readiness.clone()
    }

    /// A handle that turns unhealthy when the controller fails, for `/livez`.
    pub fn liveness(&self) -> Liveness {
        self.liveness.clone()
    }

    /// The decision half, for callers that sync objects themselves.
    pub fn controller(&self) -> &Arc<Controller> {
        &self.controller
    }

    /// A handle that tells, while the controller runs, whether it has
    /// nothing queued, in progress or waiting for a retry.
    pub fn idle_probe(&self) -> IdleProbe {
        IdleProbe {
            volumes: self.volume_queue.clone(),
            claims: self.claim_queue.clone(),
            operations: self.controller.operations().clone(),
            follow_up: self.follow_up.clone(),
        }
    }

    /// Starts the watchers and waits until the shadow cache and every
    /// lister hold a complete list, so the first syncs see every volume and
    /// claim.
    pub async fn start_informers(&mut self) -> Result<(), BaseError> {
        self.sync_caches(pin!(std::future::pending()))
            .await
            .map(drop)
    }

    /// Starts the watchers (once) and waits until the shadow cache and every
    /// lister hold a complete list. Returns `false` when `shutdown` came
    /// first; fails when a watcher gives up first.
    async fn sync_caches(
        &mut self,
        shutdown: Pin<&mut impl Future<Output = ()>>,
    ) -> Result<bool, BaseError> {
        self.spawn_watchers();
        let (volumes, claims) = (self.volumes_synced.clone(), self.claims_synced.clone());
        let listers = self.listers.clone();
        let ready = async move {
            volumes.wait().await;
            claims.wait().await;
            wait_ready("storageclass", &listers.classes).await?;
            wait_ready("pod", &listers.pods).await?;
            wait_ready("node", &listers.nodes).await
        };
        tokio::select! {
            // A watcher that gave up also drops its store's writer, which
            // fails the wait for that store: report the watcher's reason.
            biased;
            failure = next_failure(&mut self.watchers) => return Err(failure),
            () = shutdown => {
                tracing::info!("stopped while the caches were filling");
                self.watchers.shutdown().await;
                return Ok(false);
            }
            result = ready => {
                if let Err(error) = result {
                    return Err(match self.watchers.try_join_next() {
                        Some(Ok(Err(failure))) => failure,
                        _ => error,
                    });
                }
            }
        }
        tracing::info!(
            volumes = self.cache.volumes_len(),
            claims = self.cache.claims_len(),
            "caches synced"
        );
        self.readiness.set_ready();
        Ok(true)
    }

    /// Starts one watcher per kind, unless they run already.
    fn spawn_watchers(&mut self) {
        let Some(writers) = self.writers.take() else {
            return;
        };
        let client = self.client.clone();
        let limit = self.config.watch_failure_limit;
        let handlers = Handlers {
            controller: Arc::clone(&self.controller),
            volume_queue: self.volume_queue.clone(),
            claim_queue: self.claim_queue.clone(),
            leading: Arc::clone(&self.leading),
            follow_up: self.follow_up.clone(),
            volumes_synced: self.volumes_synced.clone(),
            claims_synced: self.claims_synced.clone(),
        };
        let on_volumes = handlers.clone();
        let mut listing = Listing::default();
        self.watchers.spawn(pump(
            "persistentvolume",
            watch::<PersistentVolume>(&client).modify(drop_unread_fields),
            limit,
            move |event| on_volumes.on_volume_event(event, &mut listing),
        ));
        let mut listing = Listing::default();
        self.watchers.spawn(pump(
            "persistentvolumeclaim",
            watch::<PersistentVolumeClaim>(&client).modify(drop_unread_fields),
            limit,
            move |event| handlers.on_claim_event(event, &mut listing),
        ));
        self.watchers.spawn(pump(
            "storageclass",
            reflector::reflector(
                writers.classes,
                watch::<StorageClass>(&client).modify(drop_unread_fields),
            ),
            limit,
            |_| {},
        ));
        self.watchers.spawn(pump(
            "pod",
            reflector::reflector(
                writers.pods,
                watch::<Pod>(&client).modify(keep_pod_essentials),
            ),
            limit,
            |_| {},
        ));
        self.watchers.spawn(pump(
            "node",
            reflector::reflector(
                writers.nodes,
                watch::<Node>(&client).modify(|node| {
                    drop_unread_fields(node);
                    node.status = None;
                }),
            ),
            limit,
            |_| {},
        ));
    }

    /// Starts the workers of each queue and the resync; from now on the
    /// event handlers queue work.
    fn start_workers(&self) -> Workers {
        self.leading.store(true, Ordering::Release);
        let stop = CancellationToken::new();
        let mut tasks = JoinSet::new();
        let volume_work = VolumeWork {
            controller: Arc::clone(&self.controller),
            queue: self.volume_queue.clone(),
            follow_up: self.follow_up.clone(),
            parking: self.parking.clone(),
        };
        for _ in 0..self.config.volume_workers.max(1) {
            tasks.spawn(workers::volume_worker(volume_work.clone()));
        }
        let claim_work = ClaimWork {
            controller: Arc::clone(&self.controller),
            queue: self.claim_queue.clone(),
            follow_up: self.follow_up.clone(),
            parking: self.parking.clone(),
        };
        for _ in 0..self.config.claim_workers.max(1) {
            tasks.spawn(workers::claim_worker(claim_work.clone()));
        }
        tasks.spawn(workers::resync(
            Arc::clone(&self.cache),
            self.volume_queue.clone(),
            self.claim_queue.clone(),
            self.parking.clone(),
            self.config.resync_period,
            stop.clone(),
        ));
        tracing::info!("controller started");
        Workers { tasks, stop }
    }
}

/// The tracker of long operations, at most `concurrency` at once, counting
/// each finished one in the controller's operation series.
fn operation_tracker(concurrency: usize, metrics: PvMetrics) -> OperationTracker {
    OperationTracker::with_completion_hook(concurrency, move |report| {
        let operation = report.name.kind().as_str();
        if report.outcome.is_success() {
            metrics.volume_operation_completed("", operation, report.elapsed);
        } else {
            metrics.volume_operation_failed("", operation);
        }
    })
}

async fn wait_ready<K>(kind: &'static str, store: &Store<K>) -> Result<(), BaseError>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    store
        .wait_until_ready()
        .await
        .map_err(|error| BaseError::CacheSync(kind, error.to_string()))
}
