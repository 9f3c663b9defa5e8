//! The one runner of the process's controllers.
//!
//! A controller hands the runner its [`Workload`]: pools of workers, each
//! over a work queue with the controller's sync; periodic tasks (a
//! resync); what to do when the process starts leading (queue everything
//! with work) and when it stops. The runner then, for every controller at
//! once:
//!
//! 1. starts the process's watches, one per kind, and waits until every
//!    kind's first list is in its store (`/readyz` turns ready: a follower
//!    with warm stores is fit to take over);
//! 2. competes for the one Lease (or leads at once without election) and,
//!    while it leads, runs every workload: handlers queue work only from
//!    now on ([`Leading`]);
//! 3. stops on a shutdown (each worker finishes the key it holds, then the
//!    recorded events are written and the Lease released, so a follower
//!    takes over at once), on the loss of the Lease (every sync and
//!    operation in flight is cancelled where it stands: the write gate
//!    closed already), or on a failure: a watch that keeps failing, a
//!    worker or periodic task that ends or panics. A failure turns `/livez`
//!    unhealthy and is returned, so the process exits non-zero and is
//!    restarted rather than looking healthy while doing nothing.

use std::collections::HashMap;
use std::future::Future;
use std::hash::Hash;
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures::future::BoxFuture;
use kube::Client;
use tokio::sync::watch;
use tokio::task::{Id, JoinSet};
use tokio_util::sync::CancellationToken;

use crate::runtime::events::EventRecorder;
use crate::runtime::informer::{Informers, WatchFailure, Watches};
use crate::runtime::leader::LeaderElector;
use crate::runtime::metrics::Metrics;
use crate::runtime::queue::{Turn, WorkQueue};
use crate::runtime::server::{Liveness, Readiness};

/// Whether the process leads now: the controllers' handlers queue work
/// only while it does (a follower keeps its stores warm and collects no
/// work; it syncs everything once it leads). Cheap to clone.
#[derive(Clone, Debug, Default)]
pub(crate) struct Leading(Arc<AtomicBool>);

impl Leading {
    /// Whether the process leads.
    pub(crate) fn get(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }

    /// Sets whether the process leads (the runner does, as the Lease
    /// comes and goes).
    pub(crate) fn set(&self, leading: bool) {
        self.0.store(leading, Ordering::Release);
    }
}

/// How one key's turn ended, when it did not fail.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// The key was synced.
    Synced,
    /// The key was passed by without a sync (it waits for something else
    /// and is queued again then): not measured as a sync.
    Passed,
}

/// A failed sync, as the runner retries it: every failure is retried with
/// the key's backoff; an expected one quietly.
pub(crate) trait SyncFailure: std::fmt::Display + Send {
    /// The `result` label of the sync metric.
    fn metric_label(&self) -> &'static str;

    /// Whether the failure is expected now and then (a conflict, an object
    /// that moved on, a wait for another operation): logged at debug level
    /// rather than as a warning.
    fn is_expected(&self) -> bool;
}

/// What a worker runs for each key, given the key's turn.
type SyncFn<Key, E> =
    Arc<dyn Fn(Key, Turn) -> BoxFuture<'static, Result<Outcome, E>> + Send + Sync>;

/// A work queue, its workers and the sync they run for each key.
pub(crate) struct Pool<Key, E> {
    queue: WorkQueue<Key>,
    workers: usize,
    kind: fn(&Key) -> &'static str,
    sync: SyncFn<Key, E>,
    after_each: Option<Arc<dyn Fn() + Send + Sync>>,
}

impl<Key, E> Pool<Key, E>
where
    Key: Clone + Eq + Hash + std::fmt::Display + Send + Sync + 'static,
    E: SyncFailure + 'static,
{
    /// `workers` workers (at least one) over `queue`, syncing each key with
    /// `sync` (which also learns the key's [`Turn`], should it need to do a
    /// step in the order keys left the queue); `kind` labels the keys in the
    /// sync metric.
    pub(crate) fn new<F, Fut>(
        queue: WorkQueue<Key>,
        workers: usize,
        kind: fn(&Key) -> &'static str,
        sync: F,
    ) -> Self
    where
        F: Fn(Key, Turn) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Outcome, E>> + Send + 'static,
    {
        Self {
            queue,
            workers: workers.max(1),
            kind,
            sync: Arc::new(move |key, turn| Box::pin(sync(key, turn))),
            after_each: None,
        }
    }

    /// Runs `hook` after each key's turn has ended (the key is done).
    #[must_use]
    pub(crate) fn after_each(mut self, hook: impl Fn() + Send + Sync + 'static) -> Self {
        self.after_each = Some(Arc::new(hook));
        self
    }

    /// One worker: takes keys one at a time until the queue shuts down.
    async fn work(self: Arc<Self>, controller: &'static str, metrics: Arc<Metrics>) {
        while let Some((key, turn)) = self.queue.get_in_turn().await {
            let started = tokio::time::Instant::now();
            let result = (self.sync)(key.clone(), turn).await;
            let label = match &result {
                Ok(Outcome::Synced) => Some("ok"),
                Ok(Outcome::Passed) => None,
                Err(error) => Some(error.metric_label()),
            };
            if let Some(label) = label {
                metrics.sync_finished(controller, (self.kind)(&key), label, started.elapsed());
            }
            match result {
                Ok(_) => self.queue.forget(&key),
                Err(error) if error.is_expected() => {
                    tracing::debug!(controller, %key, %error, "will retry");
                    self.queue.add_rate_limited(key.clone());
                }
                Err(error) => {
                    tracing::warn!(controller, %key, %error, "sync failed, will retry");
                    self.queue.add_rate_limited(key.clone());
                }
            }
            self.queue.done(&key);
            if let Some(hook) = &self.after_each {
                hook();
            }
        }
    }
}

/// A pool of any key type, as a [`Workload`] holds it.
trait AnyPool: Send + Sync {
    fn spawn(&self, controller: &'static str, metrics: &Arc<Metrics>, tasks: &mut Tasks);
    fn shut_down(&self);
}

impl<Key, E> AnyPool for Arc<Pool<Key, E>>
where
    Key: Clone + Eq + Hash + std::fmt::Display + Send + Sync + 'static,
    E: SyncFailure + 'static,
{
    fn spawn(&self, controller: &'static str, metrics: &Arc<Metrics>, tasks: &mut Tasks) {
        for _ in 0..self.workers {
            let worker = Arc::clone(self).work(controller, Arc::clone(metrics));
            tasks.spawn(controller, "worker", worker);
        }
    }

    fn shut_down(&self) {
        self.queue.shut_down();
    }
}

/// Whether a controller has nothing left to do right now.
type IdleCheck = Arc<dyn Fn() -> bool + Send + Sync>;

/// Tells whether the process's controllers have nothing queued, being
/// synced, waiting for a retry or running as a long operation. Cheap to
/// clone.
#[derive(Clone, Default)]
pub struct IdleProbe(Vec<IdleCheck>);

impl IdleProbe {
    /// Whether every controller is idle now.
    pub fn is_idle(&self) -> bool {
        self.0.iter().all(|check| check())
    }
}

impl std::fmt::Debug for IdleProbe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IdleProbe")
            .field("idle", &self.is_idle())
            .finish()
    }
}

/// What the runner runs of one controller while the process leads; see the
/// module documentation.
pub(crate) struct Workload {
    controller: &'static str,
    pools: Vec<Box<dyn AnyPool>>,
    periodic: Vec<(Duration, Arc<dyn Fn() + Send + Sync>)>,
    on_lead: Vec<Box<dyn Fn() + Send + Sync>>,
    on_stop: Vec<Box<dyn Fn() + Send + Sync>>,
    idle: Vec<IdleCheck>,
}

impl std::fmt::Debug for Workload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Workload")
            .field("controller", &self.controller)
            .field("pools", &self.pools.len())
            .finish_non_exhaustive()
    }
}

impl Workload {
    /// The (empty) workload of `controller`.
    pub(crate) fn new(controller: &'static str) -> Self {
        Self {
            controller,
            pools: Vec::new(),
            periodic: Vec::new(),
            on_lead: Vec::new(),
            on_stop: Vec::new(),
            idle: Vec::new(),
        }
    }

    /// Adds a pool of workers; the controller is idle only while its queue
    /// is.
    pub(crate) fn pool<Key, E>(&mut self, pool: Pool<Key, E>)
    where
        Key: Clone + Eq + Hash + std::fmt::Display + Send + Sync + 'static,
        E: SyncFailure + 'static,
    {
        let queue = pool.queue.clone();
        self.idle.push(Arc::new(move || queue.is_idle()));
        self.pools.push(Box::new(Arc::new(pool)));
    }

    /// Runs `task` every `period`, the first time at once.
    pub(crate) fn every(&mut self, period: Duration, task: impl Fn() + Send + Sync + 'static) {
        self.periodic.push((period, Arc::new(task)));
    }

    /// Runs `hook` when the process starts leading, after the handlers
    /// start queueing and before the workers start: where a controller
    /// queues everything that has work.
    pub(crate) fn on_lead(&mut self, hook: impl Fn() + Send + Sync + 'static) {
        self.on_lead.push(Box::new(hook));
    }

    /// Runs `hook` when the controller stops (its long operations are
    /// cancelled there: the next leader runs them again).
    pub(crate) fn on_stop(&mut self, hook: impl Fn() + Send + Sync + 'static) {
        self.on_stop.push(Box::new(hook));
    }

    /// Counts the controller busy while `busy` holds, besides its queues.
    pub(crate) fn busy_while(&mut self, busy: impl Fn() -> bool + Send + Sync + 'static) {
        self.idle.push(Arc::new(move || !busy()));
    }

    /// Starts the controller's workers and periodic tasks.
    fn start(&self, metrics: &Arc<Metrics>, tasks: &mut Tasks, stop: &CancellationToken) {
        for hook in &self.on_lead {
            hook();
        }
        for pool in &self.pools {
            pool.spawn(self.controller, metrics, tasks);
        }
        for (period, task) in &self.periodic {
            let (period, task, stop) = (*period, Arc::clone(task), stop.clone());
            tasks.spawn(self.controller, "periodic task", async move {
                let mut ticker = tokio::time::interval(period);
                ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                loop {
                    tokio::select! {
                        () = stop.cancelled() => return,
                        _ = ticker.tick() => task(),
                    }
                }
            });
        }
    }

    fn stop(&self) {
        for hook in &self.on_stop {
            hook();
        }
        for pool in &self.pools {
            pool.shut_down();
        }
    }
}

/// The tasks of the leading controllers, each named for the failure it
/// would be if it ended.
#[derive(Default)]
struct Tasks {
    set: JoinSet<()>,
    names: HashMap<Id, (&'static str, &'static str)>,
}

impl Tasks {
    fn spawn(
        &mut self,
        controller: &'static str,
        task: &'static str,
        future: impl Future<Output = ()> + Send + 'static,
    ) {
        let id = self.set.spawn(future).id();
        self.names.insert(id, (controller, task));
    }

    /// The first task to end: each should run until the controllers stop,
    /// so its end (a return, a panic) is a failure. Never resolves while
    /// all of them run, or when there are none.
    async fn failure(&mut self) -> RunError {
        let ended = match self.set.join_next_with_id().await {
            None => return std::future::pending().await,
            Some(ended) => ended,
        };
        let (id, how) = match ended {
            Ok((id, ())) => (id, "it returned".to_string()),
            Err(error) => (error.id(), error.to_string()),
        };
        let (controller, task) = self.names.get(&id).copied().unwrap_or(("a", "task"));
        RunError::TaskEnded {
            controller,
            task: format!("{task} ({how})"),
        }
    }

    async fn join_all(&mut self) {
        while self.set.join_next().await.is_some() {}
    }
}

/// Why the controllers stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// A watch failed for too long, or ended.
    #[error(transparent)]
    Watch(#[from] WatchFailure),
    /// This replica could not renew the Lease in time: it stopped writing,
    /// and must restart to compete again (as kube-controller-manager exits).
    #[error("leader lease lost")]
    LeadershipLost,
    /// A worker or periodic task ended or panicked.
    #[error("the {controller} controller's {task} stopped unexpectedly")]
    TaskEnded {
        /// The controller's name.
        controller: &'static str,
        /// Which task, and how it ended.
        task: String,
    },
}

/// Where the process stands in the election.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    /// Waiting for the Lease: stores only, no writes.
    Follower,
    /// Holding the Lease (or running without election): workers run.
    Leader,
    /// The Lease could not be renewed in time: every write stops at once.
    Lost,
}

/// How a leading process stopped.
enum End {
    Shutdown,
    Failed(RunError),
}

/// Waits for the flush of the events recorded so far, at most this long,
/// on a graceful stop.
const EVENT_FLUSH_TIMEOUT: Duration = Duration::from_secs(5);

/// The process's controllers and watches, built and ready to run.
pub(crate) struct Runner {
    client: Client,
    watch_failure_limit: Duration,
    informers: Option<Informers>,
    watches: Watches,
    workloads: Vec<Workload>,
    leading: Leading,
    recorder: EventRecorder,
    metrics: Arc<Metrics>,
    readiness: Readiness,
    liveness: Liveness,
}

/// What a [`Runner`] is made of.
pub(crate) struct RunnerParts {
    /// The controllers' client, for the watches.
    pub(crate) client: Client,
    /// How long a watch may fail without one success.
    pub(crate) watch_failure_limit: Duration,
    /// The kinds the controllers asked for.
    pub(crate) informers: Informers,
    /// The controllers' work.
    pub(crate) workloads: Vec<Workload>,
    /// The flag the controllers' handlers read.
    pub(crate) leading: Leading,
    /// The process's event recorder, flushed on a graceful stop.
    pub(crate) recorder: EventRecorder,
    /// The process's registry.
    pub(crate) metrics: Arc<Metrics>,
    /// For `/readyz`.
    pub(crate) readiness: Readiness,
    /// For `/livez`.
    pub(crate) liveness: Liveness,
}

impl Runner {
    /// A runner of `parts`; nothing runs yet.
    pub(crate) fn new(parts: RunnerParts) -> Self {
        Self {
            client: parts.client,
            watch_failure_limit: parts.watch_failure_limit,
            informers: Some(parts.informers),
            watches: Watches::default(),
            workloads: parts.workloads,
            leading: parts.leading,
            recorder: parts.recorder,
            metrics: parts.metrics,
            readiness: parts.readiness,
            liveness: parts.liveness,
        }
    }

    /// Tells whether every controller is idle.
    pub(crate) fn idle_probe(&self) -> IdleProbe {
        IdleProbe(
            self.workloads
                .iter()
                .flat_map(|workload| workload.idle.iter().cloned())
                .collect(),
        )
    }

    /// Starts the watches, unless they run already.
    fn start_watches(&mut self) {
        if let Some(informers) = self.informers.take() {
            tracing::info!(kinds = ?informers.kinds(), "starting one watch per kind");
            self.watches = informers.start(&self.client, self.watch_failure_limit);
        }
    }

    /// Starts the watches (once) and waits until every kind's first list
    /// is in its store, without leading: for callers that sync objects
    /// themselves.
    pub(crate) async fn sync_caches(&mut self) -> Result<(), RunError> {
        self.start_watches();
        let Watches { tasks, synced } = &mut self.watches;
        tokio::select! {
            biased;
            failure = Watches::failure_of(tasks) => return Err(failure.into()),
            () = Watches::wait(synced) => {}
        }
        self.readiness.set_ready();
        Ok(())
    }

    /// Runs the controllers until `shutdown` resolves or one of them fails
    /// (see the module documentation), elected by `election` or leading at
    /// once without it. A failure also turns `/livez` unhealthy.
    pub(crate) async fn run(
        mut self,
        mut election: Option<LeaderElector>,
        shutdown: impl Future<Output = ()>,
    ) -> Result<(), RunError> {
        let role = watch::Sender::new(Role::Follower);
        let result = {
            let metrics = Arc::clone(&self.metrics);
            let campaign = compete(election.as_mut(), &role, &metrics);
            self.lead(campaign, role.subscribe(), shutdown).await
        };
        self.metrics.set_leader(false);
        let lost = *role.borrow() == Role::Lost;
        if let Some(elector) = election
            .as_mut()
            .filter(|elector| elector.is_leader() && !lost)
            && let Err(error) = elector.release().await
        {
            tracing::warn!(%error, "could not release the leader lease; followers wait for it to expire");
        }
        if let Err(error) = &result {
            tracing::error!(%error, "controllers stopped with an error");
            self.liveness.fail(error.to_string());
        }
        result
    }

    async fn lead(
        &mut self,
        campaign: impl Future<Output = ()>,
        mut role: watch::Receiver<Role>,
        shutdown: impl Future<Output = ()>,
    ) -> Result<(), RunError> {
        let mut campaign = pin!(campaign);
        let mut shutdown = pin!(shutdown);
        self.start_watches();
        let mut tasks: Option<Tasks> = None;
        let stop = CancellationToken::new();
        let end = loop {
            let now = *role.borrow_and_update();
            if now == Role::Lost {
                self.abort(tasks.take(), &stop).await;
                return Err(RunError::LeadershipLost);
            }
            if now == Role::Leader && tasks.is_none() && self.readiness.is_ready() {
                tasks = Some(self.start_workloads(&stop));
            }
            let Watches {
                tasks: watches,
                synced,
            } = &mut self.watches;
            let filling = !self.readiness.is_ready();
            tokio::select! {
                () = &mut campaign => {}
                () = &mut shutdown => break End::Shutdown,
                failure = Watches::failure_of(watches) => break End::Failed(failure.into()),
                () = Watches::wait(synced), if filling => {
                    tracing::info!("every kind's first list is in");
                    self.readiness.set_ready();
                }
                changed = role.changed() => if changed.is_err() {
                    break End::Failed(RunError::LeadershipLost);
                },
                failure = async { match tasks.as_mut() {
                    Some(tasks) => tasks.failure().await,
                    None => std::future::pending().await,
                } } => break End::Failed(failure),
            }
        };
        match end {
            End::Shutdown => {
                self.stop_gracefully(tasks.take(), &stop).await;
                Ok(())
            }
            End::Failed(failure) => {
                self.abort(tasks.take(), &stop).await;
                Err(failure)
            }
        }
    }

    /// Starts every controller's workers: from now on the handlers queue
    /// work.
    fn start_workloads(&self, stop: &CancellationToken) -> Tasks {
        self.leading.set(true);
        let mut tasks = Tasks::default();
        for workload in &self.workloads {
            workload.start(&self.metrics, &mut tasks, stop);
            tracing::info!(controller = workload.controller, "controller started");
        }
        tasks
    }

    /// Stops gracefully: each worker finishes the key it holds, long
    /// operations are cancelled (the next leader runs them again), and the
    /// recorded events are written while this replica still leads.
    async fn stop_gracefully(&mut self, tasks: Option<Tasks>, stop: &CancellationToken) {
        tracing::info!("shutting down");
        self.leading.set(false);
        stop.cancel();
        for workload in &self.workloads {
            workload.stop();
        }
        if let Some(mut tasks) = tasks {
            tasks.join_all().await;
            if tokio::time::timeout(EVENT_FLUSH_TIMEOUT, self.recorder.flush())
                .await
                .is_err()
            {
                tracing::warn!(
                    timeout = ?EVENT_FLUSH_TIMEOUT,
                    "events still queued at shutdown were not written"
                );
            }
        }
        self.watches.stop().await;
        tracing::info!("controllers stopped");
    }

    /// Stops at once: every sync and operation in flight is cancelled where
    /// it stands (its next write is never sent).
    async fn abort(&mut self, tasks: Option<Tasks>, stop: &CancellationToken) {
        self.leading.set(false);
        stop.cancel();
        if let Some(mut tasks) = tasks {
            tracing::warn!("stopping every sync and operation in flight");
            tasks.set.abort_all();
            for workload in &self.workloads {
                workload.stop();
            }
            tasks.join_all().await;
        } else {
            for workload in &self.workloads {
                workload.stop();
            }
        }
        self.watches.stop().await;
    }
}

/// Leads at once without an election; with one, acquires the Lease, holds
/// it, and reports its loss. Never returns.
async fn compete(
    election: Option<&mut LeaderElector>,
    role: &watch::Sender<Role>,
    metrics: &Metrics,
) {
    if let Some(elector) = election {
        metrics.set_leader(false);
        tracing::info!(identity = %elector.identity(), "waiting for the leader lease");
        elector.acquire().await;
        tracing::info!(identity = %elector.identity(), "leading");
        metrics.set_leader(true);
        role.send_replace(Role::Leader);
        elector.hold().await;
        metrics.set_leader(false);
        role.send_replace(Role::Lost);
    } else {
        metrics.set_leader(true);
        role.send_replace(Role::Leader);
    }
    std::future::pending::<()>().await;
}

#[cfg(test)]
mod tests;
