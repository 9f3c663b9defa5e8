//! One election for every controller of the process: the [`Campaign`]
//! runs the controllers, competes for the one Lease (or leads at once
//! without election), tells each controller through its [`Leadership`]
//! when to start and when leadership is lost, and releases the Lease only
//! after every controller has stopped and flushed its events.
//!
//! A controller is a future that fills its caches at once (followers keep
//! them warm), runs its workers only while [`Leadership`] says so, and
//! returns when the campaign's stop token is cancelled. The first
//! controller that fails stops the others, so the process exits as one.

use std::future::Future;
use std::pin::{Pin, pin};
use std::sync::Arc;

use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::runtime::leader::LeaderElector;
use crate::runtime::metrics::Metrics;

/// Where the process stands in the election.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    /// Waiting for the Lease: caches only, no writes.
    Follower,
    /// Holding the Lease (or running without election): workers run.
    Leader,
    /// The Lease could not be renewed in time: every write stops at once.
    Lost,
}

/// What a controller learns of the process's election. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Leadership(watch::Receiver<Role>);

impl Leadership {
    /// Resolves `true` once the process leads, `false` when leadership was
    /// lost first. Never resolves while the process follows.
    pub async fn acquired(&mut self) -> bool {
        let role = self
            .0
            .wait_for(|role| *role != Role::Follower)
            .await
            .map(|role| *role);
        match role {
            Ok(role) => role == Role::Leader,
            Err(_) => std::future::pending().await,
        }
    }

    /// Resolves when the process has lost leadership.
    pub async fn lost(&mut self) {
        if self.0.wait_for(|role| *role == Role::Lost).await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// One controller's run, as the campaign drives it.
pub type ControllerRun<E> = Pin<Box<dyn Future<Output = Result<(), E>> + Send>>;

/// The election of one process and the controllers it runs.
#[derive(Debug)]
pub struct Campaign {
    role: watch::Sender<Role>,
    stop: CancellationToken,
    metrics: Option<Arc<Metrics>>,
}

impl Default for Campaign {
    fn default() -> Self {
        Self {
            role: watch::Sender::new(Role::Follower),
            stop: CancellationToken::new(),
            metrics: None,
        }
    }
}

impl Campaign {
    /// Reports leadership in `metrics` (`pv_controller_leader`): 1 from the
    /// moment the process leads until it stops or loses the Lease, whichever
    /// controllers run.
    #[must_use]
    pub fn reporting_to(mut self, metrics: Arc<Metrics>) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// The handle a controller watches to start and stop its workers.
    pub fn leadership(&self) -> Leadership {
        Leadership(self.role.subscribe())
    }

    /// The token cancelled when the controllers are to stop (a shutdown,
    /// or another controller's failure).
    pub fn stop_token(&self) -> CancellationToken {
        self.stop.clone()
    }

    /// Runs `controllers` until `shutdown` resolves or one of them fails,
    /// under `election` (or leading at once without it). On the way out
    /// every controller is stopped and awaited before the Lease is
    /// released (a lost Lease is not touched again); the first failure is
    /// returned. `ended` names the failure
    /// of a controller whose task panicked.
    pub async fn run<E: Send + 'static>(
        self,
        mut election: Option<LeaderElector>,
        controllers: Vec<ControllerRun<E>>,
        shutdown: impl Future<Output = ()>,
        ended: impl Fn(String) -> E,
    ) -> Result<(), E> {
        let mut tasks = JoinSet::new();
        for controller in controllers {
            tasks.spawn(controller);
        }
        let mut first_failure = None;
        {
            let mut shutdown = pin!(shutdown);
            let mut campaign = pin!(compete(
                election.as_mut(),
                &self.role,
                self.metrics.as_deref()
            ));
            loop {
                tokio::select! {
                    () = &mut campaign => {}
                    () = &mut shutdown, if !self.stop.is_cancelled() => self.stop.cancel(),
                    joined = tasks.join_next() => {
                        let Some(joined) = joined else { break };
                        let failure = match joined {
                            Ok(Ok(())) => None,
                            Ok(Err(failure)) => Some(failure),
                            Err(error) => Some(ended(format!("a controller task ({error})"))),
                        };
                        if let Some(failure) = failure {
                            first_failure.get_or_insert(failure);
                            self.stop.cancel();
                        }
                    }
                }
            }
        }
        if let Some(metrics) = &self.metrics {
            metrics.set_leader(false);
        }
        let lost = *self.role.borrow() == Role::Lost;
        if let Some(elector) = election
            .as_mut()
            .filter(|elector| elector.is_leader() && !lost)
            && let Err(error) = elector.release().await
        {
            tracing::warn!(%error, "could not release the leader lease; followers wait for it to expire");
        }
        first_failure.map_or(Ok(()), Err)
    }
}

/// Leads at once without an election; with one, acquires the Lease, holds
/// it, and reports its loss. Never returns.
async fn compete(
    election: Option<&mut LeaderElector>,
    role: &watch::Sender<Role>,
    metrics: Option<&Metrics>,
) {
    let report = |leading: bool| {
        if let Some(metrics) = metrics {
            metrics.set_leader(leading);
        }
    };
    if let Some(elector) = election {
        report(false);
        tracing::info!(identity = %elector.identity(), "waiting for the leader lease");
        elector.acquire().await;
        tracing::info!(identity = %elector.identity(), "leading");
        report(true);
        role.send_replace(Role::Leader);
        elector.hold().await;
        report(false);
        role.send_replace(Role::Lost);
    } else {
        report(true);
        role.send_replace(Role::Leader);
    }
    std::future::pending::<()>().await;
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    /// A controller that leads until stopped, counting its stops, or fails
    /// once leading when `fails`.
    fn controller(
        campaign: &Campaign,
        fails: bool,
        stops: &Arc<AtomicUsize>,
    ) -> ControllerRun<String> {
        let (mut leadership, stop, stops) = (
            campaign.leadership(),
            campaign.stop_token(),
            Arc::clone(stops),
        );
        Box::pin(async move {
            assert!(leadership.acquired().await, "leads without election");
            if fails {
                return Err("failed".to_string());
            }
            stop.cancelled().await;
            stops.fetch_add(1, Ordering::SeqCst);
            Ok(())
        })
    }

    #[tokio::test]
    async fn shutdown_stops_every_controller_before_returning() {
        let campaign = Campaign::default();
        let stops = Arc::new(AtomicUsize::new(0));
        let runs = vec![
            controller(&campaign, false, &stops),
            controller(&campaign, false, &stops),
        ];
        let result = campaign
            .run(None, runs, tokio::task::yield_now(), |reason| reason)
            .await;
        assert_eq!(result, Ok(()));
        assert_eq!(stops.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn the_first_failure_stops_the_others_and_is_returned() {
        let campaign = Campaign::default();
        let stops = Arc::new(AtomicUsize::new(0));
        let runs = vec![
            controller(&campaign, false, &stops),
            controller(&campaign, true, &stops),
        ];
        let result = campaign
            .run(None, runs, std::future::pending(), |reason| reason)
            .await;
        assert_eq!(result, Err("failed".to_string()));
        assert_eq!(
            stops.load(Ordering::SeqCst),
            1,
            "the other controller was stopped"
        );
    }
}
