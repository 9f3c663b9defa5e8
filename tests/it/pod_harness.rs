//! Support for pod-centred rows (the ephemeral volume and ResourceClaim
//! controllers): the process's [`App`] run on memapi with some of its
//! controllers until settled, or built with them for a direct sync; the
//! events a controller wrote, and its counters.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Event;
use memapi::MemApi;
use pv_controller::testing::wait_settled;
use pv_controller::{
    App, AppConfig, AppError, ControllerSelection, IdleProbe, LeaseConfig, Metrics, pv,
};

use crate::harness::{SETTLE_LIMIT, SETTLE_QUIET, clients, direct_clients};

/// The process with the controllers of `controllers` (the `--controllers`
/// syntax) on `api`, its stores filled and nothing running: for syncs
/// called directly.
pub(crate) async fn direct(api: &MemApi, controllers: &str) -> App {
    let mut app = App::start(direct_clients(api), config(controllers, None))
        .await
        .expect("the process starts");
    app.start_informers().await.expect("the stores fill");
    app
}

/// Waits (in paused time) until the controllers behind `idle` settled:
/// the embedded mode's [`wait_settled`], for at most [`SETTLE_LIMIT`] (a
/// row whose sync fails on every retry never settles; its expectations
/// are checked after the limit).
pub(crate) async fn settle(api: &MemApi, idle: &IdleProbe) {
    let _ = tokio::time::timeout(SETTLE_LIMIT, wait_settled(api, idle, SETTLE_QUIET)).await;
}

/// The process configuration with the controllers of `controllers`, a
/// 5 s resync, elected on `election` when given.
fn config(controllers: &str, election: Option<LeaseConfig>) -> AppConfig {
    AppConfig {
        controllers: ControllerSelection::new(controllers.split(',')),
        election,
        persistentvolume: pv::Config {
            resync_period: Duration::from_secs(5),
            ..pv::Config::default()
        },
        ..AppConfig::default()
    }
}

/// The process running on memapi with some of its controllers.
pub(crate) struct Running {
    api: MemApi,
    idle: IdleProbe,
    /// The process's registry.
    pub(crate) metrics: Arc<Metrics>,
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<Result<(), AppError>>,
}

impl Running {
    /// Starts the process with the controllers of `controllers` (the
    /// `--controllers` syntax) on `api`: the production wiring, elected on
    /// `election` when given.
    pub(crate) async fn start(
        api: &MemApi,
        controllers: &str,
        election: Option<LeaseConfig>,
    ) -> Result<Self, AppError> {
        let app = App::start(clients(api), config(controllers, election)).await?;
        let (idle, metrics) = (app.idle_probe(), app.metrics());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(app.run(async move {
            let _ = stopped.await;
        }));
        Ok(Self {
            api: api.clone(),
            idle,
            metrics,
            stop,
            task,
        })
    }

    /// Waits until the controllers settled (see [`settle`]).
    pub(crate) async fn settle(&self) {
        settle(&self.api, &self.idle).await;
    }

    /// Stops the process and checks it stopped cleanly.
    pub(crate) async fn stop(self) {
        let _ = self.stop.send(());
        self.task
            .await
            .expect("the process task")
            .expect("the process stops cleanly");
    }
}

/// Runs the process with the controllers of `controllers` on `api`,
/// without election, until settled; stops it and returns its metrics.
pub(crate) async fn run_settled(api: &MemApi, controllers: &str) -> Arc<Metrics> {
    let running = Running::start(api, controllers, None)
        .await
        .expect("the process starts");
    running.settle().await;
    let metrics = Arc::clone(&running.metrics);
    running.stop().await;
    metrics
}

/// The value of the counter or gauge `name` (without labels) in `metrics`.
pub(crate) fn value(metrics: &Metrics, name: &str) -> f64 {
    let text = metrics.render().expect("metrics render");
    text.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(' '))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or_else(|| panic!("no series {name} in\n{text}"))
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

/// The events `component` wrote, oldest first, as
/// `Type Reason kind/name: message (count)`.
pub(crate) fn events_of(api: &MemApi, component: &str) -> Vec<String> {
    let mut events: Vec<Event> = api
        .list::<Event>()
        .into_iter()
        .filter(|event| {
            event.source.as_ref().and_then(|s| s.component.as_deref()) == Some(component)
        })
        .collect();
    events.sort_by_key(|event| event.first_timestamp.clone().map(|t| t.0));
    events
        .iter()
        .map(|event| {
            format!(
                "{} {} {}/{}: {}",
                event.type_.as_deref().unwrap_or(""),
                event.reason.as_deref().unwrap_or(""),
                event
                    .involved_object
                    .kind
                    .as_deref()
                    .unwrap_or("")
                    .to_lowercase(),
                event.involved_object.name.as_deref().unwrap_or(""),
                event.message.as_deref().unwrap_or("")
            )
        })
        .collect()
}
