//! The process on memapi, as every controller's tests run it: one way to
//! build it (its clients, which controllers), to call its syncs directly
//! with nothing running, to run it until it settles, to stop it, and to
//! read what it wrote (its events, its counters).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::resource::v1::ResourceClaim;
use kube::client::ClientBuilder;
use memapi::MemApi;
use pv_controller::testing::{EventRecorder, LeaderElector};
use pv_controller::{
    App, AppConfig, AppError, ClientOptions, Clients, ControllerSelection, IdleProbe, LeaseConfig,
    Metrics, WriteGate, pv,
};

/// How long the objects must stay as they are, with the process idle,
/// before a run counts as settled. Above two resync periods, so a resync
/// that still had something to do shows.
pub(crate) const SETTLE_QUIET: Duration = Duration::from_secs(20);

/// The longest a test waits for the process to settle. A row whose sync
/// fails on every retry keeps its key queued and never settles; it is
/// checked after this long instead.
pub(crate) const SETTLE_LIMIT: Duration = Duration::from_secs(1000);

/// The clients of a process on `api`: straight on the server, with no
/// rate limit (the write gate opens when the process runs unelected).
pub(crate) fn clients(api: &MemApi) -> Clients {
    Clients::build(
        ClientBuilder::new(api.service(), "default"),
        ClientBuilder::new(api.service(), "default"),
        ClientBuilder::new(api.service(), "default"),
        ClientOptions::default(),
    )
}

/// The clients of a process whose syncs a test calls directly, without
/// running it: the write gate open from the start.
pub(crate) fn direct_clients(api: &MemApi) -> Clients {
    let clients = clients(api);
    clients.gate.open();
    clients
}

/// The process configuration with the controllers of `controllers` (the
/// `--controllers` syntax) and a 5 s resync of the PersistentVolume
/// controller.
pub(crate) fn controllers(controllers: &str) -> AppConfig {
    AppConfig {
        controllers: ControllerSelection::new(controllers.split(',')),
        persistentvolume: pv::Config {
            resync_period: Duration::from_secs(5),
            ..pv::Config::default()
        },
        ..AppConfig::default()
    }
}

/// The process configuration that runs the PersistentVolume controller
/// alone, with `config`.
pub(crate) fn binder_only(config: pv::Config) -> AppConfig {
    AppConfig {
        persistentvolume: config,
        ..controllers(k8s_names::PERSISTENTVOLUME_BINDER_CONTROLLER)
    }
}

/// The process on `api` with `config`, its stores filled and nothing
/// running: for syncs called directly.
pub(crate) async fn direct(api: &MemApi, config: AppConfig) -> Result<App, AppError> {
    let mut app = App::start(direct_clients(api), config).await?;
    app.start_informers().await?;
    Ok(app)
}

/// The PersistentVolume controller alone on `api`, built with `config`, its
/// stores filled and nothing running: for syncs called directly. The
/// process must be kept while the controller is used.
pub(crate) async fn direct_binder(
    api: &MemApi,
    config: pv::Config,
) -> Result<(App, Arc<pv::Controller>), AppError> {
    let app = direct(api, binder_only(config)).await?;
    let controller = app
        .controllers()
        .persistentvolume
        .clone()
        .expect("the PersistentVolume controller is built");
    Ok((app, controller))
}

/// Waits (in paused time) until the process settled: nothing it watches
/// changed (volumes, claims, pods, ResourceClaims; events and Leases aside)
/// and it had nothing to do for [`SETTLE_QUIET`], at most
/// [`SETTLE_LIMIT`]. Running into the limit is not a failure in itself:
/// the row's expectations then tell whether the process got where it
/// should.
pub(crate) async fn settle(api: &MemApi, idle: &IdleProbe) {
    let wait = async {
        let mut written = api.resource_version();
        let mut last = fingerprint(api);
        let mut quiet_since = tokio::time::Instant::now();
        loop {
            tokio::time::sleep(Duration::from_millis(100)).await;
            let mut changed = false;
            if api.resource_version() != written {
                written = api.resource_version();
                let now = fingerprint(api);
                changed = now != last;
                last = now;
            }
            if changed || !idle.is_idle() {
                quiet_since = tokio::time::Instant::now();
            } else if quiet_since.elapsed() >= SETTLE_QUIET {
                return;
            }
        }
    };
    let _ = tokio::time::timeout(SETTLE_LIMIT, wait).await;
}

/// The resourceVersion of every object the controllers keep, by kind and
/// name.
fn fingerprint(api: &MemApi) -> Vec<(&'static str, String, Option<String>)> {
    fn versions<K: kube::Resource<DynamicType = ()> + serde::de::DeserializeOwned>(
        api: &MemApi,
        kind: &'static str,
    ) -> impl Iterator<Item = (&'static str, String, Option<String>)> {
        api.list::<K>().into_iter().map(move |object| {
            let meta = object.meta();
            (
                kind,
                format!(
                    "{}/{}",
                    meta.namespace.as_deref().unwrap_or_default(),
                    meta.name.as_deref().unwrap_or_default()
                ),
                meta.resource_version.clone(),
            )
        })
    }
    versions::<PersistentVolume>(api, "pv")
        .chain(versions::<PersistentVolumeClaim>(api, "pvc"))
        .chain(versions::<Pod>(api, "pod"))
        .chain(versions::<ResourceClaim>(api, "resourceclaim"))
        .collect()
}

/// The process running on memapi, for tests that change the cluster while
/// it runs.
pub(crate) struct Running {
    api: MemApi,
    idle: IdleProbe,
    events: EventRecorder,
    persistentvolume: Option<Arc<pv::Controller>>,
    /// The process's registry.
    pub(crate) metrics: Arc<Metrics>,
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<Result<(), AppError>>,
    other_holder: Option<tokio::task::JoinHandle<()>>,
}

impl Running {
    /// The PersistentVolume controller alone on `api`, with the default
    /// 15 s resync.
    pub(crate) async fn binder(api: &MemApi) -> Self {
        Self::start(api, binder_only(pv::Config::default())).await
    }

    /// The PersistentVolume controller alone on `api`, with `config`.
    pub(crate) async fn binder_with(api: &MemApi, config: pv::Config) -> Self {
        Self::start(api, binder_only(config)).await
    }

    /// The process on `api` with `config`: the production wiring.
    pub(crate) async fn start(api: &MemApi, config: AppConfig) -> Self {
        Self::try_start(api, config)
            .await
            .expect("the process starts")
    }

    /// The process on `api` with `config`, or why it does not start.
    pub(crate) async fn try_start(api: &MemApi, config: AppConfig) -> Result<Self, AppError> {
        Self::run(api, config, None).await
    }

    /// The process on `api` with `config`, elected on the Lease
    /// `kube-system/pv-controller` that another replica holds until
    /// `released` resolves (then it gives the Lease up).
    pub(crate) async fn elected_after(
        api: &MemApi,
        config: AppConfig,
        released: impl Future<Output = bool> + Send + 'static,
    ) -> Self {
        let mut other = LeaderElector::new(
            api.client(),
            LeaseConfig::new("kube-system", "pv-controller", "other"),
            WriteGate::default(),
        );
        assert!(
            other
                .try_acquire_or_renew()
                .await
                .expect("the other holds the Lease")
        );
        let holder = tokio::spawn(async move {
            tokio::select! {
                _ = released => {}
                () = other.hold() => {}
            }
            let _ = other.release().await;
        });
        let config = AppConfig {
            election: Some(LeaseConfig::new("kube-system", "pv-controller", "test")),
            ..config
        };
        Self::run(api, config, Some(holder))
            .await
            .expect("the process starts")
    }

    async fn run(
        api: &MemApi,
        config: AppConfig,
        other_holder: Option<tokio::task::JoinHandle<()>>,
    ) -> Result<Self, AppError> {
        let app = App::start(clients(api), config).await?;
        let (idle, metrics, events) = (app.idle_probe(), app.metrics(), app.recorder());
        let persistentvolume = app.controllers().persistentvolume.clone();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(app.run(async move {
            let _ = stopped.await;
        }));
        Ok(Self {
            api: api.clone(),
            idle,
            events,
            persistentvolume,
            metrics,
            stop,
            task,
            other_holder,
        })
    }

    /// The running PersistentVolume controller's decisions and their
    /// state (its store).
    pub(crate) fn controller(&self) -> &pv::Controller {
        self.persistentvolume
            .as_deref()
            .expect("the PersistentVolume controller runs")
    }

    /// Whether the process has nothing queued, being synced or waiting for
    /// a retry now (claims waiting for a volume count as idle).
    pub(crate) fn is_idle(&self) -> bool {
        self.idle.is_idle()
    }

    /// Waits until the process has nothing left to do and every event it
    /// recorded is written.
    pub(crate) async fn settle(&self) {
        settle(&self.api, &self.idle).await;
        self.events.flush().await;
    }

    /// Waits (paused time, at most ten minutes) until an event starting with
    /// `wanted` is recorded, and returns the events then. An object the
    /// controller has reported on at every resync has spent its burst of 25
    /// events, and the spam filter (upstream's) then lets one more through
    /// every five minutes: a new event about it can lag that far behind the
    /// sync that raised it, well past [`Running::settle`].
    pub(crate) async fn wait_for_event(&self, wanted: &str) -> Vec<String> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(600);
        loop {
            self.events.flush().await;
            let events = events_of(&self.api, None);
            if events.iter().any(|e| e.starts_with(wanted))
                || tokio::time::Instant::now() >= deadline
            {
                return events;
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }

    /// Stops the process, checks it stopped cleanly, and waits for its last
    /// events to be written.
    pub(crate) async fn stop(self) {
        let _ = self.stop.send(());
        match self.task.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => panic!("the process failed: {e}"),
            Err(e) => panic!("the process task failed: {e}"),
        }
        self.events.flush().await;
        if let Some(holder) = self.other_holder {
            holder.abort();
        }
    }
}

/// Runs the process with `config` on `api`, without election, until
/// settled; stops it and returns its metrics.
pub(crate) async fn run_settled(api: &MemApi, config: AppConfig) -> Arc<Metrics> {
    let running = Running::start(api, config).await;
    running.settle().await;
    let metrics = Arc::clone(&running.metrics);
    running.stop().await;
    metrics
}

/// The events written so far, oldest first, as "Type Reason message"; of
/// the controller whose events carry the source `component` when given.
pub(crate) fn events_of(api: &MemApi, component: Option<&str>) -> Vec<String> {
    let mut events: Vec<Event> = api
        .list::<Event>()
        .into_iter()
        .filter(|e| {
            component.is_none_or(|component| {
                e.source.as_ref().and_then(|s| s.component.as_deref()) == Some(component)
            })
        })
        .collect();
    events.sort_by_key(|e| e.metadata.name.clone());
    events
        .iter()
        .map(|e| {
            format!(
                "{} {} {}",
                e.type_.as_deref().unwrap_or_default(),
                e.reason.as_deref().unwrap_or_default(),
                e.message.as_deref().unwrap_or_default()
            )
        })
        .collect()
}

/// The value of the series `name` (a name, or a name and its labels as
/// the scrape shows them) in `metrics`.
pub(crate) fn value(metrics: &Metrics, name: &str) -> f64 {
    let text = metrics.render().expect("metrics render");
    text.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(' '))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or_else(|| panic!("no series {name} in\n{text}"))
}

/// The sum of the series `name` whose labels include every pair of
/// `labels` in `metrics`.
pub(crate) fn summed(metrics: &Metrics, name: &str, labels: &[(&str, &str)]) -> u64 {
    let text = metrics.render().expect("metrics render");
    let wanted: Vec<String> = labels.iter().map(|(k, v)| format!("{k}=\"{v}\"")).collect();
    let total: f64 = text
        .lines()
        .filter_map(|line| line.strip_prefix(name)?.strip_prefix('{')?.split_once("} "))
        .filter(|(set, _)| {
            let set: Vec<&str> = set.split(',').collect();
            wanted.iter().all(|pair| set.contains(&pair.as_str()))
        })
        .map(|(_, value)| value.trim().parse::<f64>().expect("a count"))
        .sum();
    total as u64
}

/// The value of the series `name` with exactly the labels `labels` in
/// `metrics`; 0 when there is none (a labelled series appears only once
/// counted).
pub(crate) fn labelled(metrics: &Metrics, name: &str, labels: &[(&str, &str)]) -> f64 {
    let text = metrics.render().expect("metrics render");
    let wanted: Vec<String> = labels.iter().map(|(k, v)| format!("{k}=\"{v}\"")).collect();
    text.lines()
        .filter_map(|line| line.strip_prefix(name)?.strip_prefix('{'))
        .filter_map(|line| line.split_once("} "))
        .find(|(set, _)| {
            let mut got: Vec<&str> = set.split(',').collect();
            got.sort_unstable();
            let mut want: Vec<&str> = wanted.iter().map(String::as_str).collect();
            want.sort_unstable();
            got == want
        })
        .and_then(|(_, value)| value.trim().parse().ok())
        .unwrap_or(0.0)
}
