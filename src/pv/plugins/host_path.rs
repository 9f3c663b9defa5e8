//! The hostPath plugin: recycles hostPath volumes with a recycler pod,
//! deletes their directories (only under `/tmp/` or the provisioner's root,
//! as a guard against deleting a host's real data), and, when enabled,
//! provisions volumes as directories on the controller's own host. That is
//! only meaningful on a single-node development cluster, hence opt-in.

use std::path::{Component, Path, PathBuf};

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::{
    HostPathVolumeSource, PersistentVolume, PersistentVolumeSpec, Volume,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::recycler::{self, RecyclerPodConfig};
use super::{PluginError, ProvisionRequest, RecycleContext, VolumePlugin};
use k8s_names::ANN_DYNAMICALLY_PROVISIONED;

/// Name of the hostPath plugin.
pub(crate) const PLUGIN_NAME: &str = "kubernetes.io/host-path";

/// Directory under which the deleter always may delete (upstream's rule).
const DELETABLE_ROOT: &str = "/tmp";

/// Recycles, deletes and (opt-in) provisions hostPath volumes.
pub(crate) struct HostPathPlugin {
    recycler: RecyclerPodConfig,
    provisioning_enabled: bool,
    root: PathBuf,
}

impl HostPathPlugin {
    /// A hostPath plugin; it provisions under `root` when
    /// `provisioning_enabled`.
    pub(crate) fn new(
        recycler: RecyclerPodConfig,
        provisioning_enabled: bool,
        root: PathBuf,
    ) -> Self {
        Self {
            recycler,
            provisioning_enabled,
            root,
        }
    }

    /// Whether the deleter may remove `path`: a normal absolute path strictly
    /// below `/tmp` or below the provisioner's root.
    fn may_delete(&self, path: &Path) -> bool {
        let normal = path.is_absolute()
            && path
                .components()
                .all(|c| matches!(c, Component::RootDir | Component::Normal(_)));
        let strictly_below = |root: &Path| path.starts_with(root) && path != root;
        normal && (strictly_below(Path::new(DELETABLE_ROOT)) || strictly_below(&self.root))
    }
}

/// The hostPath directory of a volume, if it has one.
fn host_path(volume: &PersistentVolume) -> Option<&str> {
    volume
        .spec
        .as_ref()
        .and_then(|s| s.host_path.as_ref())
        .map(|h| h.path.as_str())
}

impl VolumePlugin for HostPathPlugin {
    fn name(&self) -> &str {
        PLUGIN_NAME
    }

    fn can_provision(&self) -> bool {
        true
    }

    fn can_delete(&self, volume: &PersistentVolume) -> bool {
        host_path(volume).is_some()
    }

    fn can_recycle(&self, volume: &PersistentVolume) -> bool {
        host_path(volume).is_some()
    }

    fn provision<'a>(
        &'a self,
        request: &'a ProvisionRequest,
    ) -> BoxFuture<'a, Result<PersistentVolume, PluginError>> {
        Box::pin(async move {
            if !self.provisioning_enabled {
                return Err(PluginError::Setup(format!(
                    "provisioning in volume plugin {PLUGIN_NAME:?} is disabled"
                )));
            }
            let claim_spec = request.claim.spec.clone().unwrap_or_default();
            if claim_spec.volume_mode.as_deref() == Some("Block") {
                return Err(PluginError::Failed(format!(
                    "{PLUGIN_NAME} does not support block volume provisioning"
                )));
            }
            let capacity = claim_spec
                .resources
                .and_then(|r| r.requests)
                .and_then(|r| r.get("storage").cloned())
                .ok_or_else(|| PluginError::Setup("claim requests no storage".to_string()))?;
            let directory = self.root.join(&request.pv_name);
            tokio::fs::create_dir_all(&directory).await.map_err(|e| {
                PluginError::Failed(format!("creating {}: {e}", directory.display()))
            })?;
            tracing::info!(volume = %request.pv_name, path = %directory.display(), "hostPath directory created");
            Ok(PersistentVolume {
                metadata: ObjectMeta {
                    name: Some(request.pv_name.clone()),
                    annotations: Some(
                        [(
                            ANN_DYNAMICALLY_PROVISIONED.to_string(),
                            PLUGIN_NAME.to_string(),
                        )]
                        .into(),
                    ),
                    ..Default::default()
                },
                spec: Some(PersistentVolumeSpec {
                    persistent_volume_reclaim_policy: Some(request.reclaim_policy.to_string()),
                    access_modes: claim_spec.access_modes,
                    capacity: Some([("storage".to_string(), capacity)].into()),
                    volume_mode: claim_spec.volume_mode,
                    host_path: Some(HostPathVolumeSource {
                        path: directory.display().to_string(),
                        type_: None,
                    }),
                    ..Default::default()
                }),
                status: None,
            })
        })
    }

    fn delete<'a>(
        &'a self,
        volume: &'a PersistentVolume,
    ) -> BoxFuture<'a, Result<(), PluginError>> {
        Box::pin(async move {
            let path = host_path(volume)
                .map(PathBuf::from)
                .ok_or_else(|| PluginError::Setup("spec.hostPath is nil".to_string()))?;
            if !self.may_delete(&path) {
                return Err(PluginError::Failed(format!(
                    "host_path deleter only supports /tmp/.+ or {}/.+ but received provided {}",
                    self.root.display(),
                    path.display()
                )));
            }
            match tokio::fs::remove_dir_all(&path).await {
                Ok(()) => Ok(()),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
                Err(e) => Err(PluginError::Failed(format!(
                    "removing {}: {e}",
                    path.display()
                ))),
            }
        })
    }

    fn recycler_pod(&self, volume: &PersistentVolume) -> Option<(String, String)> {
        Some(recycler::pod_key(&self.recycler, volume))
    }

    fn recycle<'a>(
        &'a self,
        volume: &'a PersistentVolume,
        context: &'a RecycleContext,
    ) -> BoxFuture<'a, Result<(), PluginError>> {
        Box::pin(async move {
            let path = host_path(volume)
                .ok_or_else(|| PluginError::Setup("spec.hostPath is nil".to_string()))?;
            let scrubbed = Volume {
                host_path: Some(HostPathVolumeSource {
                    path: path.to_string(),
                    type_: None,
                }),
                ..Default::default()
            };
            Box::pin(recycler::recycle(&self.recycler, volume, scrubbed, context)).await
        })
    }

    fn finish_recycle<'a>(
        &'a self,
        volume: &'a PersistentVolume,
        context: &'a RecycleContext,
    ) -> BoxFuture<'a, Result<(), PluginError>> {
        Box::pin(recycler::finish(&self.recycler, volume, context))
    }
}

#[cfg(test)]
mod tests;
