//! The controller replicas of a chaos run: production wiring (gated,
//! time-limited client; the lease's own client; leader election), started,
//! crashed and stopped at the schedule's will.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use kube::client::ClientBuilder;
use memapi::MemApi;
use pv_controller::pv::{
    self, Controller, PluginConfig, RecyclerPodConfig, Settings, VolumePlugins,
    default_recycler_template,
};
use pv_controller::{
    App, AppConfig, AppError, ClientOptions, Clients, ControllerSelection, LeaseConfig, WriteGate,
};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use super::faults::{LIST_PAGE_SIZE, REQUEST_TIMEOUT};
use super::world::{ChaosPlugin, Shared};

/// One running replica.
pub(crate) struct Replica {
    pub(crate) identity: String,
    /// The replica's controller, once its process is built.
    controller: Arc<OnceLock<Arc<Controller>>>,
    gate: WriteGate,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<Result<(), AppError>>,
}

/// The plugins of every replica: the real hostPath recycler (pods the
/// test's kubelet runs) and the chaos storage backend.
pub(crate) fn plugins(storage: &Arc<ChaosPlugin>) -> VolumePlugins {
    let recycler = RecyclerPodConfig {
        template: default_recycler_template(),
        minimum_timeout: 60,
        timeout_increment: 30,
    };
    let config = PluginConfig {
        enable_host_path_provisioner: false,
        host_path_root: "/chaos-provisioned".into(),
        host_path_recycler: recycler.clone(),
        nfs_recycler: recycler,
    };
    VolumePlugins::from_config(&config).with(Arc::new(Shared(Arc::clone(storage))))
}

impl Replica {
    /// Starts a replica that competes for the lease.
    pub(crate) fn start(api: &MemApi, identity: String, storage: &Arc<ChaosPlugin>) -> Self {
        let clients = Clients::build(
            ClientBuilder::new(api.service(), "default"),
            ClientBuilder::new(api.service(), "default"),
            ClientBuilder::new(api.service(), "default"),
            ClientOptions {
                request_timeout: REQUEST_TIMEOUT,
                ..ClientOptions::default()
            },
        );
        let config = AppConfig {
            controllers: ControllerSelection::new([
                k8s_names::PERSISTENTVOLUME_BINDER_CONTROLLER,
                k8s_names::RESOURCE_CLAIM_CONTROLLER,
            ]),
            instance: identity.clone(),
            list_page_size: LIST_PAGE_SIZE,
            election: Some(LeaseConfig::new("kube-system", "pv-controller", &identity)),
            persistentvolume: pv::Config {
                settings: Settings {
                    plugins: plugins(storage),
                    ..Settings::default()
                },
                ..pv::Config::default()
            },
            ..AppConfig::default()
        };
        let controller = Arc::new(OnceLock::new());
        let built = Arc::clone(&controller);
        let gate = clients.gate.clone();
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let app = App::start(clients, config).await?;
            if let Some(controller) = &app.controllers().persistentvolume {
                let _ = built.set(Arc::clone(controller));
            }
            app.run(async move {
                let _ = stopped.await;
            })
            .await
        });
        Self {
            identity,
            controller,
            gate,
            stop: Some(stop),
            task,
        }
    }

    /// Whether the replica stopped by itself (lost its lease, gave up on a
    /// watch): its process would exit and be restarted.
    pub(crate) fn exited(&self) -> bool {
        self.task.is_finished()
    }

    /// Kills the replica where it stands, as a crashed process: nothing
    /// more runs and nothing more is written, the lease is not released.
    pub(crate) fn crash(self) {
        self.task.abort();
        self.abort_operations();
        self.gate.close();
    }

    /// Cancels the long operations of the replica's controller, which run
    /// outside its process's task.
    fn abort_operations(&self) {
        if let Some(controller) = self.controller.get() {
            controller.operations().abort_all();
        }
    }

    /// Stops the replica as SIGTERM does: it finishes, flushes its events
    /// and releases the lease.
    pub(crate) async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if tokio::time::timeout(Duration::from_secs(60), &mut self.task)
            .await
            .is_err()
        {
            self.task.abort();
        }
        self.abort_operations();
        self.gate.close();
    }
}
