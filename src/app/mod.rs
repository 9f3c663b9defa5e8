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
use std::time::Duration;

use crate::runtime::client::Clients;
use crate::runtime::leader::{LeaderElector, LeaseConfig};
use crate::runtime::metrics::{Metrics, MetricsError};
use crate::runtime::runner::{RunError, Runner, RunnerParts};
use crate::runtime::server::secure::SecureServer;
use crate::runtime::server::{
    self, AdminState, Health, ListenError, Liveness, Readiness, SecureServing,
};
use crate::runtime::shared::{BuildError, Shared};
use crate::runtime::supervisor::{Supervised, TaskStopped};
use crate::runtime::workload::IdleProbe;
use crate::shadow::{self, Comparison, ShadowConfig, ShadowReport};
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
    /// Objects per page of the informers' lists (client-go's 500 by
    /// default); a page whose continue token expired starts the list
    /// again.
    pub list_page_size: u32,
    /// Where to serve `/metrics` and the health checks (nothing else) over
    /// plain HTTP without authentication (port 0: any free port), within
    /// the secure port's connection limits, if at all
    /// (`--metrics-bind-address`).
    pub insecure_address: Option<SocketAddr>,
    /// The secure admin port (HTTPS, delegated authentication and
    /// authorization), if any.
    pub secure: Option<SecureServing>,
    /// The Lease to compete for; `None` runs without election. Shadow mode
    /// takes no Lease whatever this says.
    pub election: Option<LeaseConfig>,
    /// Shadow mode (`--shadow`): the controllers decide but send nothing,
    /// and each decision is judged against what the cluster comes to.
    pub shadow: Option<ShadowConfig>,
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
            list_page_size: crate::runtime::informer::LIST_PAGE_SIZE,
            insecure_address: Some(([127, 0, 0, 1], 0).into()),
            secure: None,
            election: None,
            shadow: None,
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
    /// A setting has a value that cannot work.
    #[error("{setting} is {value:?}: {reason}")]
    Setting {
        /// The setting, as [`AppConfig`] names it.
        setting: &'static str,
        /// Its value.
        value: Duration,
        /// What it must be instead.
        reason: &'static str,
    },
    /// A task the process needs besides the controllers (an admin server,
    /// the event sender) ended.
    #[error(transparent)]
    TaskStopped(#[from] TaskStopped),
}

impl AppConfig {
    /// Refuses a value no controller can work with: a period of zero
    /// would make its periodic task spin (a resync, or discovery asked
    /// without pause), so it is refused before anything starts.
    pub fn check(&self) -> Result<(), AppError> {
        let periods = [
            (
                "persistentvolume.resync_period",
                self.persistentvolume.resync_period,
            ),
            ("api_discovery_period", self.api_discovery_period),
            ("watch_failure_limit", self.watch_failure_limit),
        ];
        for (setting, value) in periods {
            if value.is_zero() {
                return Err(AppError::Setting {
                    setting,
                    value,
                    reason: "must be more than zero",
                });
            }
        }
        Ok(())
    }
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
    #[cfg(feature = "testing")]
    recorder: crate::runtime::events::EventRecorder,
    clients: Clients,
    election: Option<LeaseConfig>,
    shadow: Option<Arc<Comparison>>,
    insecure_address: Option<SocketAddr>,
    secure_address: Option<SocketAddr>,
    #[cfg(feature = "testing")]
    health: Health,
    /// The admin servers, the dry run's sweep and the event sender's
    /// watch: their end stops the process with an error.
    servers: Supervised,
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
        config.check()?;
        let metrics = Arc::new(Metrics::new()?);
        let shadow = match &config.shadow {
            Some(settings) => Some(Arc::new(Comparison::new(settings, &metrics)?)),
            None => None,
        };
        let mut shared = Shared::new(
            clients.controller.clone(),
            Arc::clone(&metrics),
            &config.instance,
            shadow
                .clone()
                .map(|comparison| comparison as Arc<dyn crate::runtime::shadow::Shadow>),
        )
        .map_err(AppError::Shared)?;
        let controllers::Built {
            controllers,
            workloads,
            apis,
        } = controllers::build(&mut shared, &config).await?;
        let mut servers = Supervised::default();
        let recorder = shared.recorder.clone();
        servers.spawn(
            "event sender",
            async move { recorder.sender_stopped().await },
        );
        let mut routes = pv::admin_routes(controllers.persistentvolume.clone());
        if let Some(comparison) = &shadow {
            shadow::observe(&mut shared.informers, comparison)
                .map_err(|error| AppError::Shared(error.into()))?;
            if let Some(binder) = &controllers.persistentvolume {
                comparison.set_judge(shadow::judge_binds_by(binder.binder()));
            }
            servers.spawn(
                "shadow mode's sweep",
                Arc::clone(comparison).sweep_periodically(),
            );
            routes = routes.merge(shadow::route(Arc::clone(comparison)));
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
                servers.spawn("secure admin server", server.serve());
                tracing::info!(v = 0, address = ?address, "serving the admin endpoints over HTTPS, delegating authentication and authorization");
                address
            }
            None => None,
        };
        let insecure_address = match config.insecure_address {
            Some(address) => {
                let listener = server::listen(address).await?;
                let bound = listener.local_addr().unwrap_or(address);
                servers.spawn(
                    "insecure admin server",
                    server::serve_insecure(
                        listener,
                        admin.clone(),
                        config
                            .secure
                            .as_ref()
                            .map(|secure| secure.limits)
                            .unwrap_or_default(),
                    ),
                );
                tracing::info!(v = 0, address = %bound, "serving /metrics and the health checks over plain HTTP without authentication");
                Some(bound)
            }
            None => None,
        };
        #[cfg(feature = "testing")]
        let recorder = shared.recorder.clone();
        let runner = Runner::new(RunnerParts {
            client: shared.client,
            watch_settings: crate::runtime::informer::WatchSettings {
                failure_limit: config.watch_failure_limit,
                list_page_size: config.list_page_size,
            },
            informers: shared.informers,
            workloads,
            leading: shared.leading,
            recorder: shared.recorder,
            metrics: Arc::clone(&metrics),
            readiness: health.readiness.clone(),
            liveness: health.liveness.clone(),
            report_leader: shadow.is_none(),
        });
        Ok(Self {
            idle: runner.idle_probe(),
            runner,
            #[cfg(feature = "testing")]
            controllers,
            #[cfg(feature = "testing")]
            metrics,
            #[cfg(feature = "testing")]
            recorder,
            clients,
            election: if config.shadow.is_some() {
                None
            } else {
                config.election
            },
            shadow,
            insecure_address,
            secure_address,
            #[cfg(feature = "testing")]
            health,
            servers,
            apis,
        })
    }

    /// The process's one event recorder, to wait until what the
    /// controllers recorded is written.
    #[cfg(feature = "testing")]
    pub fn recorder(&self) -> crate::runtime::events::EventRecorder {
        self.recorder.clone()
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

    /// Shadow mode's judgements, when the process runs dry (`--shadow`).
    pub fn shadow_report(&self) -> Option<ShadowReport> {
        self.shadow.clone().map(ShadowReport)
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
    /// An admin server or the event sender that ends stops the controllers
    /// (gracefully: the Lease is released) and is returned as an error.
    pub async fn run(self, shutdown: impl Future<Output = ()>) -> Result<(), AppError> {
        let Self {
            runner,
            clients,
            election,
            shadow,
            mut servers,
            ..
        } = self;
        // Shadow mode sends nothing: the gate stays shut as a second guard.
        if election.is_none() && shadow.is_none() {
            clients.gate.open();
        }
        let elector = election.map(|lease| LeaderElector::new(clients.lease, lease, clients.gate));
        let mut stopped = None;
        let stop = async {
            tokio::select! {
                biased;
                () = shutdown => {}
                ended = servers.stopped() => stopped = Some(ended),
            }
        };
        let result = runner.run(elector, stop).await;
        // The admin ports are free again once this returns.
        servers.stop_all().await;
        result?;
        match stopped {
            Some(ended) => {
                tracing::error!(error = %ended, "stopping the process");
                Err(ended.into())
            }
            None => Ok(()),
        }
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
    config.check()?;
    let mut shutdown = pin!(shutdown);
    loop {
        let app = App::start(clients.clone(), config.clone()).await?;
        let apis = app.apis.clone();
        let mut change = None;
        let stop = async {
            tokio::select! {
                biased;
                () = &mut shutdown => {}
                changed = apis::changed(&clients.controller, &apis, config.api_discovery_period) => {
                    change = Some(changed);
                }
            }
        };
        // The process's future is large: kept on the heap, not on this
        // loop's stack.
        Box::pin(app.run(stop)).await?;
        match change {
            None => return Ok(()),
            Some(Ok(())) => {}
            Some(Err(apis::ZeroPeriod)) => {
                return Err(AppError::Setting {
                    setting: "api_discovery_period",
                    value: config.api_discovery_period,
                    reason: "must be more than zero",
                });
            }
        }
        tracing::info!("building the controllers again");
    }
}
