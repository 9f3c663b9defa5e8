//! The wiring of the controller: watchers feeding listers and the shadow
//! cache, the volume and claim queues, their workers, the periodic resync,
//! and start-up and shutdown. Decisions live in [`crate::controller`].

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::{
    ContainerStatus, Node, PersistentVolume, PersistentVolumeClaim, Pod,
};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::watcher::{self, Event};
use kube::runtime::{WatchStreamExt, reflector as reflect};
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::cache::ShadowCache;
use crate::controller::{Controller, Listers, Settings};
use crate::events::{EventRecorder, RecorderError};
use crate::keys::{ClaimKey, VolumeName};
use crate::leader::LeaderElector;
use crate::metrics::{Metrics, MetricsError, StateCollector};
use crate::queue::WorkQueue;
use crate::server::Readiness;

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
}

impl Default for BaseConfig {
    fn default() -> Self {
        Self {
            resync_period: Duration::from_secs(15),
            settings: Settings::default(),
            instance: crate::constants::CONTROLLER_NAME.to_string(),
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
}

/// Tells whether the controller's queues are idle; see
/// [`ControllerBase::idle_probe`].
#[derive(Clone)]
pub struct IdleProbe {
    volumes: WorkQueue<VolumeName>,
    claims: WorkQueue<ClaimKey>,
    operations: crate::operations::OperationTracker,
}

impl IdleProbe {
    /// Whether nothing is queued, being processed, waiting for a retry, or
    /// running as a long operation.
    pub fn is_idle(&self) -> bool {
        self.volumes.is_idle() && self.claims.is_idle() && self.operations.running_count() == 0
    }
}

/// The running parts of the controller, built once and then run.
pub struct ControllerBase {
    controller: Arc<Controller>,
    cache: Arc<ShadowCache>,
    volumes: Store<PersistentVolume>,
    claims: Store<PersistentVolumeClaim>,
    volume_queue: WorkQueue<VolumeName>,
    claim_queue: WorkQueue<ClaimKey>,
    config: BaseConfig,
    client: Client,
    tasks: JoinSet<()>,
    listers: Listers,
    writers: Option<Writers>,
    metrics: Arc<Metrics>,
    readiness: Readiness,
}

/// The write halves of the listers, consumed when the watchers start.
struct Writers {
    volumes: reflector::store::Writer<PersistentVolume>,
    claims: reflector::store::Writer<PersistentVolumeClaim>,
    classes: reflector::store::Writer<StorageClass>,
    pods: reflector::store::Writer<Pod>,
    nodes: reflector::store::Writer<Node>,
}

impl ControllerBase {
    /// Builds the controller and its wiring; nothing runs until
    /// [`ControllerBase::start_informers`] or [`ControllerBase::run`], except
    /// the event recorder's sender task. Fails only when the metrics cannot
    /// be registered or there is no tokio runtime for that task.
    pub fn new(client: Client, config: BaseConfig) -> Result<Self, BaseError> {
        let (volumes, volumes_writer) = reflector::store();
        let (claims, claims_writer) = reflector::store();
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
        let metrics = Arc::new(Metrics::new()?);
        let recorder = EventRecorder::new(
            client.clone(),
            Arc::clone(&metrics),
            config.instance.clone(),
        )?;
        metrics.register(Box::new(StateCollector::new(
            Arc::clone(&cache),
            volume_queue.clone(),
            claim_queue.clone(),
        )?))?;
        let controller = Arc::new(Controller::new(
            client.clone(),
            Arc::clone(&cache),
            listers.clone(),
            recorder,
            claim_queue.clone(),
            config.settings.clone(),
            Arc::clone(&metrics),
        ));
        Ok(Self {
            controller,
            cache,
            volumes,
            claims,
            volume_queue,
            claim_queue,
            config,
            client,
            tasks: JoinSet::new(),
            listers,
            writers: Some(Writers {
                volumes: volumes_writer,
                claims: claims_writer,
                classes: classes_writer,
                pods: pods_writer,
                nodes: nodes_writer,
            }),
            metrics,
            readiness: Readiness::default(),
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
        }
    }

    /// Starts the watchers and waits until every lister holds a complete
    /// list; then fills the shadow cache from them, so the first syncs see
    /// every volume and claim.
    pub async fn start_informers(&mut self) -> Result<(), BaseError> {
        let Some(writers) = self.writers.take() else {
            return Ok(());
        };
        let client = self.client.clone();
        let cache = Arc::clone(&self.cache);
        let queue = self.volume_queue.clone();
        let store = self.volumes.clone();
        self.tasks.spawn(pump(
            reflect(writers.volumes, watch::<PersistentVolume>(&client)),
            move |event| on_volume_event(event, &store, &cache, &queue),
        ));
        let cache = Arc::clone(&self.cache);
        let queue = self.claim_queue.clone();
        let store = self.claims.clone();
        self.tasks.spawn(pump(
            reflect(writers.claims, watch::<PersistentVolumeClaim>(&client)),
            move |event| on_claim_event(event, &store, &cache, &queue),
        ));
        self.tasks.spawn(pump(
            reflect(writers.classes, watch::<StorageClass>(&client)),
            |_| {},
        ));
        self.tasks.spawn(pump(
            reflect(
                writers.pods,
                watch::<Pod>(&client).modify(keep_pod_essentials),
            ),
            |_| {},
        ));
        self.tasks.spawn(pump(
            reflect(
                writers.nodes,
                watch::<Node>(&client).modify(|node| node.status = None),
            ),
            |_| {},
        ));
        wait_ready("persistentvolume", &self.volumes).await?;
        wait_ready("persistentvolumeclaim", &self.claims).await?;
        wait_ready("storageclass", &self.listers.classes).await?;
        wait_ready("pod", &self.listers.pods).await?;
        wait_ready("node", &self.listers.nodes).await?;
        for volume in self.volumes.state() {
            offer_logged(self.cache.offer_volume(volume));
        }
        for claim in self.claims.state() {
            offer_logged(self.cache.offer_claim(claim));
        }
        tracing::info!(
            volumes = self.cache.volumes_len(),
            claims = self.cache.claims_len(),
            "caches synced"
        );
        self.readiness.set_ready();
        Ok(())
    }

    /// Runs the controller until `shutdown` resolves: watchers, one worker
    /// per queue (a sync is not reentrant for one object, and one worker per
    /// kind keeps two claims from racing for one volume), and the resync.
    pub async fn run(mut self, shutdown: impl Future<Output = ()>) -> Result<(), BaseError> {
        self.start_informers().await?;
        self.metrics.set_leader(true);
        let workers = self.start_workers();
        shutdown.await;
        let events = self.controller.recorder().clone();
        self.stop(workers).await;
        flush_events(&events).await;
        Ok(())
    }

    /// Runs the controller with leader election: the caches are filled and
    /// kept warm at once, but the workers (every write) run only while
    /// `elector` holds the lease. On `shutdown` the lease is released, so a
    /// follower takes over at once; if the lease cannot be renewed, the
    /// workers stop and [`BaseError::LeadershipLost`] is returned.
    pub async fn run_elected(
        mut self,
        mut elector: LeaderElector,
        shutdown: impl Future<Output = ()>,
    ) -> Result<(), BaseError> {
        let mut shutdown = std::pin::pin!(shutdown);
        self.start_informers().await?;
        self.metrics.set_leader(false);
        tracing::info!(identity = %elector.identity(), "waiting for the leader lease");
        tokio::select! {
            () = elector.acquire() => {}
            () = &mut shutdown => {
                self.tasks.shutdown().await;
                tracing::info!("stopped before becoming leader");
                return Ok(());
            }
        }
        self.metrics.set_leader(true);
        tracing::info!(identity = %elector.identity(), "leading");
        let workers = self.start_workers();
        let lost = tokio::select! {
            () = elector.hold() => true,
            () = &mut shutdown => false,
        };
        self.metrics.set_leader(false);
        let events = self.controller.recorder().clone();
        self.stop(workers).await;
        if lost {
            return Err(BaseError::LeadershipLost);
        }
        // Still the leader until the lease is released: write what the
        // workers recorded.
        flush_events(&events).await;
        if let Err(error) = elector.release().await {
            tracing::warn!(%error, "could not release the leader lease; followers wait for it to expire");
        }
        Ok(())
    }

    /// Starts one worker per queue and the resync.
    fn start_workers(&self) -> Workers {
        let stop = CancellationToken::new();
        let mut tasks = JoinSet::new();
        tasks.spawn(volume_worker(
            Arc::clone(&self.controller),
            self.volumes.clone(),
            self.volume_queue.clone(),
            self.claim_queue.clone(),
        ));
        tasks.spawn(claim_worker(
            Arc::clone(&self.controller),
            self.claims.clone(),
            self.claim_queue.clone(),
            self.volume_queue.clone(),
        ));
        tasks.spawn(resync(
            self.volumes.clone(),
            self.claims.clone(),
            self.volume_queue.clone(),
            self.claim_queue.clone(),
            self.config.resync_period,
            stop.clone(),
        ));
        tracing::info!("controller started");
        Workers { tasks, stop }
    }

    /// Stops the workers (each finishes the key it holds) and the watchers.
    async fn stop(mut self, mut workers: Workers) {
        tracing::info!("shutting down");
        workers.stop.cancel();
        self.controller.operations().abort_all();
        self.volume_queue.shut_down();
        self.claim_queue.shut_down();
        while workers.tasks.join_next().await.is_some() {}
        self.tasks.shutdown().await;
        tracing::info!("controller stopped");
    }
}

/// How long a graceful shutdown waits for queued events to be written.
const EVENT_FLUSH_TIMEOUT: Duration = Duration::from_secs(5);

/// Waits, at most [`EVENT_FLUSH_TIMEOUT`], for the events recorded so far to
/// be written, so a clean stop does not lose the last syncs' events.
async fn flush_events(recorder: &EventRecorder) {
    if tokio::time::timeout(EVENT_FLUSH_TIMEOUT, recorder.flush())
        .await
        .is_err()
    {
        tracing::warn!(
            timeout = ?EVENT_FLUSH_TIMEOUT,
            "events still queued at shutdown were not written"
        );
    }
}

/// The running workers and the token that stops the resync.
struct Workers {
    tasks: JoinSet<()>,
    stop: CancellationToken,
}

/// A watcher with the default backoff, so a broken watch is retried forever.
fn watch<K>(client: &Client) -> impl Stream<Item = Result<Event<K>, watcher::Error>> + Send + use<K>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    watcher(Api::<K>::all(client.clone()), watcher::Config::default()).default_backoff()
}

use kube::runtime::watcher::watcher;

/// Drives a reflected watch stream, handing each event to `on_event`.
async fn pump<K, S, F>(stream: S, mut on_event: F)
where
    S: Stream<Item = Result<Event<K>, watcher::Error>>,
    F: FnMut(&Event<K>),
{
    let mut stream = std::pin::pin!(stream);
    while let Some(item) = stream.next().await {
        match item {
            Ok(event) => on_event(&event),
            Err(error) => tracing::warn!(%error, "watch failed, retrying"),
        }
    }
}

/// Keeps only what the controller reads from a pod (its volumes, node,
/// phase, deletion and the state of each container of every kind, which
/// tells whether it is terminated), so a large cluster's pods cost little
/// memory.
fn keep_pod_essentials(pod: &mut Pod) {
    pod.metadata.managed_fields = None;
    pod.metadata.annotations = None;
    pod.metadata.labels = None;
    pod.metadata.owner_references = None;
    if let Some(spec) = pod.spec.as_mut() {
        spec.containers.clear();
        spec.init_containers = None;
        spec.ephemeral_containers = None;
    }
    if let Some(status) = pod.status.as_mut() {
        status.conditions = None;
        for statuses in [
            &mut status.container_statuses,
            &mut status.init_container_statuses,
            &mut status.ephemeral_container_statuses,
        ]
        .into_iter()
        .flatten()
        {
            for container in statuses.iter_mut() {
                *container = ContainerStatus {
                    name: std::mem::take(&mut container.name),
                    state: container.state.take(),
                    ..ContainerStatus::default()
                };
            }
        }
    }
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

fn offer_logged(result: Result<bool, crate::cache::CacheError>) {
    if let Err(error) = result {
        tracing::warn!(%error, "object not cached");
    }
}

fn on_volume_event(
    event: &Event<PersistentVolume>,
    store: &Store<PersistentVolume>,
    cache: &ShadowCache,
    queue: &WorkQueue<VolumeName>,
) {
    match event {
        Event::Apply(volume) => {
            let key = VolumeName::of(volume);
            if let Some(shared) = store.get(&ObjectRef::new(&key.0)) {
                offer_logged(cache.offer_volume(shared));
            }
            queue.add(key);
        }
        Event::Delete(volume) => queue.add(VolumeName::of(volume)),
        Event::Init | Event::InitApply(_) => {}
        Event::InitDone => {
            for volume in store.state() {
                offer_logged(cache.offer_volume(volume));
            }
            for name in cache.volume_names() {
                queue.add(name);
            }
        }
    }
}

fn on_claim_event(
    event: &Event<PersistentVolumeClaim>,
    store: &Store<PersistentVolumeClaim>,
    cache: &ShadowCache,
    queue: &WorkQueue<ClaimKey>,
) {
    match event {
        Event::Apply(claim) => {
            let key = ClaimKey::of(claim);
            if let Some(shared) = store.get(&ObjectRef::new(&key.name).within(&key.namespace)) {
                offer_logged(cache.offer_claim(shared));
            }
            queue.add(key);
        }
        Event::Delete(claim) => queue.add(ClaimKey::of(claim)),
        Event::Init | Event::InitApply(_) => {}
        Event::InitDone => {
            for claim in store.state() {
                offer_logged(cache.offer_claim(claim));
            }
            for key in cache.claim_keys() {
                queue.add(key);
            }
        }
    }
}

/// Takes volume keys off the queue one at a time: a key still in the lister
/// is synced from the newest cached version; a key gone from the lister is a
/// deletion.
async fn volume_worker(
    controller: Arc<Controller>,
    store: Store<PersistentVolume>,
    queue: WorkQueue<VolumeName>,
    claim_queue: WorkQueue<ClaimKey>,
) {
    while let Some(key) = queue.get().await {
        let started = tokio::time::Instant::now();
        let result = match store.get(&ObjectRef::new(&key.0)) {
            Some(listed) => {
                offer_logged(controller.cache().offer_volume(listed));
                match controller.cache().volume(&key.0) {
                    Some(newest) => controller.sync_volume(&newest).await,
                    None => Ok(()),
                }
            }
            None => {
                if let Some(last) = controller.cache().remove_volume(&key.0) {
                    tracing::info!(volume = %key, "volume deleted");
                    if let Some(claim) = claim_of_deleted_volume(&last) {
                        claim_queue.add(claim);
                    }
                }
                Ok(())
            }
        };
        controller
            .metrics()
            .sync_finished("volume", result_label(&result), started.elapsed());
        finish(&queue, &key, result, "volume");
    }
}

/// Takes claim keys off the queue one at a time, like [`volume_worker`].
async fn claim_worker(
    controller: Arc<Controller>,
    store: Store<PersistentVolumeClaim>,
    queue: WorkQueue<ClaimKey>,
    volume_queue: WorkQueue<VolumeName>,
) {
    while let Some(key) = queue.get().await {
        let started = tokio::time::Instant::now();
        let result = match store.get(&ObjectRef::new(&key.name).within(&key.namespace)) {
            Some(listed) => {
                offer_logged(controller.cache().offer_claim(listed));
                match controller.cache().claim(&key) {
                    Some(newest) => controller.sync_claim(&newest).await,
                    None => Ok(()),
                }
            }
            None => {
                if let Some(last) = controller.cache().remove_claim(&key) {
                    tracing::info!(claim = %key, "claim deleted");
                    if let Some(volume) = volume_of_deleted_claim(&last) {
                        volume_queue.add(volume);
                    }
                }
                Ok(())
            }
        };
        controller
            .metrics()
            .sync_finished("claim", result_label(&result), started.elapsed());
        finish(&queue, &key, result, "claim");
    }
}

/// The claim a deleted volume was bound to: it becomes Lost promptly.
fn claim_of_deleted_volume(volume: &PersistentVolume) -> Option<ClaimKey> {
    let reference = volume.spec.as_ref()?.claim_ref.as_ref()?;
    Some(ClaimKey::new(
        reference.namespace.clone()?,
        reference.name.clone()?,
    ))
}

/// The volume a deleted claim was bound to: it becomes Released promptly.
fn volume_of_deleted_claim(claim: &PersistentVolumeClaim) -> Option<VolumeName> {
    let name = claim.spec.as_ref()?.volume_name.clone()?;
    (!name.is_empty()).then_some(VolumeName(name))
}

/// The `result` label of a sync: `ok` or the error's metric label.
fn result_label(result: &crate::error::Result<()>) -> &'static str {
    match result {
        Ok(()) => "ok",
        Err(error) => error.metric_label(),
    }
}

/// Ends one key's turn: success forgets its failures, an error retries it
/// with backoff.
fn finish<K>(queue: &WorkQueue<K>, key: &K, result: crate::error::Result<()>, kind: &str)
where
    K: Clone + Eq + std::hash::Hash + std::fmt::Display + Send + Sync + 'static,
{
    match result {
        Ok(()) => queue.forget(key),
        Err(error) if error.is_conflict() => {
            tracing::debug!(%key, kind, %error, "conflict, will retry");
            queue.add_rate_limited(key.clone());
        }
        Err(error) => {
            tracing::warn!(%key, kind, %error, "sync failed, will retry");
            queue.add_rate_limited(key.clone());
        }
    }
    queue.done(key);
}

/// Enqueues every claim, then every volume, each period (the first at once).
async fn resync(
    volumes: Store<PersistentVolume>,
    claims: Store<PersistentVolumeClaim>,
    volume_queue: WorkQueue<VolumeName>,
    claim_queue: WorkQueue<ClaimKey>,
    period: Duration,
    stop: CancellationToken,
) {
    let mut ticker = tokio::time::interval(period);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = ticker.tick() => {
                for claim in claims.state() {
                    claim_queue.add(ClaimKey::of(&claim));
                }
                for volume in volumes.state() {
                    volume_queue.add(VolumeName::of(&volume));
                }
            }
        }
    }
}
