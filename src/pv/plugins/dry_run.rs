//! The volume plugins in a dry run: they tell what they can do as the
//! real ones, but touch no storage. Provisioning answers the volume the
//! controller would then create (so the create is judged), deleting answers
//! done (so the delete of the volume is judged). Recycling is the real
//! plugin's, which in a dry run only records its recycler pod and
//! follows the cluster's own recycle of the volume
//! ([`RecycleContext::follow_cluster`]).

use std::sync::Arc;

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::{PluginError, ProvisionRequest, RecycleContext, VolumePlugin};
use k8s_names::ANN_DYNAMICALLY_PROVISIONED;

/// A plugin that decides as `0` but acts on nothing.
pub(crate) struct DryRunPlugin(pub(crate) Arc<dyn VolumePlugin>);

impl VolumePlugin for DryRunPlugin {
    fn name(&self) -> &str {
        self.0.name()
    }

    fn can_provision(&self) -> bool {
        self.0.can_provision()
    }

    fn can_delete(&self, volume: &PersistentVolume) -> bool {
        self.0.can_delete(volume)
    }

    fn can_recycle(&self, volume: &PersistentVolume) -> bool {
        self.0.can_recycle(volume)
    }

    fn supports_mount_options(&self) -> bool {
        self.0.supports_mount_options()
    }

    fn provision<'a>(
        &'a self,
        request: &'a ProvisionRequest,
    ) -> BoxFuture<'a, Result<PersistentVolume, PluginError>> {
        let spec = request.claim.spec.clone().unwrap_or_default();
        let volume = PersistentVolume {
            metadata: ObjectMeta {
                name: Some(request.pv_name.clone()),
                annotations: Some(
                    [(
                        ANN_DYNAMICALLY_PROVISIONED.to_string(),
                        self.name().to_string(),
                    )]
                    .into(),
                ),
                ..ObjectMeta::default()
            },
            spec: Some(PersistentVolumeSpec {
                access_modes: spec.access_modes,
                capacity: spec.resources.and_then(|r| r.requests),
                volume_mode: spec.volume_mode,
                persistent_volume_reclaim_policy: Some(request.reclaim_policy.to_string()),
                ..PersistentVolumeSpec::default()
            }),
            status: None,
        };
        Box::pin(async move { Ok(volume) })
    }

    fn delete<'a>(
        &'a self,
        _volume: &'a PersistentVolume,
    ) -> BoxFuture<'a, Result<(), PluginError>> {
        Box::pin(async { Ok(()) })
    }

    fn recycle<'a>(
        &'a self,
        volume: &'a PersistentVolume,
        context: &'a RecycleContext,
    ) -> BoxFuture<'a, Result<(), PluginError>> {
        self.0.recycle(volume, context)
    }
}
