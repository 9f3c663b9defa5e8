//! The controller replicas of a chaos run: production wiring (gated,
//! time-limited client; the lease's own client; leader election), started,
//! crashed and stopped at the schedule's will.

use std::sync::Arc;
use std::time::Duration;

use kube::client::ClientBuilder;
use memapi::MemApi;
use pv_controller::{
    BaseConfig, BaseError, ClientOptions, Clients, Controller, ControllerBase, LeaderElector,
    LeaseConfig, PluginConfig, RecyclerPodConfig, Settings, VolumePlugins, WriteGate,
    default_recycler_template,
};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use super::faults::REQUEST_TIMEOUT;
use super::world::{ChaosPlugin, Shared};

/// One running replica.
pub(crate) struct Replica {
    pub(crate) identity: String,
    controller: Arc<Controller>,
    gate: WriteGate,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<Result<(), BaseError>>,
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
            ClientOptions {
                request_timeout: REQUEST_TIMEOUT,
                ..ClientOptions::default()
            },
        );
        let base = ControllerBase::new(
            clients.controller,
            BaseConfig {
                instance: identity.clone(),
                settings: Settings {
                    plugins: plugins(storage),
                    ..Settings::default()
                },
                ..BaseConfig::default()
            },
        )
        .expect("controller");
        let controller = Arc::clone(base.controller());
        let elector = LeaderElector::new(
            clients.lease,
            LeaseConfig::new("kube-system", "pv-controller", &identity),
            clients.gate.clone(),
        );
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(base.run_elected(elector, async move {
            let _ = stopped.await;
        }));
        Self {
            identity,
            controller,
            gate: clients.gate,
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
        self.controller.operations().abort_all();
        self.gate.close();
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
        self.controller.operations().abort_all();
        self.gate.close();
    }
}
