//! One controller process: the admin server, the controllers that
//! `--controllers` enables, and one leader election around all of them
//! (one Lease, one write gate: the leader runs every enabled controller).
//! The binary's cluster mode and embedded mode both run through here, so
//! they cannot drift apart.

mod selection;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use crate::ephemeral::{self, controller_base::EphemeralBase};
use crate::pv::controller_base::{self as pv_base, BaseConfig, ControllerBase};
use crate::runtime::client::Clients;
use crate::runtime::leader::{LeaderElector, LeaseConfig};
use crate::runtime::leadership::Campaign;
use crate::runtime::metrics::{Metrics, MetricsError};
use crate::runtime::server::{self, BindError, Health, Readiness};
use crate::runtime::shared::{
    AllIdle, BoxError, ControllerFailure, RunFn, Shared, StartContext, Started,
};
pub use selection::{ControllerSelection, UnknownController};

/// What to run.
#[derive(Clone, Debug)]
pub struct AppConfig {
    /// The PersistentVolume controller's wiring and settings; its instance
    /// name and watch failure limit hold for every controller.
    pub base: BaseConfig,
    /// Which controllers run (`--controllers`; the default runs all).
    pub controllers: ControllerSelection,
    /// Where to serve `/metrics`, `/livez` and `/readyz` (port 0: any free port).
    pub metrics_address: SocketAddr,
    /// The Lease to compete for; `None` runs without election.
    pub election: Option<LeaseConfig>,
}

/// Why the process stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    /// A controller could not be built, or failed (caches never synced,
    /// leadership lost, ...).
    #[error(transparent)]
    Controller(#[from] ControllerFailure),
    /// `--controllers` names a controller there is not.
    #[error(transparent)]
    Selection(#[from] UnknownController),
    /// `--controllers` leaves no controller to run.
    #[error("--controllers enables no controller")]
    NoController,
    /// The metrics registry could not be set up, or the clients' request
    /// counts could not be exported.
    #[error(transparent)]
    Metrics(#[from] MetricsError),
    /// The admin server could not listen.
    #[error(transparent)]
    Bind(#[from] BindError),
}

/// One controller of the binary: its name in `--controllers` and how the
/// process builds it.
struct Entry {
    name: &'static str,
    build: Build,
}

/// How the process builds one controller.
type Build = Box<dyn FnOnce(&StartContext) -> Result<Started, BoxError>>;

impl Entry {
    fn new<E: Into<BoxError>>(
        name: &'static str,
        build: impl FnOnce(&StartContext) -> Result<Started, E> + 'static,
    ) -> Self {
        Self {
            name,
            build: Box::new(move |context| build(context).map_err(Into::into)),
        }
    }
}

/// Every controller of the binary, in start order.
fn controllers(config: &AppConfig) -> Vec<Entry> {
    let pv = config.base.clone();
    vec![
        Entry::new(pv_base::NAME, move |context| {
            ControllerBase::start(context, pv)
        }),
        Entry::new(ephemeral::NAME, EphemeralBase::start),
        Entry::new(
            crate::resourceclaim::NAME,
            crate::resourceclaim::ClaimControllerBase::start,
        ),
    ]
}

/// The process's controllers, built, with the admin server already
/// listening.
pub struct App {
    runs: Vec<RunFn>,
    metrics: Arc<Metrics>,
    idle: AllIdle,
    clients: Clients,
    election: Option<LeaseConfig>,
    metrics_address: SocketAddr,
    server: tokio::task::JoinHandle<()>,
}

impl App {
    /// Builds the enabled controllers on the controller's client, with one
    /// metrics registry (the clients' request counts among its series), and
    /// starts serving the admin endpoints (not ready until every
    /// controller's caches have synced). Fails on a
    /// `--controllers` entry that names no controller.
    pub async fn start(clients: Clients, config: AppConfig) -> Result<Self, AppError> {
        let entries = controllers(&config);
        let known: Vec<&str> = entries.iter().map(|entry| entry.name).collect();
        config.controllers.validate(&known)?;
        let shared = Shared::new()?;
        let context = StartContext {
            client: clients.controller.clone(),
            shared: shared.clone(),
            instance: config.base.instance.clone(),
            watch_failure_limit: config.base.watch_failure_limit,
        };
        let (mut runs, mut readiness, mut idle) = (Vec::new(), Vec::new(), AllIdle::default());
        for entry in entries {
            if !config.controllers.is_enabled(entry.name) {
                tracing::info!(
                    controller = entry.name,
                    "controller disabled by --controllers"
                );
                continue;
            }
            let started = (entry.build)(&context)
                .map_err(|source| ControllerFailure::new(entry.name, source))?;
            tracing::info!(controller = entry.name, "controller enabled");
            readiness.push(started.readiness);
            idle.push(started.idle);
            runs.push(started.run);
        }
        if runs.is_empty() {
            return Err(AppError::NoController);
        }
        shared
            .metrics
            .register(Box::new(clients.requests.collector()?))?;
        let listener = server::bind(config.metrics_address).await?;
        let metrics_address = listener.local_addr().unwrap_or(config.metrics_address);
        let health = Health {
            readiness: Readiness::all(readiness),
            liveness: shared.liveness,
        };
        let metrics = Arc::clone(&shared.metrics);
        let server = tokio::spawn(server::serve(listener, shared.metrics, health));
        tracing::info!(address = %metrics_address, "serving /metrics, /livez and /readyz");
        Ok(Self {
            runs,
            metrics,
            idle,
            clients,
            election: config.election,
            metrics_address,
            server,
        })
    }

    /// Where the admin server listens.
    pub fn metrics_address(&self) -> SocketAddr {
        self.metrics_address
    }

    /// The process's metrics registry (what `/metrics` serves).
    pub fn metrics(&self) -> Arc<Metrics> {
        Arc::clone(&self.metrics)
    }

    /// Tells whether every controller has nothing left to do.
    pub fn idle_probe(&self) -> AllIdle {
        self.idle.clone()
    }

    /// Runs the controllers (elected when configured, on the lease's own
    /// client) until `shutdown` resolves or one of them fails, then stops
    /// the admin server. Without election the write gate opens for good.
    pub async fn run(self, shutdown: impl Future<Output = ()>) -> Result<(), AppError> {
        if self.election.is_none() {
            self.clients.gate.open();
        }
        let elector = self
            .election
            .map(|lease| LeaderElector::new(self.clients.lease, lease, self.clients.gate));
        let campaign = Campaign::default().reporting_to(Arc::clone(&self.metrics));
        let runs = self
            .runs
            .into_iter()
            .map(|run| run(campaign.leadership(), campaign.stop_token()))
            .collect();
        let result = campaign
            .run(elector, runs, shutdown, |reason| {
                ControllerFailure::new("process", reason)
            })
            .await;
        self.server.abort();
        Ok(result?)
    }
}
