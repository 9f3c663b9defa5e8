//! The NFS plugin: recycles NFS volumes with a recycler pod. It neither
//! provisions nor deletes (NFS exports belong to their administrator).

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::{NFSVolumeSource, PersistentVolume, Volume};

use super::recycler::{self, RecyclerPodConfig};
use super::{PluginError, RecycleContext, VolumePlugin};

/// Name of the NFS plugin.
pub(crate) const PLUGIN_NAME: &str = "kubernetes.io/nfs";

/// Recycles NFS volumes.
pub(crate) struct NfsPlugin {
    recycler: RecyclerPodConfig,
}

impl NfsPlugin {
    /// An NFS plugin running recycler pods from `recycler`.
    pub(crate) fn new(recycler: RecyclerPodConfig) -> Self {
        Self { recycler }
    }
}

/// The NFS source of a volume, if it has one.
fn nfs_source(volume: &PersistentVolume) -> Option<&NFSVolumeSource> {
    volume.spec.as_ref().and_then(|s| s.nfs.as_ref())
}

impl VolumePlugin for NfsPlugin {
    fn name(&self) -> &str {
        PLUGIN_NAME
    }

    fn can_recycle(&self, volume: &PersistentVolume) -> bool {
        nfs_source(volume).is_some()
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
            let source = nfs_source(volume)
                .ok_or_else(|| PluginError::Setup("spec.nfs is nil".to_string()))?;
            let scrubbed = Volume {
                nfs: Some(NFSVolumeSource {
                    server: source.server.clone(),
                    path: source.path.clone(),
                    read_only: Some(false),
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
