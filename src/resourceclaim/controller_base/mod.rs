//! The wiring of the ResourceClaim controller: watchers of pods, claims
//! and templates feeding listers, the claim cache and the pod index; one
//! work queue of pod and claim keys; its workers while the process leads.
//! Decisions live in [`crate::resourceclaim::controller`].
//!
//! Like every controller of the process, it fills its caches at once (a
//! follower keeps them warm and is ready), queues work and runs workers
//! only while the process holds the one Lease, stops every sync in flight
//! when leadership is lost, and stops with an error when a watch keeps
//! failing or a task ends.

mod handlers;
mod workers;

use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceClaimTemplate};
use kube::Client;
use kube::runtime::WatchStreamExt;
use kube::runtime::reflector::{self, Store};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::NAME;
use super::claims::ClaimCache;
use super::constants::{COMPONENT, DELETED_PODS_REMEMBERED};
use super::controller::writes::Writer;
use super::controller::{Parts, ResourceClaimController};
use super::deleted::DeletedPods;
use super::keys::WorkKey;
use super::metrics::ClaimMetrics;
use crate::runtime::events::{EventRecorder, RecorderError};
use crate::runtime::leadership::Leadership;
use crate::runtime::metrics::{Metrics, MetricsError};
use crate::runtime::queue::WorkQueue;
use crate::runtime::server::Readiness;
use crate::runtime::shared::{ControllerFailure, Idle, StartContext, Started};
use crate::runtime::watch::{WatchFailure, pump, watch};
use handlers::{Handlers, PodIndex};

/// How the ResourceClaim controller is wired.
#[derive(Clone, Debug)]
pub struct ClaimControllerConfig {
    /// This replica's name in events (for example the pod name).
    pub instance: String,
    /// How long a watch may fail without one success before the controller
    /// stops with an error.
    pub watch_failure_limit: Duration,
    /// How many keys are synced at once (kube-controller-manager's
    /// `--concurrent-resource-claim-syncs`, 50 there; 10 keep up with a
    /// storm of 1,000 pods here).
    pub workers: usize,
}

impl Default for ClaimControllerConfig {
    fn default() -> Self {
        Self {
            instance: COMPONENT.to_string(),
            watch_failure_limit: Duration::from_secs(180),
            workers: 10,
        }
    }
}

/// Why the ResourceClaim controller stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ClaimControllerError {
    /// The metrics could not be registered.
    #[error(transparent)]
    Metrics(#[from] MetricsError),
    /// The event recorder could not start (no tokio runtime).
    #[error(transparent)]
    Events(#[from] RecorderError),
    /// A lister never got its first complete list.
    #[error("waiting for the {0} cache to sync: {1}")]
    CacheSync(&'static str, String),
    /// A watch failed for too long or ended.
    #[error(transparent)]
    Watch(#[from] WatchFailure),
    /// The process lost the leader lease: every sync in flight was stopped.
    #[error("leader lease lost")]
    LeadershipLost,
    /// A worker ended or panicked.
    #[error("{0} stopped unexpectedly")]
    TaskEnded(String),
}

/// Tells whether the ResourceClaim controller has nothing queued, being
/// synced or waiting for a retry.
#[derive(Clone)]
pub struct ClaimIdle(WorkQueue<WorkKey>);

impl Idle for ClaimIdle {
    fn is_idle(&self) -> bool {
        self.0.is_idle()
    }
}

/// The ResourceClaim controller, built and ready to run.
pub struct ClaimControllerBase {
    controller: Arc<ResourceClaimController>,
    handlers: Handlers,
    templates: Store<ResourceClaimTemplate>,
    writers: Option<Writers>,
    client: Client,
    config: ClaimControllerConfig,
    metrics: Arc<Metrics>,
    claim_metrics: ClaimMetrics,
    readiness: Readiness,
    watchers: JoinSet<Result<(), WatchFailure>>,
}

struct Writers {
    pods: reflector::store::Writer<Pod>,
    claims: reflector::store::Writer<ResourceClaim>,
    templates: reflector::store::Writer<ResourceClaimTemplate>,
}

impl ClaimControllerBase {
    /// Builds the controller on `client`, registering its series in
    /// `metrics`; nothing runs until [`ClaimControllerBase::run`] but the
    /// event recorder's sender task.
    pub fn new(
        client: Client,
        metrics: Arc<Metrics>,
        config: ClaimControllerConfig,
    ) -> Result<Self, ClaimControllerError> {
        let (pods, pods_writer) = reflector::store();
        let (claim_store, claims_writer) = reflector::store();
        let (templates, templates_writer) = reflector::store();
        let claims = Arc::new(ClaimCache::default());
        let deleted = Arc::new(DeletedPods::new(DELETED_PODS_REMEMBERED));
        let claim_metrics = ClaimMetrics::new(&metrics, Arc::clone(&claims))?;
        let recorder = EventRecorder::new(
            client.clone(),
            Arc::clone(&metrics),
            COMPONENT,
            config.instance.clone(),
        )?;
        let writer = Writer {
            client: client.clone(),
            claims: Arc::clone(&claims),
            metrics: Arc::clone(&metrics),
            claim_metrics: claim_metrics.clone(),
        };
        let controller = Arc::new(ResourceClaimController::new(Parts {
            pods: pods.clone(),
            templates: templates.clone(),
            claims: Arc::clone(&claims),
            deleted: Arc::clone(&deleted),
            recorder,
            writer,
        }));
        let handlers = Handlers {
            pods,
            claim_store,
            claims,
            deleted,
            queue: WorkQueue::new(),
            leading: Arc::new(AtomicBool::new(false)),
            index: Arc::new(Mutex::new(PodIndex::default())),
        };
        Ok(Self {
            controller,
            handlers,
            templates,
            writers: Some(Writers {
                pods: pods_writer,
                claims: claims_writer,
                templates: templates_writer,
            }),
            client,
            config,
            metrics,
            claim_metrics,
            readiness: Readiness::default(),
            watchers: JoinSet::new(),
        })
    }

    /// Turns ready once the pod, claim and template caches have synced.
    pub fn readiness(&self) -> Readiness {
        self.readiness.clone()
    }

    /// The decision half, for tests that sync one key themselves.
    pub fn controller(&self) -> &Arc<ResourceClaimController> {
        &self.controller
    }

    /// Tells whether nothing is queued, being synced or waiting for a
    /// retry.
    pub fn idle_probe(&self) -> ClaimIdle {
        ClaimIdle(self.handlers.queue.clone())
    }

    /// Builds the controller as one of the process's (`resourceclaim` in
    /// `--controllers`), registering its series in the process's registry.
    pub(crate) fn start(context: &StartContext) -> Result<Started, ClaimControllerError> {
        let config = ClaimControllerConfig {
            instance: context.instance.clone(),
            watch_failure_limit: context.watch_failure_limit,
            ..ClaimControllerConfig::default()
        };
        let base = Self::new(
            context.client.clone(),
            Arc::clone(&context.shared.metrics),
            config,
        )?;
        let liveness = context.shared.liveness.clone();
        Ok(Started {
            readiness: base.readiness(),
            idle: Arc::new(base.idle_probe()),
            run: Box::new(move |leadership, stop| {
                Box::pin(async move {
                    let result = base.run_led(leadership, stop).await;
                    if let Err(error) = &result {
                        tracing::error!(controller = NAME, %error, "controller stopped with an error");
                        liveness.fail(format!("{NAME}: {error}"));
                    }
                    result.map_err(|error| ControllerFailure::new(NAME, error))
                })
            }),
        })
    }

    /// Runs the controller as one of the process's: caches at once, the
    /// workers while `leadership` says the process leads, until `stop`.
    pub async fn run_led(
        self,
        leadership: Leadership,
        stop: CancellationToken,
    ) -> Result<(), ClaimControllerError> {
        let (mut acquired, mut lost) = (leadership.clone(), leadership);
        self.run(
            async move { acquired.acquired().await },
            async move { lost.lost().await },
            async move { stop.cancelled().await },
        )
        .await
    }

    /// Reads the claim creates attempted and failed so far (upstream's
    /// create counters), also while the controller runs.
    pub fn create_counter(&self) -> impl Fn() -> (u64, u64) + Send + Sync + 'static + use<> {
        let metrics = self.claim_metrics.clone();
        move || (metrics.create_attempts(), metrics.create_failures())
    }

    /// Starts the watchers and waits until every lister holds a complete
    /// list and the claim cache is filled from it.
    pub async fn start_informers(&mut self) -> Result<(), ClaimControllerError> {
        self.spawn_watchers();
        let (pods, claims, templates) = (
            self.handlers.pods.clone(),
            self.handlers.claim_store.clone(),
            self.templates.clone(),
        );
        let ready = async move {
            wait_ready("pod", &pods).await?;
            wait_ready("resourceclaim", &claims).await?;
            wait_ready("resourceclaimtemplate", &templates).await
        };
        tokio::select! {
            biased;
            Some(joined) = self.watchers.join_next() => return Err(watch_ended(joined)),
            result = ready => result?,
        }
        for claim in self.handlers.claim_store.state() {
            self.handlers.claims.offer(claim);
        }
        self.readiness.set_ready();
        tracing::info!("resourceclaim controller caches synced");
        Ok(())
    }

    /// Runs the controller: caches at once, then, once `acquired` resolves
    /// `true` (the process leads), the workers until `stop` resolves (a
    /// graceful stop: events flushed) or `lost` does (every sync in flight
    /// aborted, [`ClaimControllerError::LeadershipLost`]).
    pub async fn run(
        mut self,
        acquired: impl Future<Output = bool>,
        lost: impl Future<Output = ()>,
        stop: impl Future<Output = ()>,
    ) -> Result<(), ClaimControllerError> {
        let mut stop = pin!(stop);
        if !resource_claims_served(&self.client).await {
            // Nothing to do on a cluster without the API; the process's
            // other controllers run as usual.
            self.readiness.set_ready();
            stop.await;
            return Ok(());
        }
        tokio::select! {
            () = &mut stop => return Ok(()),
            result = self.start_informers() => result?,
        }
        tokio::select! {
            leads = acquired => if !leads { return Err(ClaimControllerError::LeadershipLost) },
            () = &mut stop => return Ok(()),
            Some(joined) = self.watchers.join_next() => return Err(watch_ended(joined)),
        }
        let mut tasks = self.start_workers();
        let end = tokio::select! {
            () = lost => Err(ClaimControllerError::LeadershipLost),
            () = &mut stop => Ok(()),
            Some(joined) = self.watchers.join_next() => Err(watch_ended(joined)),
            Some(joined) = tasks.join_next() => Err(ClaimControllerError::TaskEnded(format!("a resourceclaim worker ({joined:?})"))),
        };
        self.handlers.leading.store(false, Ordering::Release);
        self.handlers.queue.shut_down();
        if end.is_ok() {
            while tasks.join_next().await.is_some() {}
            flush(self.controller.recorder()).await;
        } else {
            tasks.abort_all();
        }
        self.watchers.shutdown().await;
        end
    }

    /// Starts the workers; from now on the handlers queue work, and every
    /// pod and claim with work is queued once.
    fn start_workers(&self) -> JoinSet<()> {
        self.handlers.leading.store(true, Ordering::Release);
        self.handlers.enqueue_all();
        let mut tasks = JoinSet::new();
        for _ in 0..self.config.workers.max(1) {
            tasks.spawn(workers::worker(
                Arc::clone(&self.controller),
                self.handlers.queue.clone(),
                Arc::clone(&self.metrics),
            ));
        }
        tracing::info!(
            workers = self.config.workers,
            "resourceclaim controller started"
        );
        tasks
    }

    fn spawn_watchers(&mut self) {
        let Some(writers) = self.writers.take() else {
            return;
        };
        let limit = self.config.watch_failure_limit;
        let on_pods = self.handlers.clone();
        self.watchers.spawn(pump(
            "pod",
            reflector::reflector(
                writers.pods,
                watch::<Pod>(&self.client).modify(keep_pod_essentials),
            ),
            limit,
            move |event| on_pods.on_pod_event(event),
        ));
        let on_claims = self.handlers.clone();
        self.watchers.spawn(pump(
            "resourceclaim",
            reflector::reflector(
                writers.claims,
                watch::<ResourceClaim>(&self.client)
                    .modify(|claim| claim.metadata.managed_fields = None),
            ),
            limit,
            move |event| on_claims.on_claim_event(event),
        ));
        self.watchers.spawn(pump(
            "resourceclaimtemplate",
            reflector::reflector(
                writers.templates,
                watch::<ResourceClaimTemplate>(&self.client),
            ),
            limit,
            |_| {},
        ));
    }
}

/// Why a watcher task ended: each should run as long as the controller, so
/// any end (a failing watch, a return, a panic) stops the controller.
fn watch_ended(
    joined: Result<Result<(), WatchFailure>, tokio::task::JoinError>,
) -> ClaimControllerError {
    match joined {
        Ok(Err(failure)) => failure.into(),
        Ok(Ok(())) => ClaimControllerError::TaskEnded("a resourceclaim watch".to_string()),
        Err(error) => ClaimControllerError::TaskEnded(format!("a resourceclaim watch ({error})")),
    }
}

/// Whether the API server serves resource.k8s.io/v1 ResourceClaims
/// (Kubernetes 1.34 and later). When discovery says it does not, the
/// controller stays idle instead of failing its watch again and again; when
/// discovery itself fails, it starts, and its watches are supervised as
/// every controller's.
async fn resource_claims_served(client: &Client) -> bool {
    match client.list_api_group_resources("resource.k8s.io/v1").await {
        Ok(list) => {
            let served = list.resources.iter().any(|r| r.name == "resourceclaims");
            if !served {
                tracing::warn!(
                    controller = NAME,
                    "the API server does not serve resource.k8s.io/v1 resourceclaims; the controller stays idle"
                );
            }
            served
        }
        Err(kube::Error::Api(status)) if status.code == 404 => {
            tracing::warn!(
                controller = NAME,
                "the API server does not serve resource.k8s.io/v1; the controller stays idle"
            );
            false
        }
        Err(error) => {
            tracing::warn!(controller = NAME, %error, "API discovery failed; starting anyway");
            true
        }
    }
}

/// Keeps only what the controller reads from a pod: identity, deletion,
/// `spec.resourceClaims`, the node, the phase and
/// `status.resourceClaimStatuses`.
fn keep_pod_essentials(pod: &mut Pod) {
    pod.metadata.managed_fields = None;
    pod.metadata.annotations = None;
    pod.metadata.labels = None;
    pod.metadata.owner_references = None;
    if let Some(spec) = pod.spec.as_mut() {
        spec.containers.clear();
        spec.init_containers = None;
        spec.ephemeral_containers = None;
        spec.volumes = None;
    }
    if let Some(status) = pod.status.as_mut() {
        status.conditions = None;
        status.container_statuses = None;
        status.init_container_statuses = None;
        status.ephemeral_container_statuses = None;
    }
}

async fn wait_ready<K>(kind: &'static str, store: &Store<K>) -> Result<(), ClaimControllerError>
where
    K: kube::Resource<DynamicType = ()> + Clone + 'static,
{
    store
        .wait_until_ready()
        .await
        .map_err(|error| ClaimControllerError::CacheSync(kind, error.to_string()))
}

/// How long a graceful stop waits for queued events to be written.
const EVENT_FLUSH_TIMEOUT: Duration = Duration::from_secs(5);

async fn flush(recorder: &EventRecorder) {
    if tokio::time::timeout(EVENT_FLUSH_TIMEOUT, recorder.flush())
        .await
        .is_err()
    {
        tracing::warn!("resourceclaim events still queued at shutdown were not written");
    }
}

#[cfg(test)]
mod tests;
