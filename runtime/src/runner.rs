//! The one runner of the process's controllers.
//!
//! A controller hands the runner its [`Workload`] (see
//! [`crate::workload`]). The runner then, for every controller at
//! once:
//!
//! 1. starts the process's watches, one per kind, and waits until every
//!    kind's first list is in its store (`/readyz` turns ready: a follower
//!    with warm stores is fit to take over);
//! 2. competes for the one Lease (or leads at once without election) and,
//!    while it leads, runs every workload: handlers queue work only from
//!    now on ([`Leading`]). A replica that wins the Lease first lists every
//!    kind again and starts its workers only once those lists are in: its
//!    watches may lag behind what the last leader wrote and saw (a lost
//!    event, a watch slow to resume), and a decision made on such a store
//!    (an object already deleted, still waiting for its work) would do
//!    that work a second time. The runner makes one attempt at the
//!    Lease before the watches start, so a replica that wins it then (a
//!    lone replica, the usual start) lists once: its lists began after it
//!    led;
//! 3. stops on a shutdown (each worker finishes the key it holds, then the
//!    recorded events are written and the Lease released, so a follower
//!    takes over at once), on the loss of the Lease (every sync and
//!    operation in flight is cancelled where it stands: the write gate
//!    closed already), or on a failure: a watch that keeps failing, a
//!    worker or periodic task that ends or panics. A failure turns `/livez`
//!    unhealthy and is returned, so the process exits non-zero and is
//!    restarted rather than looking healthy while doing nothing.

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use kube::Client;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::events::EventRecorder;
use crate::informer::{FIRST_LIST, Informers, WatchFailure, WatchSettings, Watches};
use crate::leader::LeaderElector;
use crate::metrics::Metrics;
use crate::server::{Liveness, Readiness};
use crate::workload::{IdleProbe, Tasks, Workload};

/// Whether the process leads now: the controllers' handlers queue work
/// only while it does (a follower keeps its stores warm and collects no
/// work; it syncs everything once it leads). Cheap to clone.
#[derive(Clone, Debug, Default)]
pub struct Leading(Arc<AtomicBool>);

impl Leading {
    /// Whether the process leads.
    pub fn get(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }

    /// Sets whether the process leads (the runner does, as the Lease
    /// comes and goes).
    pub fn set(&self, leading: bool) {
        self.0.store(leading, Ordering::Release);
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
pub struct Runner {
    client: Client,
    watch_settings: WatchSettings,
    informers: Option<Informers>,
    watches: Watches,
    workloads: Vec<Workload>,
    leading: Leading,
    recorder: EventRecorder,
    metrics: Arc<Metrics>,
    readiness: Readiness,
    liveness: Liveness,
    report_leader: bool,
}

/// What a [`Runner`] is made of.
pub struct RunnerParts {
    /// The controllers' client, for the watches.
    pub client: Client,
    /// How the watches list (objects per page) and how long one may fail
    /// without one success.
    pub watch_settings: WatchSettings,
    /// The kinds the controllers asked for.
    pub informers: Informers,
    /// The controllers' work.
    pub workloads: Vec<Workload>,
    /// The flag the controllers' handlers read.
    pub leading: Leading,
    /// The process's event recorder, flushed on a graceful stop.
    pub recorder: EventRecorder,
    /// The process's registry.
    pub metrics: Arc<Metrics>,
    /// For `/readyz`.
    pub readiness: Readiness,
    /// For `/livez`.
    pub liveness: Liveness,
    /// Whether a process without an election reports itself leading
    /// (`pv_controller_leader` 1); one that must not act on the cluster
    /// leads nothing and says so, though its controllers decide.
    pub report_leader: bool,
}

impl Runner {
    /// A runner of `parts`; nothing runs yet.
    pub fn new(parts: RunnerParts) -> Self {
        Self {
            client: parts.client,
            watch_settings: parts.watch_settings,
            informers: Some(parts.informers),
            watches: Watches::default(),
            workloads: parts.workloads,
            leading: parts.leading,
            recorder: parts.recorder,
            metrics: parts.metrics,
            readiness: parts.readiness,
            liveness: parts.liveness,
            report_leader: parts.report_leader,
        }
    }

    /// Tells whether every controller is idle.
    pub fn idle_probe(&self) -> IdleProbe {
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
            self.watches = informers.start(&self.client, self.watch_settings);
        }
    }

    /// Starts the watches (once) and waits until every kind's first list
    /// is in its store, without leading: for callers that sync objects
    /// themselves.
    #[cfg(any(test, feature = "testing"))]
    pub async fn sync_caches(&mut self) -> Result<(), RunError> {
        self.start_watches();
        let Watches { tasks, synced, .. } = &mut self.watches;
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
    pub async fn run(
        mut self,
        mut election: Option<LeaderElector>,
        shutdown: impl Future<Output = ()>,
    ) -> Result<(), RunError> {
        let role = watch::Sender::new(Role::Follower);
        // One attempt at the Lease before the watches start: lists that
        // begin after this replica holds it already hold everything an
        // earlier leader wrote, so leading needs no second list.
        let watching = self.informers.is_none();
        let held = match election.as_mut() {
            Some(elector) if !watching => first_attempt(elector).await,
            _ => false,
        };
        let result = {
            let metrics = Arc::clone(&self.metrics);
            let relist = election.is_some() && !held;
            let campaign = compete(election.as_mut(), held, &role, &metrics, self.report_leader);
            Box::pin(self.lead(campaign, relist, role.subscribe(), shutdown)).await
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

    /// Leads while `role` says so; `relist` makes a replica that comes to
    /// lead list every kind again before its workers start.
    async fn lead(
        &mut self,
        campaign: impl Future<Output = ()>,
        relist: bool,
        mut role: watch::Receiver<Role>,
        shutdown: impl Future<Output = ()>,
    ) -> Result<(), RunError> {
        let mut campaign = pin!(campaign);
        let mut shutdown = pin!(shutdown);
        self.start_watches();
        let mut tasks: Option<Tasks> = None;
        // The list request the workers wait for, once this replica leads.
        let mut leading_list: Option<u64> = None;
        let stop = CancellationToken::new();
        let end = loop {
            let now = *role.borrow_and_update();
            if now == Role::Lost {
                self.abort(tasks.take(), &stop).await;
                return Err(RunError::LeadershipLost);
            }
            if now == Role::Leader && leading_list.is_none() {
                leading_list = Some(if relist {
                    tracing::info!("listing every kind again before leading");
                    self.watches.relist()
                } else {
                    FIRST_LIST
                });
            }
            let listed = leading_list.is_some_and(|request| self.watches.listed(request));
            if tasks.is_none() && listed && self.readiness.is_ready() {
                tasks = Some(self.start_workloads(&stop));
            }
            let Watches {
                tasks: watches,
                synced,
                ..
            } = &mut self.watches;
            let filling = !self.readiness.is_ready();
            let relisting = leading_list.filter(|_| !listed);
            tokio::select! {
                biased;
                () = &mut campaign => {}
                () = &mut shutdown => break End::Shutdown,
                failure = Watches::failure_of(watches) => break End::Failed(failure.into()),
                () = Watches::wait(synced), if filling => {
                    tracing::info!("every kind's first list is in");
                    self.readiness.set_ready();
                }
                () = Watches::wait_for(synced, relisting.unwrap_or(FIRST_LIST)), if relisting.is_some() => {}
                changed = role.changed() => if changed.is_err() {
                    break End::Failed(RunError::LeadershipLost);
                },
                failure = async { match tasks.as_mut() {
                    Some(tasks) => tasks.failure().await,
                    None => std::future::pending().await,
                } } => break End::Failed(RunError::TaskEnded {
                    controller: failure.controller,
                    task: failure.task,
                }),
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
        tracing::info!(v = 0, "shutting down");
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

/// How long the attempt at the Lease before the watches start may take;
/// past it the watches start and the campaign goes on beside them.
const FIRST_ATTEMPT_TIMEOUT: Duration = Duration::from_secs(2);

/// One attempt at the Lease, bounded by [`FIRST_ATTEMPT_TIMEOUT`]: whether
/// this replica holds it now. A failed or slow attempt is no error: the
/// campaign tries again.
async fn first_attempt(elector: &mut LeaderElector) -> bool {
    match tokio::time::timeout(FIRST_ATTEMPT_TIMEOUT, elector.try_acquire_or_renew()).await {
        Ok(Ok(held)) => held,
        Ok(Err(error)) => {
            tracing::warn!(%error, "cannot acquire the leader lease");
            false
        }
        Err(_) => {
            tracing::warn!(timeout = ?FIRST_ATTEMPT_TIMEOUT, "the first attempt at the leader lease timed out");
            false
        }
    }
}

/// Leads at once without an election (reported as leading unless
/// `report_leader` is false); with one, acquires the Lease
/// (unless `held` already), holds it, and reports its loss. Never returns.
async fn compete(
    election: Option<&mut LeaderElector>,
    held: bool,
    role: &watch::Sender<Role>,
    metrics: &Metrics,
    report_leader: bool,
) {
    if let Some(elector) = election {
        if !held {
            metrics.set_leader(false);
            tracing::info!(identity = %elector.identity(), "waiting for the leader lease");
            elector.acquire().await;
        }
        tracing::info!(v = 0, identity = %elector.identity(), "leading");
        metrics.set_leader(true);
        role.send_replace(Role::Leader);
        elector.hold().await;
        metrics.set_leader(false);
        role.send_replace(Role::Lost);
    } else {
        metrics.set_leader(report_leader);
        role.send_replace(Role::Leader);
    }
    std::future::pending::<()>().await;
}

#[cfg(test)]
mod tests;
