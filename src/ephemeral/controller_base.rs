//! The wiring of the ephemeral volume controller: the pod and claim
//! watchers with their listers and the pod-by-claim index, the queue of
//! pods and its workers, and leadership. Decisions live in
//! [`super::controller`].
//!
//! A pod is queued only when it needs work (a claim missing, or a claim of
//! someone else in the way); a deleted claim queues the pods that ask for
//! it; a relist (objects that vanished without a delete event) and the
//! start of leadership queue every pod that needs work. Followers keep the
//! listers and the index warm but queue nothing.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::Client;
use kube::runtime::WatchStreamExt;
use kube::runtime::reflector::{self, Store};
use kube::runtime::watcher::Event;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::claims;
use super::controller::{EphemeralController, Parts};
use super::index::PodsByClaim;
use super::metrics::EphemeralMetrics;
use super::{COMPONENT, NAME};
use crate::runtime::events::{EventRecorder, RecorderError};
use crate::runtime::keys::ObjectKey;
use crate::runtime::leadership::{Campaign, ControllerRun, Leadership};
use crate::runtime::metrics::MetricsError;
use crate::runtime::queue::WorkQueue;
use crate::runtime::server::{Liveness, Readiness};
use crate::runtime::shared::{ControllerFailure, Idle, StartContext, Started};
use crate::runtime::watch::{WatchFailure, pump, watch};

/// How many pods are synced at once (kube-controller-manager's
/// `--concurrent-ephemeralvolume-syncs` default).
const WORKERS: usize = 5;

/// How long a graceful stop waits for recorded events to be written.
const EVENT_FLUSH_TIMEOUT: Duration = Duration::from_secs(5);

/// Failures of the wiring (not of one pod's sync).
#[derive(Debug, thiserror::Error)]
pub enum EphemeralError {
    /// The metrics could not be registered.
    #[error(transparent)]
    Metrics(#[from] MetricsError),
    /// The event recorder could not start (no tokio runtime).
    #[error(transparent)]
    Events(#[from] RecorderError),
    /// A watch kept failing or ended.
    #[error(transparent)]
    Watch(#[from] WatchFailure),
    /// A lister never got its first complete list.
    #[error("waiting for the {0} cache to sync: {1}")]
    CacheSync(&'static str, String),
    /// The process lost the leader lease.
    #[error("leader lease lost")]
    LeadershipLost,
    /// A worker ended or panicked.
    #[error("{0} stopped unexpectedly")]
    TaskEnded(String),
}

/// Whether the controller has nothing queued or in progress.
#[derive(Clone)]
pub struct EphemeralIdle(WorkQueue<ObjectKey>);

impl std::fmt::Debug for EphemeralIdle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EphemeralIdle")
            .field("idle", &self.0.is_idle())
            .finish()
    }
}

impl Idle for EphemeralIdle {
    fn is_idle(&self) -> bool {
        self.0.is_idle()
    }
}

/// What the watch handlers act on.
#[derive(Clone)]
struct Handlers {
    controller: Arc<EphemeralController>,
    index: Arc<PodsByClaim>,
    queue: WorkQueue<ObjectKey>,
    leading: Arc<AtomicBool>,
}

/// The ephemeral volume controller, built and ready to run.
pub struct EphemeralBase {
    controller: Arc<EphemeralController>,
    handlers: Handlers,
    claims: Store<PersistentVolumeClaim>,
    writers: Option<(
        reflector::store::Writer<Pod>,
        reflector::store::Writer<PersistentVolumeClaim>,
    )>,
    watchers: JoinSet<Result<(), EphemeralError>>,
    client: Client,
    watch_failure_limit: Duration,
    readiness: Readiness,
    liveness: Liveness,
}

impl EphemeralBase {
    /// Builds the controller on the process's client and shared parts;
    /// nothing runs until it is run, except the event recorder's task.
    pub fn new(context: &StartContext) -> Result<Self, EphemeralError> {
        let (pods, pods_writer) = reflector::store();
        let (claims, claims_writer) = reflector::store();
        let recorder = EventRecorder::new(
            context.client.clone(),
            Arc::clone(&context.shared.metrics),
            COMPONENT,
            context.instance.clone(),
        )?;
        let controller = Arc::new(EphemeralController::new(Parts {
            client: context.client.clone(),
            pods,
            claims: claims.clone(),
            recorder,
            metrics: EphemeralMetrics::new(&context.shared.metrics)?,
        }));
        let handlers = Handlers {
            controller: Arc::clone(&controller),
            index: Arc::default(),
            queue: WorkQueue::new(),
            leading: Arc::default(),
        };
        Ok(Self {
            controller,
            handlers,
            claims,
            writers: Some((pods_writer, claims_writer)),
            watchers: JoinSet::new(),
            client: context.client.clone(),
            watch_failure_limit: context.watch_failure_limit,
            readiness: Readiness::default(),
            liveness: context.shared.liveness.clone(),
        })
    }

    /// Builds the controller as one of the process's (`ephemeral-volume`
    /// in `--controllers`).
    pub(crate) fn start(context: &StartContext) -> Result<Started, EphemeralError> {
        let base = Self::new(context)?;
        Ok(Started {
            readiness: base.readiness.clone(),
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

    /// The decision half, for callers that sync pods themselves.
    pub fn controller(&self) -> &Arc<EphemeralController> {
        &self.controller
    }

    /// Tells whether the controller has nothing queued or in progress.
    pub fn idle_probe(&self) -> EphemeralIdle {
        EphemeralIdle(self.handlers.queue.clone())
    }

    /// Runs the controller alone, without election, until `shutdown`.
    pub async fn run(self, shutdown: impl Future<Output = ()>) -> Result<(), EphemeralError> {
        let campaign = Campaign::default();
        let run: ControllerRun<EphemeralError> =
            Box::pin(self.run_led(campaign.leadership(), campaign.stop_token()));
        campaign
            .run(None, vec![run], shutdown, EphemeralError::TaskEnded)
            .await
    }

    /// Starts the watchers and waits until both listers hold a complete
    /// list (for callers that sync pods themselves).
    pub async fn start_informers(&mut self) -> Result<(), EphemeralError> {
        self.sync_caches(&CancellationToken::new()).await.map(drop)
    }

    /// Runs the controller as one of the process's: listers at once, the
    /// workers while `leadership` says the process leads, until `stop`.
    pub async fn run_led(
        mut self,
        mut leadership: Leadership,
        stop: CancellationToken,
    ) -> Result<(), EphemeralError> {
        let result = self.lead(&mut leadership, &stop).await;
        if let Err(error) = &result {
            tracing::error!(controller = NAME, %error, "controller stopped with an error");
            self.liveness.fail(format!("{NAME}: {error}"));
        }
        result
    }

    async fn lead(
        &mut self,
        leadership: &mut Leadership,
        stop: &CancellationToken,
    ) -> Result<(), EphemeralError> {
        if !self.sync_caches(stop).await? {
            return Ok(());
        }
        tokio::select! {
            acquired = leadership.acquired() => if !acquired {
                return Err(EphemeralError::LeadershipLost);
            },
            () = stop.cancelled() => return Ok(()),
            failure = next_failure(&mut self.watchers) => return Err(failure),
        }
        let mut workers = self.start_workers();
        let end = tokio::select! {
            () = leadership.lost() => Err(EphemeralError::LeadershipLost),
            () = stop.cancelled() => Ok(()),
            failure = next_failure(&mut self.watchers) => Err(failure),
            failure = next_failure(&mut workers) => Err(failure),
        };
        self.handlers.leading.store(false, Ordering::Release);
        self.handlers.queue.shut_down();
        if end.is_ok() {
            while workers.join_next().await.is_some() {}
            let flushed = self.controller.recorder().flush();
            if tokio::time::timeout(EVENT_FLUSH_TIMEOUT, flushed)
                .await
                .is_err()
            {
                tracing::warn!(
                    controller = NAME,
                    "events still queued at shutdown were not written"
                );
            }
        } else {
            workers.shutdown().await;
        }
        self.watchers.shutdown().await;
        tracing::info!(controller = NAME, "controller stopped");
        end
    }

    /// Starts the watchers (once) and waits for both listers; `false` when
    /// `stop` came first.
    async fn sync_caches(&mut self, stop: &CancellationToken) -> Result<bool, EphemeralError> {
        self.spawn_watchers();
        let pods = self.controller.pods().clone();
        let claims = self.claims.clone();
        let ready = async move {
            pods.wait_until_ready()
                .await
                .map_err(|error| EphemeralError::CacheSync("pod", error.to_string()))?;
            claims.wait_until_ready().await.map_err(|error| {
                EphemeralError::CacheSync("persistentvolumeclaim", error.to_string())
            })
        };
        tokio::select! {
            biased;
            failure = next_failure(&mut self.watchers) => Err(failure),
            () = stop.cancelled() => {
                self.watchers.shutdown().await;
                Ok(false)
            }
            result = ready => {
                result?;
                tracing::info!(controller = NAME, "caches synced");
                self.readiness.set_ready();
                Ok(true)
            }
        }
    }

    fn spawn_watchers(&mut self) {
        let Some((pods_writer, claims_writer)) = self.writers.take() else {
            return;
        };
        let limit = self.watch_failure_limit;
        let on_pods = self.handlers.clone();
        let pods = reflector::reflector(
            pods_writer,
            watch::<Pod>(&self.client).modify(keep_pod_essentials),
        );
        self.watchers.spawn(async move {
            Ok(Box::pin(pump("pod", pods, limit, move |event| {
                on_pods.on_pod_event(event);
            }))
            .await?)
        });
        let on_claims = self.handlers.clone();
        let claims =
            reflector::reflector(claims_writer, watch::<PersistentVolumeClaim>(&self.client));
        self.watchers.spawn(async move {
            Ok(
                Box::pin(pump("persistentvolumeclaim", claims, limit, move |event| {
                    on_claims.on_claim_event(event);
                }))
                .await?,
            )
        });
    }

    /// Starts the workers and queues every pod that needs work.
    fn start_workers(&self) -> JoinSet<Result<(), EphemeralError>> {
        self.handlers.leading.store(true, Ordering::Release);
        self.handlers.enqueue_all();
        let mut workers = JoinSet::new();
        for _ in 0..WORKERS {
            workers.spawn(worker(
                Arc::clone(&self.controller),
                self.handlers.queue.clone(),
            ));
        }
        tracing::info!(controller = NAME, workers = WORKERS, "controller started");
        workers
    }
}

impl Handlers {
    fn leading(&self) -> bool {
        self.leading.load(Ordering::Acquire)
    }

    /// Queues `pod` if this replica leads and the pod needs work.
    fn enqueue(&self, pod: &Pod) {
        if self.leading() && self.controller.needs_work(pod) {
            self.queue.add(ObjectKey::of(pod));
        }
    }

    /// Queues every pod with ephemeral volumes that needs work.
    fn enqueue_all(&self) {
        for key in self.index.pods() {
            if let Some(pod) = self.controller.pods().get(&key.object_ref()) {
                self.enqueue(&pod);
            }
        }
    }

    fn on_pod_event(&self, event: &Event<Pod>) {
        match event {
            Event::Apply(pod) | Event::InitApply(pod) => {
                self.index.set(&ObjectKey::of(pod), claims::claim_keys(pod));
                self.enqueue(pod);
            }
            Event::Delete(pod) => self.index.remove(&ObjectKey::of(pod)),
            Event::Init => {}
            Event::InitDone => {
                let pods = self.controller.pods();
                self.index
                    .retain(|key| pods.get(&key.object_ref()).is_some());
            }
        }
    }

    fn on_claim_event(&self, event: &Event<PersistentVolumeClaim>) {
        match event {
            Event::Apply(claim) | Event::InitApply(claim) => {
                self.controller.claim_seen(&ObjectKey::of(claim));
            }
            Event::Delete(claim) => {
                let key = ObjectKey::of(claim);
                self.controller.claim_seen(&key);
                for pod in self.index.pods_of(&key) {
                    if let Some(pod) = self.controller.pods().get(&pod.object_ref()) {
                        self.enqueue(&pod);
                    }
                }
            }
            Event::Init => {}
            // A claim that vanished during a relist had no delete event.
            Event::InitDone => {
                self.controller.relisted();
                self.enqueue_all();
            }
        }
    }
}

/// Takes pod keys off the queue and syncs them; a failed sync is retried
/// with backoff. Returns when the queue shuts down.
async fn worker(
    controller: Arc<EphemeralController>,
    queue: WorkQueue<ObjectKey>,
) -> Result<(), EphemeralError> {
    while let Some(key) = queue.get().await {
        match controller.sync_pod(&key).await {
            Ok(synced) => {
                tracing::debug!(pod = %key, ?synced, "pod synced");
                queue.forget(&key);
            }
            Err(error) => {
                tracing::warn!(pod = %key, %error, "sync failed, will retry");
                queue.add_rate_limited(key.clone());
            }
        }
        queue.done(&key);
    }
    Ok(())
}

/// Keeps what the controller reads of a pod: its name, namespace, UID,
/// resourceVersion and deletion, and its volumes.
fn keep_pod_essentials(pod: &mut Pod) {
    pod.metadata.managed_fields = None;
    pod.metadata.annotations = None;
    pod.metadata.labels = None;
    pod.metadata.owner_references = None;
    pod.status = None;
    if let Some(spec) = pod.spec.as_mut() {
        let volumes = spec.volumes.take();
        *spec = k8s_openapi::api::core::v1::PodSpec {
            volumes,
            ..Default::default()
        };
    }
}

/// The first of `tasks` to end (each should run as long as the controller).
async fn next_failure(tasks: &mut JoinSet<Result<(), EphemeralError>>) -> EphemeralError {
    match tasks.join_next().await {
        None => std::future::pending().await,
        Some(Ok(Err(failure))) => failure,
        Some(Ok(Ok(()))) => EphemeralError::TaskEnded("an ephemeral volume controller task".into()),
        Some(Err(error)) => {
            EphemeralError::TaskEnded(format!("an ephemeral volume controller task ({error})"))
        }
    }
}

#[cfg(test)]
mod tests;
