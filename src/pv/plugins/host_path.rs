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
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{
        PersistentVolumeClaim, PersistentVolumeClaimSpec, VolumeResourceRequirements,
    };
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

    fn plugin(enabled: bool, root: &Path) -> HostPathPlugin {
        let recycler = RecyclerPodConfig {
            template: recycler::default_template(),
            minimum_timeout: 60,
            timeout_increment: 30,
        };
        HostPathPlugin::new(recycler, enabled, root.to_path_buf())
    }

    fn request(pv_name: &str) -> ProvisionRequest {
        ProvisionRequest {
            pv_name: pv_name.to_string(),
            claim: PersistentVolumeClaim {
                spec: Some(PersistentVolumeClaimSpec {
                    access_modes: Some(vec!["ReadWriteOnce".to_string()]),
                    resources: Some(VolumeResourceRequirements {
                        requests: Some(
                            [("storage".to_string(), Quantity("1Gi".to_string()))].into(),
                        ),
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            },
            reclaim_policy: crate::pv::objects::ReclaimPolicy::Delete,
            parameters: Default::default(),
            mount_options: vec![],
            selected_node: None,
        }
    }

    #[tokio::test]
    async fn provisions_a_directory_and_deletes_it() {
        let root = std::env::temp_dir().join(format!("hostpath-test-{}", std::process::id()));
        let plugin = plugin(true, &root);
        let volume = plugin
            .provision(&request("pvc-1"))
            .await
            .expect("provisioned");
        let path = volume
            .spec
            .as_ref()
            .and_then(|s| s.host_path.as_ref())
            .map(|h| h.path.clone());
        assert_eq!(path, Some(root.join("pvc-1").display().to_string()));
        assert!(root.join("pvc-1").is_dir());
        assert_eq!(
            volume
                .spec
                .as_ref()
                .and_then(|s| s.persistent_volume_reclaim_policy.as_deref()),
            Some("Delete")
        );
        plugin.delete(&volume).await.expect("deleted");
        assert!(!root.join("pvc-1").exists());
        plugin
            .delete(&volume)
            .await
            .expect("deleting a missing directory is fine");
        std::fs::remove_dir_all(&root).ok();
    }

    #[tokio::test]
    async fn provisioning_is_refused_unless_enabled() {
        let root = std::env::temp_dir().join("hostpath-never-created");
        let error = plugin(false, &root)
            .provision(&request("pvc-2"))
            .await
            .err();
        assert!(matches!(error, Some(PluginError::Setup(m)) if m.contains("disabled")));
        assert!(!root.exists());
    }

    #[tokio::test]
    async fn block_claims_are_refused_before_anything_is_made() {
        let root = std::env::temp_dir().join(format!("hostpath-block-{}", std::process::id()));
        let mut block = request("pvc-3");
        if let Some(spec) = block.claim.spec.as_mut() {
            spec.volume_mode = Some("Block".to_string());
        }
        let error = plugin(true, &root).provision(&block).await.err();
        assert!(matches!(
            error,
            Some(PluginError::Failed(m)) if m == "kubernetes.io/host-path does not support block volume provisioning"
        ));
        assert!(!root.exists());
    }

    #[test]
    fn deletes_only_below_tmp_or_the_root() {
        let plugin = plugin(true, Path::new("/srv/volumes"));
        assert!(plugin.may_delete(Path::new("/tmp/x")));
        assert!(plugin.may_delete(Path::new("/srv/volumes/pvc-1")));
        assert!(!plugin.may_delete(Path::new("/tmp")));
        assert!(!plugin.may_delete(Path::new("/tmp/../etc")));
        assert!(!plugin.may_delete(Path::new("/etc/passwd")));
        assert!(!plugin.may_delete(Path::new("/srv/volumes")));
        assert!(!plugin.may_delete(Path::new("tmp/x")));
    }
}
