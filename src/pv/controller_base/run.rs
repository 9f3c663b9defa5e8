//! Running the controller: with or without election, until a shutdown,
//! the loss of the lease, or a failure of a task it supervises.

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::{BaseError, ControllerBase, Workers};
use crate::runtime::events::EventRecorder;
use crate::runtime::leader::LeaderElector;
use crate::runtime::leadership::{Campaign, ControllerRun, Leadership};

/// How a leading controller stopped.
enum End {
    Shutdown,
    LeaseLost,
    Failed(BaseError),
}

impl ControllerBase {
    /// Runs the controller alone, without election, until `shutdown`
    /// resolves: watchers, one worker per queue (a sync is not reentrant
    /// for one object, and one worker per kind keeps two claims from racing
    /// for one volume), and the resync.
    pub async fn run(self, shutdown: impl Future<Output = ()>) -> Result<(), BaseError> {
        self.run_campaign(None, shutdown).await
    }

    /// Runs the controller alone with leader election: the caches are
    /// filled and kept warm at once, but the workers (every write) run only
    /// while `elector` holds the lease. On `shutdown` the lease is released
    /// once the events are written, so a follower takes over at once; if
    /// the lease cannot be renewed, every sync and operation in flight is
    /// cancelled and [`BaseError::LeadershipLost`] is returned.
    pub async fn run_elected(
        self,
        elector: LeaderElector,
        shutdown: impl Future<Output = ()>,
    ) -> Result<(), BaseError> {
        self.run_campaign(Some(elector), shutdown).await
    }

    async fn run_campaign(
        self,
        elector: Option<LeaderElector>,
        shutdown: impl Future<Output = ()>,
    ) -> Result<(), BaseError> {
        let campaign = Campaign::default().reporting_to(Arc::clone(&self.metrics));
        let run: ControllerRun<BaseError> =
            Box::pin(self.run_led(campaign.leadership(), campaign.stop_token()));
        campaign
            .run(elector, vec![run], shutdown, BaseError::TaskEnded)
            .await
    }

    /// Runs the controller as one of the process's: caches at once, the
    /// workers while `leadership` says the process leads, until `stop` is
    /// cancelled (a graceful stop that writes the recorded events) or the
    /// lease is lost (everything in flight cancelled).
    pub async fn run_led(
        mut self,
        mut leadership: Leadership,
        stop: CancellationToken,
    ) -> Result<(), BaseError> {
        let result = self.lead(&mut leadership, &stop).await;
        self.fail_on(result)
    }

    async fn lead(
        &mut self,
        leadership: &mut Leadership,
        stop: &CancellationToken,
    ) -> Result<(), BaseError> {
        if !self.sync_caches(pin!(stop.cancelled())).await? {
            return Ok(());
        }
        tokio::select! {
            acquired = leadership.acquired() => {
                if !acquired {
                    self.watchers.shutdown().await;
                    return Err(BaseError::LeadershipLost);
                }
            }
            () = stop.cancelled() => {
                self.watchers.shutdown().await;
                tracing::info!("stopped before becoming leader");
                return Ok(());
            }
            failure = next_failure(&mut self.watchers) => return Err(failure),
        }
        let mut workers = self.start_workers();
        let end = tokio::select! {
            () = leadership.lost() => End::LeaseLost,
            () = stop.cancelled() => End::Shutdown,
            failure = next_failure(&mut self.watchers) => End::Failed(failure),
            failure = next_failure(&mut workers.tasks) => End::Failed(failure),
        };
        match end {
            End::LeaseLost => {
                self.abort(workers).await;
                Err(BaseError::LeadershipLost)
            }
            End::Shutdown => {
                self.stop(workers).await;
                // Still the leader until the lease is released: write what
                // the workers recorded.
                flush_events(self.controller.recorder()).await;
                Ok(())
            }
            End::Failed(failure) => {
                self.abort(workers).await;
                Err(failure)
            }
        }
    }

    /// Marks the process unhealthy when `result` is an error.
    fn fail_on(&self, result: Result<(), BaseError>) -> Result<(), BaseError> {
        if let Err(error) = &result {
            tracing::error!(%error, "controller stopped with an error");
            self.liveness.fail(error.to_string());
        }
        result
    }

    /// Stops gracefully: each worker finishes the key it holds; operations
    /// are cancelled, as the next leader runs them again.
    async fn stop(&mut self, mut workers: Workers) {
        tracing::info!("shutting down");
        self.leading.store(false, Ordering::Release);
        workers.stop.cancel();
        self.controller.operations().abort_all();
        self.volume_queue.shut_down();
        self.claim_queue.shut_down();
        while workers.tasks.join_next().await.is_some() {}
        self.watchers.shutdown().await;
        tracing::info!("controller stopped");
    }

    /// Stops at once: every sync and operation in flight is cancelled where
    /// it stands (its next write is never sent).
    async fn abort(&mut self, mut workers: Workers) {
        tracing::warn!("stopping every sync and operation in flight");
        self.leading.store(false, Ordering::Release);
        workers.stop.cancel();
        workers.tasks.abort_all();
        self.controller.operations().abort_all();
        self.volume_queue.shut_down();
        self.claim_queue.shut_down();
        while workers.tasks.join_next().await.is_some() {}
        self.watchers.shutdown().await;
    }
}

/// The first of `tasks` to end: each should run as long as the controller,
/// so its end (an error, a return, a panic) is a failure. Never resolves
/// while all of them run, or when there are none.
pub(super) async fn next_failure(tasks: &mut JoinSet<Result<(), BaseError>>) -> BaseError {
    match tasks.join_next().await {
        None => std::future::pending().await,
        Some(Ok(Err(failure))) => failure,
        Some(Ok(Ok(()))) => BaseError::TaskEnded("a controller task".to_string()),
        Some(Err(join_error)) if join_error.is_panic() => {
            BaseError::TaskEnded(format!("a controller task (it panicked: {join_error})"))
        }
        Some(Err(join_error)) => BaseError::TaskEnded(format!("a controller task ({join_error})")),
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
