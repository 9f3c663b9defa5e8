//! Volume plugins: the code that touches storage itself, as opposed to the
//! controller, which only decides when. A plugin may provision storage for a
//! claim, delete a released volume's storage, or recycle (scrub) it.
//!
//! The controller holds a [`VolumePlugins`] registry and asks it, by plugin
//! name (a StorageClass's provisioner, a volume's `provisioned-by`) or by
//! volume source (a hostPath or NFS volume), for the plugin to use. Two real
//! plugins exist, [`host_path::HostPathPlugin`] and [`nfs::NfsPlugin`]; tests
//! add a mock, which is why the plugin interface is a trait.

pub(crate) mod host_path;
pub(crate) mod nfs;
pub(crate) mod recycler;

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim, Pod};
use kube::Client;

use crate::pv::constants::IN_TREE_PLUGIN_PREFIX;
use crate::pv::objects::{ReclaimPolicy, annotation};
use crate::runtime::events::EventType;
use crate::runtime::keys::ObjectKey;
use crate::runtime::write::WriteError;
use k8s_names::ANN_DYNAMICALLY_PROVISIONED;
use recycler::RecyclerPodConfig;

/// Why a plugin could not do what it was asked. The controller words its
/// events after the kind: upstream distinguishes a plugin that cannot even
/// be set up for a volume from one that tried and failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PluginError {
    /// The plugin cannot serve this request at all (upstream's
    /// `NewProvisioner` / `NewDeleter` / `NewRecycler` failing).
    #[error("{0}")]
    Setup(String),
    /// The plugin tried and failed.
    #[error("{0}")]
    Failed(String),
    /// The storage is still in use; deleting it must wait (upstream's
    /// `DeletedVolumeInUseError`), which is not a failure of the volume.
    #[error("{0}")]
    InUse(String),
}

/// What a provisioner needs to create storage for a claim.
#[derive(Clone, Debug)]
pub struct ProvisionRequest {
    /// Name the new volume must get (`pvc-<claim uid>`).
    pub pv_name: String,
    /// The claim the storage is for.
    pub claim: PersistentVolumeClaim,
    /// Reclaim policy of the claim's StorageClass (Delete when unset).
    pub reclaim_policy: ReclaimPolicy,
    /// The StorageClass's parameters, opaque to the controller.
    pub parameters: BTreeMap<String, String>,
    /// The StorageClass's mount options.
    pub mount_options: Vec<String>,
    /// The node the scheduler picked, for WaitForFirstConsumer claims.
    pub selected_node: Option<Arc<Node>>,
}

/// What a recycle writes and records: its pod created and deleted, the
/// pod's UID recorded on the volume (the proof that a pod of that name
/// found later is its own, which nobody who may only create pods can
/// forge), and the pod's events relayed onto the volume, so `kubectl
/// describe pv` shows the scrub's progress. The binder carries each out as
/// a plan on its executor, through the process's write door: counted with
/// the controller's writes, seen at once by the process's stores, and each
/// write conditional on the copy the recycle read.
pub trait RecycleWrites: Send + Sync {
    /// Creates `pod`; returns the pod as the server made it (with its UID).
    fn create_pod<'a>(&'a self, pod: &'a Pod) -> BoxFuture<'a, Result<Arc<Pod>, WriteError>>;

    /// Deletes the pod `key` (already gone counts as deleted), only the
    /// incarnation `uid` names when given.
    fn delete_pod<'a>(
        &'a self,
        key: &'a ObjectKey,
        uid: Option<&'a str>,
    ) -> BoxFuture<'a, Result<(), WriteError>>;

    /// Sets the annotation `key` to `value` on the volume recycled, unless
    /// it was bound to another claim since (then the write is refused).
    fn record_on_volume<'a>(
        &'a self,
        key: &'a str,
        value: &'a str,
    ) -> BoxFuture<'a, Result<(), WriteError>>;

    /// Records a recycler pod's event on the volume as `RecyclerPod`.
    fn relay<'a>(&'a self, event_type: EventType, message: &'a str) -> BoxFuture<'a, ()>;
}

/// What a recycler needs besides the volume: a client to watch its pod and
/// the pod's events with, and what it writes and records through
/// ([`RecycleWrites`]).
#[derive(Clone)]
pub struct RecycleContext {
    /// Client for reading the recycler pod and its events.
    pub client: Client,
    /// Its writes and events.
    pub writes: Arc<dyn RecycleWrites>,
}

impl fmt::Debug for RecycleContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RecycleContext").finish_non_exhaustive()
    }
}

impl RecycleContext {
    /// The context of a recycle reading through `client` and writing
    /// through `writes`.
    pub fn new(client: Client, writes: Arc<dyn RecycleWrites>) -> Self {
        Self { client, writes }
    }
}

/// A volume plugin. Every capability is optional; the `can_*` methods say
/// which ones a plugin has for a given volume, and the operations of a
/// capability it lacks answer [`PluginError::Setup`].
pub trait VolumePlugin: Send + Sync {
    /// The plugin's name, e.g. `kubernetes.io/host-path`; StorageClass
    /// provisioners and `provisioned-by` annotations refer to it.
    fn name(&self) -> &str;

    /// Whether the plugin creates storage for claims of a class naming it.
    fn can_provision(&self) -> bool {
        false
    }

    /// Whether the plugin can delete this volume's storage.
    fn can_delete(&self, _volume: &PersistentVolume) -> bool {
        false
    }

    /// Whether the plugin can recycle this volume.
    fn can_recycle(&self, _volume: &PersistentVolume) -> bool {
        false
    }

    /// The recycler pod a recycle of `volume` creates, as (namespace,
    /// name): what a cluster recycling the volume shows first, for a
    /// process that only follows it. `None` when the recycle makes no pod.
    fn recycler_pod(&self, _volume: &PersistentVolume) -> Option<(String, String)> {
        None
    }

    /// Whether volumes it provisions accept StorageClass mount options.
    fn supports_mount_options(&self) -> bool {
        false
    }

    /// Creates storage and returns the volume describing it (name, source,
    /// capacity, modes, reclaim policy); the controller binds it.
    fn provision<'a>(
        &'a self,
        _request: &'a ProvisionRequest,
    ) -> BoxFuture<'a, Result<PersistentVolume, PluginError>> {
        let error = PluginError::Setup(format!("plugin {:?} cannot provision", self.name()));
        Box::pin(async move { Err(error) })
    }

    /// Deletes the volume's storage.
    fn delete<'a>(
        &'a self,
        _volume: &'a PersistentVolume,
    ) -> BoxFuture<'a, Result<(), PluginError>> {
        let error = PluginError::Setup(format!("plugin {:?} cannot delete", self.name()));
        Box::pin(async move { Err(error) })
    }

    /// Scrubs the volume's data so it can be bound again.
    fn recycle<'a>(
        &'a self,
        _volume: &'a PersistentVolume,
        _context: &'a RecycleContext,
    ) -> BoxFuture<'a, Result<(), PluginError>> {
        let error = PluginError::Setup(format!("plugin {:?} cannot recycle", self.name()));
        Box::pin(async move { Err(error) })
    }

    /// Cleans up after a successful [`recycle`](Self::recycle), once the
    /// volume is Available again: what proved the scrub (a recycler pod) is
    /// kept until then, so that a retry after a failed volume write finds
    /// it instead of scrubbing twice. Nothing to do by default.
    fn finish_recycle<'a>(
        &'a self,
        _volume: &'a PersistentVolume,
        _context: &'a RecycleContext,
    ) -> BoxFuture<'a, Result<(), PluginError>> {
        Box::pin(async { Ok(()) })
    }
}

/// Who deletes a released volume's storage; see [`VolumePlugins::deleter`].
#[derive(Clone)]
pub(crate) enum Deleter {
    /// This plugin, in process.
    Plugin(Arc<dyn VolumePlugin>),
    /// An external provisioner, which deletes the volume itself.
    External,
    /// Nobody: why, in the plugin manager's words.
    Missing(String),
}

/// Why no plugin deletes a volume, in the plugin manager's words: a volume
/// whose source a known plugin serves (CSI, NFS, hostPath) has a plugin that
/// cannot delete; any other has no plugin at all.
fn no_deleter_reason(volume: &PersistentVolume) -> &'static str {
    let known_source = volume
        .spec
        .as_ref()
        .is_some_and(|s| s.csi.is_some() || s.nfs.is_some() || s.host_path.is_some());
    if known_source {
        "no deletable volume plugin matched"
    } else {
        "no volume plugin matched"
    }
}

/// The plugins the controller may use, looked up by name or by volume.
#[derive(Clone, Default)]
pub struct VolumePlugins {
    plugins: Vec<Arc<dyn VolumePlugin>>,
}

impl fmt::Debug for VolumePlugins {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.plugins.iter().map(|p| p.name().to_string()))
            .finish()
    }
}

impl VolumePlugins {
    /// A registry with `plugin` added (a later plugin of the same name is
    /// never found: the first one wins).
    pub fn with(mut self, plugin: Arc<dyn VolumePlugin>) -> Self {
        self.plugins.push(plugin);
        self
    }

    /// The plugins of the flags: hostPath (recycle, delete, and provision when
    /// `--enable-hostpath-provisioner` is set) and NFS (recycle), with the
    /// recycler pod templates and timeouts of the flags.
    pub fn from_config(config: &PluginConfig) -> Self {
        Self::default()
            .with(Arc::new(host_path::HostPathPlugin::new(
                config.host_path_recycler.clone(),
                config.enable_host_path_provisioner,
                config.host_path_root.clone(),
            )))
            .with(Arc::new(nfs::NfsPlugin::new(config.nfs_recycler.clone())))
    }

    /// The plugin of this name, whatever it can do.
    pub(crate) fn by_name(&self, name: &str) -> Option<Arc<dyn VolumePlugin>> {
        self.plugins.iter().find(|p| p.name() == name).cloned()
    }

    /// The provisioner of this name.
    pub(crate) fn provisioner(&self, name: &str) -> Option<Arc<dyn VolumePlugin>> {
        self.by_name(name).filter(|p| p.can_provision())
    }

    /// Who deletes a released volume's storage, by upstream's rule
    /// (`findDeletablePlugin`): the plugin that provisioned it (by
    /// `provisioned-by`); an external provisioner when that names no plugin
    /// here and no in-tree plugin; for a volume no provisioner made, the
    /// plugin that handles its source.
    pub(crate) fn deleter(&self, volume: &PersistentVolume) -> Deleter {
        let provisioner = annotation(&volume.metadata, ANN_DYNAMICALLY_PROVISIONED).unwrap_or("");
        if !provisioner.is_empty() {
            return match self.by_name(provisioner).filter(|p| p.can_delete(volume)) {
                Some(plugin) => Deleter::Plugin(plugin),
                None if !provisioner.starts_with(IN_TREE_PLUGIN_PREFIX) => Deleter::External,
                None => Deleter::Missing(format!(
                    "no deletable volume plugin matched name: {provisioner}"
                )),
            };
        }
        match self.plugins.iter().find(|p| p.can_delete(volume)) {
            Some(plugin) => Deleter::Plugin(Arc::clone(plugin)),
            None => Deleter::Missing(no_deleter_reason(volume).to_string()),
        }
    }

    /// The first plugin that can recycle this volume.
    pub(crate) fn recycler_for(&self, volume: &PersistentVolume) -> Option<Arc<dyn VolumePlugin>> {
        self.plugins.iter().find(|p| p.can_recycle(volume)).cloned()
    }
}

/// The plugin settings of the command line, checked at start-up.
#[derive(Clone, Debug)]
pub struct PluginConfig {
    /// Whether the hostPath plugin provisions (`--enable-hostpath-provisioner`).
    pub enable_host_path_provisioner: bool,
    /// Where provisioned hostPath volumes go.
    pub host_path_root: PathBuf,
    /// The hostPath recycler pod and its timeouts.
    pub host_path_recycler: RecyclerPodConfig,
    /// The NFS recycler pod and its timeouts.
    pub nfs_recycler: RecyclerPodConfig,
}
