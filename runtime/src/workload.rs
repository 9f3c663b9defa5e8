//! What a controller hands the runner: its [`Workload`], made of pools of
//! workers (a work queue, how many workers take its keys, and the sync each
//! runs for a key, with its retry policy), periodic tasks (a resync), and
//! what to do when the process starts leading and when it stops. The
//! runner ([`super::runner`]) starts and stops every workload at once.

use std::collections::HashMap;
use std::future::Future;
use std::hash::Hash;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::sync::Semaphore;
use tokio::task::{Id, JoinSet};
use tokio_util::sync::CancellationToken;

use crate::metrics::Metrics;
use crate::queue::{Turn, WorkQueue};

/// How one key's turn ended, when it did not fail.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The key was synced.
    Synced,
    /// The key was passed by without a sync (it waits for something else
    /// and is queued again then): not measured as a sync.
    Passed,
}

/// A failed sync, as the runner retries it: every failure is retried with
/// the key's backoff; an expected one quietly.
pub trait SyncFailure: std::fmt::Display + Send {
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

/// What a deciding lane runs for each key: the call decides at once, in
/// the lane, and returns the plan's execution, which runs beside others.
type DecideFn<Key, E> = Arc<dyn Fn(Key) -> BoxFuture<'static, Result<Outcome, E>> + Send + Sync>;

/// How a pool takes its keys.
enum Takes<Key, E> {
    /// Workers, each taking a key and running its sync to the end.
    Workers(SyncFn<Key, E>),
    /// One lane deciding keys in queue order, their executions running
    /// beside each other (one per key: a key is done when its execution
    /// ends).
    Lane(DecideFn<Key, E>),
}

/// A work queue, its workers (or its lane and executions) and the sync they
/// run for each key.
pub struct Pool<Key, E> {
    queue: WorkQueue<Key>,
    workers: usize,
    kind: fn(&Key) -> &'static str,
    takes: Takes<Key, E>,
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
    pub fn new<F, Fut>(
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
            takes: Takes::Workers(Arc::new(move |key, turn| Box::pin(sync(key, turn)))),
            after_each: None,
        }
    }

    /// One lane over `queue`: `decide` is called for one key at a time, in
    /// the order keys leave the queue, and decides then and there (so what
    /// one decision reserves, the next sees); the execution it returns runs
    /// beside at most `executions - 1` others (at least one runs). `kind`
    /// labels the keys in the sync metric, which measures a key from its
    /// decision to the end of its execution.
    pub fn lane<F>(
        queue: WorkQueue<Key>,
        executions: usize,
        kind: fn(&Key) -> &'static str,
        decide: F,
    ) -> Self
    where
        F: Fn(Key) -> BoxFuture<'static, Result<Outcome, E>> + Send + Sync + 'static,
    {
        Self {
            queue,
            workers: executions.max(1),
            kind,
            takes: Takes::Lane(Arc::new(decide)),
            after_each: None,
        }
    }

    /// Runs `hook` after each key's turn has ended (the key is done).
    #[must_use]
    pub fn after_each(mut self, hook: impl Fn() + Send + Sync + 'static) -> Self {
        self.after_each = Some(Arc::new(hook));
        self
    }

    /// One worker: takes keys one at a time until the queue shuts down.
    async fn work(
        self: Arc<Self>,
        sync: SyncFn<Key, E>,
        controller: &'static str,
        metrics: Arc<Metrics>,
    ) {
        while let Some((key, turn)) = self.queue.get_in_turn().await {
            let started = tokio::time::Instant::now();
            let result = sync(key.clone(), turn).await;
            self.finish(controller, &metrics, &key, started, result);
        }
    }

    /// The lane: decides one key at a time while fewer than `workers`
    /// executions run; when the queue shuts down, waits for the executions
    /// running. Ends early when an execution panicked, which stops the
    /// controllers as a worker's end does.
    async fn decide(
        self: Arc<Self>,
        decide: DecideFn<Key, E>,
        controller: &'static str,
        metrics: Arc<Metrics>,
    ) {
        let slots = Arc::new(Semaphore::new(self.workers));
        let mut running = JoinSet::new();
        loop {
            while let Some(ended) = running.try_join_next() {
                if ended.is_err() {
                    return;
                }
            }
            let Ok(slot) = Arc::clone(&slots).acquire_owned().await else {
                break;
            };
            let Some((key, _)) = self.queue.get_in_turn().await else {
                break;
            };
            let started = tokio::time::Instant::now();
            let execution = decide(key.clone());
            let this = Arc::clone(&self);
            let metrics = Arc::clone(&metrics);
            running.spawn(async move {
                let result = execution.await;
                this.finish(controller, &metrics, &key, started, result);
                drop(slot);
            });
        }
        while let Some(ended) = running.join_next().await {
            if ended.is_err() {
                return;
            }
        }
    }

    /// Ends a key's turn: measures it, forgets its failures or queues it
    /// for a retry with its backoff, and marks it done.
    fn finish(
        &self,
        controller: &'static str,
        metrics: &Metrics,
        key: &Key,
        started: tokio::time::Instant,
        result: Result<Outcome, E>,
    ) {
        let label = match &result {
            Ok(Outcome::Synced) => Some("ok"),
            Ok(Outcome::Passed) => None,
            Err(error) => Some(error.metric_label()),
        };
        if let Some(label) = label {
            metrics.sync_finished(controller, (self.kind)(key), label, started.elapsed());
        }
        match result {
            Ok(_) => self.queue.forget(key),
            Err(error) if error.is_expected() => {
                tracing::debug!(controller, %key, %error, "will retry");
                self.queue.add_rate_limited(key.clone());
            }
            Err(error) => {
                tracing::warn!(controller, %key, %error, "sync failed, will retry");
                self.queue.add_rate_limited(key.clone());
            }
        }
        self.queue.done(key);
        if let Some(hook) = &self.after_each {
            hook();
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
        match &self.takes {
            Takes::Workers(sync) => {
                for _ in 0..self.workers {
                    let worker =
                        Arc::clone(self).work(Arc::clone(sync), controller, Arc::clone(metrics));
                    tasks.spawn(controller, "worker", worker);
                }
            }
            Takes::Lane(decide) => {
                let lane =
                    Arc::clone(self).decide(Arc::clone(decide), controller, Arc::clone(metrics));
                tasks.spawn(controller, "deciding lane", lane);
            }
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
pub struct IdleProbe(pub(super) Vec<IdleCheck>);

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
pub struct Workload {
    pub(super) controller: &'static str,
    pools: Vec<Box<dyn AnyPool>>,
    periodic: Vec<(Duration, Arc<dyn Fn() + Send + Sync>)>,
    on_lead: Vec<Box<dyn Fn() + Send + Sync>>,
    on_stop: Vec<Box<dyn Fn() + Send + Sync>>,
    pub(super) idle: Vec<IdleCheck>,
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
    pub fn new(controller: &'static str) -> Self {
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
    pub fn pool<Key, E>(&mut self, pool: Pool<Key, E>)
    where
        Key: Clone + Eq + Hash + std::fmt::Display + Send + Sync + 'static,
        E: SyncFailure + 'static,
    {
        let queue = pool.queue.clone();
        self.idle.push(Arc::new(move || queue.is_idle()));
        self.pools.push(Box::new(Arc::new(pool)));
    }

    /// Runs `task` every `period`, the first time at once. A zero period
    /// is refused when the workload starts: the controllers stop with an
    /// error.
    pub fn every(&mut self, period: Duration, task: impl Fn() + Send + Sync + 'static) {
        self.periodic.push((period, Arc::new(task)));
    }

    /// Runs `hook` when the process starts leading, after the handlers
    /// start queueing and before the workers start: where a controller
    /// queues everything that has work.
    pub fn on_lead(&mut self, hook: impl Fn() + Send + Sync + 'static) {
        self.on_lead.push(Box::new(hook));
    }

    /// Runs `hook` when the controller stops (its long operations are
    /// cancelled there: the next leader runs them again).
    pub fn on_stop(&mut self, hook: impl Fn() + Send + Sync + 'static) {
        self.on_stop.push(Box::new(hook));
    }

    /// Counts the controller busy while `busy` holds, besides its queues.
    pub fn busy_while(&mut self, busy: impl Fn() -> bool + Send + Sync + 'static) {
        self.idle.push(Arc::new(move || !busy()));
    }

    /// Starts the controller's workers and periodic tasks.
    pub(super) fn start(
        &self,
        metrics: &Arc<Metrics>,
        tasks: &mut Tasks,
        stop: &CancellationToken,
    ) {
        for hook in &self.on_lead {
            hook();
        }
        for pool in &self.pools {
            pool.spawn(self.controller, metrics, tasks);
        }
        for (period, task) in &self.periodic {
            if period.is_zero() {
                // It would run without pause (tokio's interval refuses it
                // with a panic): refused, its end stops the controllers
                // with an error that says why.
                tasks.spawn(
                    self.controller,
                    "periodic task, refused: its period is zero,",
                    async {},
                );
                continue;
            }
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

    pub(super) fn stop(&self) {
        for hook in &self.on_stop {
            hook();
        }
        for pool in &self.pools {
            pool.shut_down();
        }
    }
}

/// A task of a controller that ended while it should have run on.
#[derive(Debug)]
pub(super) struct TaskEnded {
    /// The controller's name.
    pub(super) controller: &'static str,
    /// Which task, and how it ended.
    pub(super) task: String,
}

/// The tasks of the leading controllers, each named for the failure it
/// would be if it ended.
#[derive(Default)]
pub(super) struct Tasks {
    pub(super) set: JoinSet<()>,
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
    pub(super) async fn failure(&mut self) -> TaskEnded {
        let ended = match self.set.join_next_with_id().await {
            None => return std::future::pending().await,
            Some(ended) => ended,
        };
        let (id, how) = match ended {
            Ok((id, ())) => (id, "it returned".to_string()),
            Err(error) => (error.id(), error.to_string()),
        };
        let (controller, task) = self.names.get(&id).copied().unwrap_or(("a", "task"));
        TaskEnded {
            controller,
            task: format!("{task} ({how})"),
        }
    }

    pub(super) async fn join_all(&mut self) {
        while self.set.join_next().await.is_some() {}
    }
}
