//! One controller process: the admin server, the controller, and leader
//! election around it when asked. The binary's cluster mode and embedded
//! mode both run through here, so they cannot drift apart.

use std::future::Future;
use std::net::SocketAddr;

use crate::pv::controller_base::{BaseConfig, BaseError, ControllerBase, IdleProbe};
use crate::runtime::client::Clients;
use crate::runtime::leader::{LeaderElector, LeaseConfig};
use crate::runtime::metrics::MetricsError;
use crate::runtime::server::{self, BindError, Health};

/// What to run.
#[derive(Clone, Debug)]
pub struct AppConfig {
    /// The controller's wiring and settings.
    pub base: BaseConfig,
    /// Where to serve `/metrics`, `/livez` and `/readyz` (port 0: any free port).
    pub metrics_address: SocketAddr,
    /// The Lease to compete for; `None` runs without election.
    pub election: Option<LeaseConfig>,
}

/// Why the process stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    /// The controller failed (caches never synced, leadership lost, ...).
    #[error(transparent)]
    Controller(#[from] BaseError),
    /// The admin server could not listen.
    #[error(transparent)]
    Bind(#[from] BindError),
    /// The clients' request counts could not be exported.
    #[error(transparent)]
    Metrics(#[from] MetricsError),
}

/// A controller whose admin server is already listening.
pub struct App {
    base: ControllerBase,
    clients: Clients,
    election: Option<LeaseConfig>,
    metrics_address: SocketAddr,
    server: tokio::task::JoinHandle<()>,
}

impl App {
    /// Builds the controller on the controller's client and starts serving
    /// its admin endpoints (not ready until the caches sync), the clients'
    /// request counts among the metrics.
    pub async fn start(clients: Clients, config: AppConfig) -> Result<Self, AppError> {
        let base = ControllerBase::new(clients.controller.clone(), config.base)?;
        base.metrics()
            .register(Box::new(clients.requests.collector()?))?;
        let listener = server::bind(config.metrics_address).await?;
        let metrics_address = listener.local_addr().unwrap_or(config.metrics_address);
        let health = Health {
            readiness: base.readiness(),
            liveness: base.liveness(),
        };
        let server = tokio::spawn(server::serve(listener, base.metrics(), health));
        tracing::info!(address = %metrics_address, "serving /metrics, /livez and /readyz");
        Ok(Self {
            base,
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

    /// Tells whether the controller has nothing left to do.
    pub fn idle_probe(&self) -> IdleProbe {
        self.base.idle_probe()
    }

    /// Runs the controller (elected when configured, on the lease's own
    /// client) until `shutdown` resolves, then stops the admin server.
    /// Without election the write gate opens for good.
    pub async fn run(self, shutdown: impl Future<Output = ()>) -> Result<(), AppError> {
        let result = if let Some(lease) = self.election {
            let elector = LeaderElector::new(self.clients.lease, lease, self.clients.gate);
            self.base.run_elected(elector, shutdown).await
        } else {
            self.clients.gate.open();
            self.base.run(shutdown).await
        };
        self.server.abort();
        Ok(result?)
    }
}
