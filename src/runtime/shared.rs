//! What the controllers of one process share, and what each hands the
//! process: one metrics registry and one `/livez` for all; per controller
//! a [`Started`] (whether it is ready, whether it is idle, for the embedded
//! mode and the tests' settle loop, and how to run it) and, when it fails,
//! a [`ControllerFailure`] naming it.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::runtime::leadership::{ControllerRun, Leadership};
use crate::runtime::metrics::{Metrics, MetricsError};
use crate::runtime::server::{Liveness, Readiness};

/// The parts every controller of a process writes into: its series go to
/// the one registry, its failure to the one `/livez`.
#[derive(Clone, Debug)]
pub struct Shared {
    /// The one metrics registry of the process.
    pub metrics: Arc<Metrics>,
    /// Turned unhealthy by the first controller that fails.
    pub liveness: Liveness,
}

impl Shared {
    /// A fresh registry and a healthy `/livez`.
    pub fn new() -> Result<Self, MetricsError> {
        Ok(Self {
            metrics: Arc::new(Metrics::new()?),
            liveness: Liveness::default(),
        })
    }
}

/// Tells whether a controller has nothing queued, in progress, waiting for
/// a retry or running as a long operation.
pub trait Idle: Send + Sync {
    /// Whether the controller is idle now.
    fn is_idle(&self) -> bool;
}

/// The probes of several controllers: idle when every one of them is.
#[derive(Clone, Default)]
pub struct AllIdle(Vec<Arc<dyn Idle>>);

impl AllIdle {
    /// Adds one controller's probe.
    pub fn push(&mut self, probe: Arc<dyn Idle>) {
        self.0.push(probe);
    }
}

impl Idle for AllIdle {
    fn is_idle(&self) -> bool {
        self.0.iter().all(|probe| probe.is_idle())
    }
}

impl std::fmt::Debug for AllIdle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AllIdle")
            .field("controllers", &self.0.len())
            .finish()
    }
}

/// Any error of a controller, as the process reports it.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Why one controller of the process stopped with an error.
#[derive(Debug, thiserror::Error)]
#[error("the {controller} controller failed: {source}")]
pub struct ControllerFailure {
    /// The controller's name (as in `--controllers`).
    pub controller: &'static str,
    /// What went wrong.
    #[source]
    pub source: BoxError,
}

impl ControllerFailure {
    /// The failure of `controller` for `source`.
    pub fn new(controller: &'static str, source: impl Into<BoxError>) -> Self {
        Self {
            controller,
            source: source.into(),
        }
    }
}

/// What a controller needs from the process to be built: the controller's
/// client (rate-limited, behind the write gate) and the shared parts.
#[derive(Clone)]
pub struct StartContext {
    /// The controller's client.
    pub client: kube::Client,
    /// The registry and `/livez` of the process.
    pub shared: Shared,
    /// This replica's name in events (for example the pod name).
    pub instance: String,
    /// How long a watch may fail without one success before the controller
    /// stops with an error.
    pub watch_failure_limit: Duration,
}

impl std::fmt::Debug for StartContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StartContext")
            .field("instance", &self.instance)
            .field("watch_failure_limit", &self.watch_failure_limit)
            .finish_non_exhaustive()
    }
}

/// How a built controller is run by the process's
/// [`Campaign`](crate::runtime::leadership::Campaign).
pub type RunFn =
    Box<dyn FnOnce(Leadership, CancellationToken) -> ControllerRun<ControllerFailure> + Send>;

/// A controller built by the process and ready to run: what it reports
/// (ready, idle) and how it runs.
pub struct Started {
    /// Turns ready once the controller's caches have synced.
    pub readiness: Readiness,
    /// Whether the controller has nothing left to do.
    pub idle: Arc<dyn Idle>,
    /// Runs it: caches at once, workers while the process leads.
    pub run: RunFn,
}

impl std::fmt::Debug for Started {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Started")
            .field("readiness", &self.readiness)
            .finish_non_exhaustive()
    }
}
