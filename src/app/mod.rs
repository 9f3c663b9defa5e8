//! One controller process: the admin server, the controllers that
//! `--controllers` enables, built on one set of informers (one watch and
//! one store per kind), one write door and one event recorder, and run by
//! one runner under one leader election (one Lease, one write gate: the
//! leader runs every enabled controller). The binary's cluster mode and
//! embedded mode both run through here, so they cannot drift apart.
//! [`serve`] runs it and builds it again when an API a controller needs
//! appears or goes.

mod apis;
mod controllers;
mod flags;
mod selection;

use std::future::Future;
use std::net::SocketAddr;
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::dry_run::{self, DryRun, DryRunConfig, DryRunJournal};
use crate::runtime::client::Clients;
use crate::runtime::journal::Journal;
use crate::runtime::leader::{LeaderElector, LeaseConfig};
use crate::runtime::metrics::{Metrics, MetricsError};
use crate::runtime::runner::{RunError, Runner, RunnerParts};
use crate::runtime::server::secure::SecureServer;
use crate::runtime::server::{
    self, AdminState, Health, ListenError, Liveness, Readiness, SecureServing,
};
use crate::runtime::shared::{BuildError, Shared};
use crate::runtime::workload::IdleProbe;
use crate::{ephemeral, pv, resourceclaim};
pub(crate) use apis::DEFAULT_API_DISCOVERY_PERIOD;
use controllers::RequiredApi;
pub use flags::plugin_config;
pub use selection::ControllerSelection;
pub(crate) use selection::{ControllerNames, UnknownController};

/// What the process runs, and how: the process's own settings, then each
/// controller's.
#[derive(Clone, Debug)]
pub struct AppConfig {
    /// Which controllers run (`--controllers`; the default runs all).
    pub controllers: ControllerSelection,
    /// This replica's name in events and in the Lease (for example the pod
    /// name).
    pub instance: String,
    /// How long a watch may fail without one success before the process
    /// stops with an error (`--watch-failure-limit`).
    pub watch_failure_limit: Duration,
    /// Where to serve the admin endpoints over plain HTTP without
    /// authentication (port 0: any free port), if at all: for loopback
    /// demos and tests, never a cluster (`--metrics-bind-address`).
    pub insecure_address: Option<SocketAddr>,
    /// The secure admin port (HTTPS, delegated authentication and
    /// authorization), if any.
    pub secure: Option<SecureServing>,
    /// The Lease to compete for; `None` runs without election. A dry run
    /// takes no Lease whatever this says.
    pub election: Option<LeaseConfig>,
    /// The dry run (`--shadow`): the controllers decide but send nothing,
    /// and each decision is judged against what the cluster comes to.
    pub dry_run: Option<DryRunConfig>,
    /// The PersistentVolume controller's settings.
    pub persistentvolume: pv::Config,
    /// The ephemeral volume controller's settings.
    pub ephemeral: ephemeral::Config,
    /// The ResourceClaim controller's settings.
    pub resourceclaim: resourceclaim::Config,
    /// How often [`serve`] asks discovery whether an API an enabled
    /// controller needs appeared or went.
    pub api_discovery_period: Duration,
}

/// Default of [`AppConfig::watch_failure_limit`].
pub(crate) const DEFAULT_WATCH_FAILURE_LIMIT: Duration = Duration::from_secs(180);

impl Default for AppConfig {
    /// Every controller with its defaults, no election, the admin server
    /// on a free loopback port over plain HTTP, no secure port.
    fn default() -> Self {
        Self {
            controllers: ControllerSelection::default(),
            instance: "pv-controller".to_string(),
            watch_failure_limit: DEFAULT_WATCH_FAILURE_LIMIT,
            insecure_address: Some(([127, 0, 0, 1], 0).into()),
            secure: None,
            election: None,
            dry_run: None,
            persistentvolume: pv::Config::default(),
            ephemeral: ephemeral::Config::default(),
            resourceclaim: resourceclaim::Config::default(),
            api_discovery_period: DEFAULT_API_DISCOVERY_PERIOD,
        }
    }
}

/// Why the process stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    /// A controller could not be built.
    #[error("building the {controller} controller: {source}")]
    Build {
        /// The controller's name.
        controller: &'static str,
        /// What went wrong.
        #[source]
        source: BuildError,
    },
    /// The process's shared parts could not be set up.
    #[error(transparent)]
    Shared(BuildError),
    /// The controllers stopped with an error (a watch that kept failing, a
    /// task that ended, the Lease lost).
    #[error(transparent)]
    Run(#[from] RunError),
    /// `--controllers` names a controller there is not.
    #[error(transparent)]
    Selection(#[from] UnknownController),
    /// `--controllers` leaves no controller to run.
    #[error("--controllers enables no controller")]
    NoController,
    /// The clients' request counts could not be exported.
    #[error(transparent)]
    Metrics(#[from] MetricsError),
    /// The admin server could not listen.
    #[error(transparent)]
    Listen(#[from] ListenError),
}

/// The process's controllers, built, with the admin server already
/// listening.
pub struct App {
    runner: Runner,
    #[cfg(feature = "testing")]
    controllers: controllers::Controllers,
    idle: IdleProbe,
    #[cfg(feature = "testing")]
    metrics: Arc<crate::runtime::metrics::Metrics>,
    clients: Clients,
    election: Option<LeaseConfig>,
    dry_run: Option<Arc<DryRun>>,
    insecure_address: Option<SocketAddr>,
    secure_address: Option<SocketAddr>,
    #[cfg(feature = "testing")]
    health: Health,
    servers: tokio::task::JoinSet<()>,
    /// The APIs the enabled controllers need, as served at start-up.
    apis: Vec<RequiredApi>,
}

impl std::fmt::Debug for App {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("App")
            .field("insecure_address", &self.insecure_address)
            .field("secure_address", &self.secure_address)
            .finish_non_exhaustive()
    }
}

impl App {
    /// Builds the enabled controllers on the controllers' client, with one
    /// metrics registry (the clients' request counts among its series), and
    /// starts serving the admin endpoints (not ready until every kind's
    /// first list is in). A controller whose API the server does not serve
    /// is left out, with a warning ([`serve`] builds the process again
    /// when the API appears). Fails on a `--controllers` entry that names
    /// no controller.
    pub async fn start(clients: Clients, config: AppConfig) -> Result<Self, AppError> {
        let metrics = Arc::new(Metrics::new()?);
        let dry_run = match &config.dry_run {
            Some(settings) => Some(Arc::new(DryRun::new(settings, &metrics)?)),
            None => None,
        };
        let mut shared = Shared::new(
            clients.controller.clone(),
            Arc::clone(&metrics),
            &config.instance,
            dry_run.clone().map(|journal| journal as Arc<dyn Journal>),
        )
        .map_err(AppError::Shared)?;
        let controllers::Built {
            controllers,
            workloads,
            apis,
        } = controllers::build(&mut shared, &config).await?;
        let mut servers = tokio::task::JoinSet::new();
        let mut routes = pv::admin::routes(controllers.persistentvolume.clone());
        if let Some(journal) = &dry_run {
            dry_run::observe(&mut shared.informers, journal)
                .map_err(|error| AppError::Shared(error.into()))?;
            if let Some(binder) = &controllers.persistentvolume {
                journal.set_judge(dry_run::judge_binds_by(Arc::clone(binder)));
            }
            servers.spawn(Arc::clone(journal).sweep_periodically());
            routes = routes.merge(dry_run::route(Arc::clone(journal)));
            tracing::info!(
                "shadow mode: nothing is written, each decision is judged against the cluster"
            );
        }
        shared
            .metrics
            .register(Box::new(clients.requests.collector()?))?;
        shared.metrics.register(Box::new(
            crate::version::build_info().map_err(MetricsError::from)?,
        ))?;
        if let Some(process) = crate::version::process_collector() {
            shared.metrics.register(process)?;
        }
        let health = Health {
            readiness: Readiness::default(),
            liveness: Liveness::default(),
        };
        let admin = AdminState {
            metrics: Arc::clone(&shared.metrics),
            health: health.clone(),
            routes,
        };
        let secure_address = match &config.secure {
            Some(secure) => {
                let server =
                    SecureServer::listen(secure, clients.reviews.clone(), admin.clone()).await?;
                let address = server.local_addr();
                servers.spawn(server.serve());
                tracing::info!(v = 0, address = ?address, "serving the admin endpoints over HTTPS, delegating authentication and authorization");
                address
            }
            None => None,
        };
        let insecure_address = match config.insecure_address {
            Some(address) => {
                let listener = server::listen(address).await?;
                let bound = listener.local_addr().unwrap_or(address);
                servers.spawn(server::serve_insecure(listener, admin.clone()));
                tracing::info!(v = 0, address = %bound, "serving the admin endpoints over plain HTTP without authentication");
                Some(bound)
            }
            None => None,
        };
        let runner = Runner::new(RunnerParts {
            client: shared.client,
            watch_failure_limit: config.watch_failure_limit,
            informers: shared.informers,
            workloads,
            leading: shared.leading,
            recorder: shared.recorder,
            metrics: Arc::clone(&metrics),
            readiness: health.readiness.clone(),
            liveness: health.liveness.clone(),
            report_leader: dry_run.is_none(),
        });
        Ok(Self {
            idle: runner.idle_probe(),
            runner,
            #[cfg(feature = "testing")]
            controllers,
            #[cfg(feature = "testing")]
            metrics,
            clients,
            election: if config.dry_run.is_some() {
                None
            } else {
                config.election
            },
            dry_run,
            insecure_address,
            secure_address,
            #[cfg(feature = "testing")]
            health,
            servers,
            apis,
        })
    }

    /// The controllers that run, for callers that sync objects themselves.
    #[cfg(feature = "testing")]
    pub fn controllers(&self) -> &controllers::Controllers {
        &self.controllers
    }

    /// Starts the watches and waits until every kind's first list is in
    /// its store, without leading: for callers that sync objects
    /// themselves. [`App::run`] goes on from there.
    #[cfg(feature = "testing")]
    pub async fn start_informers(&mut self) -> Result<(), AppError> {
        Ok(self.runner.sync_caches().await?)
    }

    /// Where the admin endpoints are served over plain HTTP, if they are.
    pub fn insecure_address(&self) -> Option<SocketAddr> {
        self.insecure_address
    }

    /// The dry run's judgements, when the process runs dry (`--shadow`).
    pub fn dry_run_journal(&self) -> Option<DryRunJournal> {
        self.dry_run.clone().map(DryRunJournal)
    }

    /// Where the secure admin port listens, if there is one.
    pub fn secure_address(&self) -> Option<SocketAddr> {
        self.secure_address
    }

    /// The process's metrics registry (what `/metrics` serves).
    #[cfg(feature = "testing")]
    pub fn metrics(&self) -> Arc<crate::runtime::metrics::Metrics> {
        Arc::clone(&self.metrics)
    }

    /// Tells whether every controller has nothing left to do.
    pub fn idle_probe(&self) -> IdleProbe {
        self.idle.clone()
    }

    /// What `/readyz` and `/livez` report, as handles that stay valid
    /// while the process runs.
    #[cfg(feature = "testing")]
    pub fn health(&self) -> Health {
        self.health.clone()
    }

    /// Runs the controllers (elected when configured, on the lease's own
    /// client) until `shutdown` resolves or one of them fails, then stops
    /// the admin server. Without election the write gate opens for good.
    pub async fn run(mut self, shutdown: impl Future<Output = ()>) -> Result<(), AppError> {
        // A dry run sends nothing: the gate stays shut as a second guard.
        if self.election.is_none() && self.dry_run.is_none() {
            self.clients.gate.open();
        }
        let elector = self
            .election
            .map(|lease| LeaderElector::new(self.clients.lease, lease, self.clients.gate));
        let result = self.runner.run(elector, shutdown).await;
        self.servers.abort_all();
        // The admin ports are free again once this returns.
        while self.servers.join_next().await.is_some() {}
        Ok(result?)
    }
}

/// Runs the process (as [`App::start`] and [`App::run`]) until `shutdown`
/// resolves or the controllers fail; whenever an API an enabled controller
/// needs appears or goes (discovery asked every
/// [`AppConfig::api_discovery_period`]), stops the controllers gracefully
/// (the Lease released) and builds the process again, so that controller
/// starts (or stops) without a restart of the process. Each build starts
/// with fresh watches, stores and metrics, as a restart would.
pub async fn serve(
    clients: Clients,
    config: AppConfig,
    shutdown: impl Future<Output = ()>,
) -> Result<(), AppError> {
    let mut shutdown = pin!(shutdown);
    loop {
        let app = App::start(clients.clone(), config.clone()).await?;
        let apis = app.apis.clone();
        let rebuild = AtomicBool::new(false);
        let stop = async {
            tokio::select! {
                () = &mut shutdown => {}
                () = apis::changed(&clients.controller, &apis, config.api_discovery_period) => {
                    rebuild.store(true, Ordering::Relaxed);
                }
            }
        };
        app.run(stop).await?;
        if !rebuild.load(Ordering::Relaxed) {
            return Ok(());
        }
        tracing::info!("building the controllers again");
    }
}
