//! What a controller hands the runner: its [`Workload`], made of pools of
//! workers (a work queue, how many workers take its keys, the decision
//! each makes for a key and the executor that carries its plan out),
//! periodic tasks (a resync), and what to do when the process starts
//! leading and when it stops. The runner ([`super::runner`]) starts and
//! stops every workload at once.
//!
//! A key's turn is the same for every controller: it may be passed by (the
//! controller's gate), else it is decided (reading from the API server
//! what the decision asks for, and deciding again), its plan carried out,
//! and what follows the plan ([`Then`]) done: the key forgotten, left
//! waiting to be woken, or retried with its backoff.

use std::collections::HashMap;
use std::future::Future;
use std::hash::Hash;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Semaphore;
use tokio::task::{Id, JoinSet};
use tokio_util::sync::CancellationToken;

use crate::executor::Executor;
use crate::metrics::Metrics;
use crate::plan::{Failure, Plan, Reads, Then};
use crate::queue::WorkQueue;
use crate::waiting::Waiting;

/// How many times a decision may ask for reads before its key's turn fails.
const READ_ROUNDS: usize = 4;

/// What a key's turn came to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ended {
    /// The key was passed by without a decision (it is queued again when
    /// what it waits for happened): not measured as a sync.
    Passed,
    /// Its plan went through; the key is done.
    Done,
    /// Its plan went through; the key waits to be woken.
    Waits,
    /// It failed, and is retried with its backoff.
    Failed(Failure),
}

/// A decision of a controller: the plan for a key, from the stores and
/// what was read for it.
pub type Decide<Key, L> = Arc<dyn Fn(&Key, &Reads) -> Plan<L> + Send + Sync>;

/// Whether a key is passed by without a decision now.
type PassFn<Key> = Arc<dyn Fn(&Key) -> bool + Send + Sync>;

/// What a pool does after each key's turn.
type AfterFn<Key> = Arc<dyn Fn(&Key, &Ended) + Send + Sync>;

/// A work queue, its workers (or its lane and executions), the decision
/// they make for each key and the executor of the plans.
pub struct Pool<Key, L> {
    queue: WorkQueue<Key>,
    workers: usize,
    kind: fn(&Key) -> &'static str,
    decide: Decide<Key, L>,
    executor: Executor<L>,
    lane: bool,
    pass: Option<PassFn<Key>>,
    after_each: Option<AfterFn<Key>>,
    waiting: Option<Waiting<Key>>,
}

impl<Key, L> Pool<Key, L>
where
    Key: Clone + Eq + Hash + std::fmt::Display + Send + Sync + 'static,
    L: Send + Sync + 'static,
{
    /// `workers` workers (at least one) over `queue`, each deciding a key
    /// with `decide` and carrying its plan out on `executor`; `kind` labels
    /// the keys in the sync metric.
    pub fn new(
        queue: WorkQueue<Key>,
        workers: usize,
        kind: fn(&Key) -> &'static str,
        decide: impl Fn(&Key, &Reads) -> Plan<L> + Send + Sync + 'static,
        executor: Executor<L>,
    ) -> Self {
        Self {
            queue,
            workers: workers.max(1),
            kind,
            decide: Arc::new(decide),
            executor,
            lane: false,
            pass: None,
            after_each: None,
            waiting: None,
        }
    }

    /// Decides in one lane instead: one key at a time, in the order keys
    /// leave the queue, its plan's reservations taken before the next
    /// decision (so what one decision reserves, the next passes by); the
    /// plans run beside each other, at most as many as there were workers
    /// (one per key: a key is done when its plan ends). The sync metric
    /// measures a key from its decision to the end of its plan.
    #[must_use]
    pub fn in_one_lane(mut self) -> Self {
        self.lane = true;
        self
    }

    /// Passes a key by without a decision while `pass` says so.
    #[must_use]
    pub fn passing(mut self, pass: impl Fn(&Key) -> bool + Send + Sync + 'static) -> Self {
        self.pass = Some(Arc::new(pass));
        self
    }

    /// Runs `hook` after each key's turn has ended (the key is done).
    #[must_use]
    pub fn after_each(mut self, hook: impl Fn(&Key, &Ended) + Send + Sync + 'static) -> Self {
        self.after_each = Some(Arc::new(hook));
        self
    }

    /// Keeps the keys whose plans say [`Then::Wait`] in `waiting`, until
    /// the controller wakes them.
    #[must_use]
    pub fn waiting(mut self, waiting: Waiting<Key>) -> Self {
        self.waiting = Some(waiting);
        self
    }

    /// Decides about `key` again with what `plan` asks to read, as often
    /// as it asks.
    async fn decide_reading(&self, key: &Key, plan: Plan<L>) -> Plan<L> {
        reading(&self.executor, plan, |reads| (self.decide)(key, reads)).await
    }

    /// One worker: takes keys one at a time until the queue shuts down.
    async fn work(self: Arc<Self>, controller: &'static str, metrics: Arc<Metrics>) {
        while let Some(key) = self.queue.get().await {
            let started = tokio::time::Instant::now();
            if self.passes(&key) {
                self.finish(controller, &metrics, &key, started, None, &Ended::Passed);
                continue;
            }
            let epoch = self.waiting.as_ref().map(Waiting::epoch);
            let ended = turn(&self.executor, |reads| (self.decide)(&key, reads)).await;
            self.finish(controller, &metrics, &key, started, epoch, &ended);
        }
    }

    /// Whether the key is passed by now.
    fn passes(&self, key: &Key) -> bool {
        self.pass.as_ref().is_some_and(|pass| pass(key))
    }

    /// The lane: decides one key at a time while fewer than `workers`
    /// plans run; when the queue shuts down, waits for the plans running.
    /// Ends early when a plan's task panicked, which stops the controllers
    /// as a worker's end does.
    async fn run_lane(self: Arc<Self>, controller: &'static str, metrics: Arc<Metrics>) {
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
            let Some(key) = self.queue.get().await else {
                break;
            };
            let started = tokio::time::Instant::now();
            if self.passes(&key) {
                self.finish(controller, &metrics, &key, started, None, &Ended::Passed);
                continue;
            }
            let epoch = self.waiting.as_ref().map(Waiting::epoch);
            let plan = (self.decide)(&key, &Reads::none());
            let this = Arc::clone(&self);
            let metrics = Arc::clone(&metrics);
            if matches!(plan.what_then(), Then::Read(_)) {
                running.spawn(async move {
                    let plan = this.decide_reading(&key, plan).await;
                    let ended = ended(this.executor.execute(plan).await);
                    this.finish(controller, &metrics, &key, started, epoch, &ended);
                    drop(slot);
                });
                continue;
            }
            match self.executor.start(plan) {
                Ok(plan) => {
                    running.spawn(async move {
                        let ended = ended(this.executor.finish(plan).await);
                        this.finish(controller, &metrics, &key, started, epoch, &ended);
                        drop(slot);
                    });
                }
                Err(error) => {
                    let ended = Ended::Failed(Failure::of_write(&error));
                    self.finish(controller, &metrics, &key, started, epoch, &ended);
                }
            }
        }
        while let Some(ended) = running.join_next().await {
            if ended.is_err() {
                return;
            }
        }
    }

    /// Ends a key's turn: measures it, forgets its failures or queues it
    /// for a retry with its backoff, keeps it waiting or not, and marks it
    /// done. `epoch` is the waiting set's epoch when its decision began.
    fn finish(
        &self,
        controller: &'static str,
        metrics: &Metrics,
        key: &Key,
        started: tokio::time::Instant,
        epoch: Option<u64>,
        ended: &Ended,
    ) {
        let label = match ended {
            Ended::Passed => None,
            Ended::Done | Ended::Waits => Some("ok"),
            Ended::Failed(failure) => Some(failure.label),
        };
        if let Some(label) = label {
            metrics.sync_finished(controller, (self.kind)(key), label, started.elapsed());
        }
        match ended {
            Ended::Passed => self.queue.forget(key),
            Ended::Done => {
                self.queue.forget(key);
                if let Some(waiting) = &self.waiting {
                    waiting.forget(key);
                }
            }
            Ended::Waits => {
                self.queue.forget(key);
                if let (Some(waiting), Some(epoch)) = (&self.waiting, epoch) {
                    waiting.wait(key, epoch);
                } else {
                    tracing::debug!(controller, %key, "waits, with nothing to wake it");
                }
            }
            Ended::Failed(failure) => {
                if failure.expected {
                    tracing::debug!(controller, %key, error = %failure.reason, "will retry");
                } else {
                    tracing::warn!(controller, %key, error = %failure.reason, "sync failed, will retry");
                }
                self.queue.add_rate_limited(key.clone());
            }
        }
        self.queue.done(key);
        if let Some(hook) = &self.after_each {
            hook(key, ended);
        }
    }
}

/// One key's whole turn, outside any pool as in one: `decide` (reading
/// what it asks for from the API server, and deciding again with it), and
/// its plan carried out on `executor`.
pub async fn turn<L: Send + Sync + 'static>(
    executor: &Executor<L>,
    decide: impl Fn(&Reads) -> Plan<L>,
) -> Ended {
    let plan = reading(executor, decide(&Reads::none()), decide).await;
    ended(executor.execute(plan).await)
}

/// `plan`, or when it asks to read, the plan `decide` makes with what was
/// read, as often as it asks (a few times at most).
async fn reading<L: Send + Sync + 'static>(
    executor: &Executor<L>,
    mut plan: Plan<L>,
    decide: impl Fn(&Reads) -> Plan<L>,
) -> Plan<L> {
    let mut reads = Reads::none();
    for _ in 0..READ_ROUNDS {
        if !matches!(plan.what_then(), Then::Read(_)) {
            return plan;
        }
        if let Err(error) = executor.read(plan.what_then(), &mut reads).await {
            return Plan::failed(Failure::of_write(&error));
        }
        plan = decide(&reads);
    }
    Plan::failed(Failure {
        reason: format!("a decision asked to read again after {READ_ROUNDS} reads"),
        label: "reads",
        expected: false,
    })
}

/// What a plan's end comes to.
fn ended(result: Result<Then, crate::write::WriteError>) -> Ended {
    match result {
        Ok(Then::Done) => Ended::Done,
        Ok(Then::Wait) => Ended::Waits,
        Ok(Then::Fail(failure)) => Ended::Failed(failure),
        Ok(Then::Read(_)) => Ended::Failed(Failure {
            reason: "a plan asked to read after its steps".to_string(),
            label: "reads",
            expected: false,
        }),
        Err(error) => Ended::Failed(Failure::of_write(&error)),
    }
}

/// A pool of any key type, as a [`Workload`] holds it.
trait AnyPool: Send + Sync {
    fn spawn(&self, controller: &'static str, metrics: &Arc<Metrics>, tasks: &mut Tasks);
    fn shut_down(&self);
}

impl<Key, L> AnyPool for Arc<Pool<Key, L>>
where
    Key: Clone + Eq + Hash + std::fmt::Display + Send + Sync + 'static,
    L: Send + Sync + 'static,
{
    fn spawn(&self, controller: &'static str, metrics: &Arc<Metrics>, tasks: &mut Tasks) {
        if self.lane {
            let lane = Arc::clone(self).run_lane(controller, Arc::clone(metrics));
            tasks.spawn(controller, "deciding lane", lane);
            return;
        }
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
    pub fn pool<Key, L>(&mut self, pool: Pool<Key, L>)
    where
        Key: Clone + Eq + Hash + std::fmt::Display + Send + Sync + 'static,
        L: Send + Sync + 'static,
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
                        biased;
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
