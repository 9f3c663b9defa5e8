//! The controller replicas of a chaos run: production wiring (gated,
//! time-limited client; the lease's own client; leader election), started,
//! crashed and stopped at the schedule's will.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

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

use super::faults::REQUEST_TIMEOUT;
use super::sent::{LEASE, Recorded, SentLog};
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
    /// Starts a replica that competes for the lease, its informers
    /// listing in pages of `list_page_size`, its clients' requests
    /// recorded in `sent`.
    pub(crate) fn start(
        api: &MemApi,
        identity: String,
        storage: &Arc<ChaosPlugin>,
        list_page_size: u32,
        sent: &SentLog,
    ) -> Self {
        let client = |role: &str| {
            let recorded = Recorded::new(api.service(), sent, format!("{identity} {role}"), api);
            ClientBuilder::new(recorded, "default")
        };
        let clients = Clients::build(
            client("controller"),
            client(LEASE),
            client("reviews"),
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
            list_page_size,
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

    /// Where the replica's store of volumes and claims disagrees with the
    /// server's `volumes` and `claims`: an object held at another
    /// resourceVersion, held though gone, or not held. Nothing until the
    /// replica's controller is built.
    pub(crate) fn store_differences(
        &self,
        volumes: &[PersistentVolume],
        claims: &[PersistentVolumeClaim],
    ) -> Vec<String> {
        let Some(controller) = self.controller.get() else {
            return Vec::new();
        };
        let store = controller.store();
        let held_volumes = versions(store.volumes().map(|v| v.metadata.clone()));
        let held_claims = versions(
            store
                .claims_of(store.claim_keys())
                .map(|c| c.metadata.clone()),
        );
        let mut found = differences(
            &self.identity,
            "volume",
            &versions(volumes.iter().map(|v| v.metadata.clone())),
            &held_volumes,
        );
        found.extend(differences(
            &self.identity,
            "claim",
            &versions(claims.iter().map(|c| c.metadata.clone())),
            &held_claims,
        ));
        found
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

/// The resourceVersion of each object, by `namespace/name` (`name` for a
/// volume).
fn versions(objects: impl Iterator<Item = ObjectMeta>) -> BTreeMap<String, String> {
    objects
        .map(|meta| {
            let name = meta.name.unwrap_or_default();
            let key = match meta.namespace {
                Some(namespace) => format!("{namespace}/{name}"),
                None => name,
            };
            (key, meta.resource_version.unwrap_or_default())
        })
        .collect()
}

/// How `identity`'s store (`held`) differs from the server (`server`) for
/// one kind.
fn differences(
    identity: &str,
    kind: &str,
    server: &BTreeMap<String, String>,
    held: &BTreeMap<String, String>,
) -> Vec<String> {
    let keys: BTreeSet<&String> = server.keys().chain(held.keys()).collect();
    keys.into_iter()
        .filter_map(|key| match (server.get(key), held.get(key)) {
            (Some(at), Some(kept)) if at == kept => None,
            (Some(at), Some(kept)) => Some(format!(
                "{identity}'s store holds {kind} {key} at resourceVersion {kept}, the server at {at}"
            )),
            (Some(at), None) => Some(format!(
                "{identity}'s store misses {kind} {key} (resourceVersion {at})"
            )),
            (None, Some(kept)) => Some(format!(
                "{identity}'s store holds {kind} {key} (resourceVersion {kept}), which is gone"
            )),
            (None, None) => None,
        })
        .collect()
}
