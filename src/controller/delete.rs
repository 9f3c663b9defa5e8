//! The delete operation: deletes a released volume's storage through its
//! plugin, then the volume object. A failure marks the volume Failed (one
//! Warning event, when the phase changes) and backs off; storage still in
//! use only postpones the delete (a Normal event).

use std::sync::Arc;

use k8s_openapi::api::core::v1::PersistentVolume;
use kube::api::DeleteParams;

use super::Controller;
use super::binding::phase;
use super::finalizers::storage_already_deleted;
use crate::constants::{
    ANN_DYNAMICALLY_PROVISIONED, ANN_MIGRATED_TO, IN_TREE_PLUGIN_PREFIX, reasons,
};
use crate::error::{Error, Result};
use crate::events::{EventType, reference_of};
use crate::keys::VolumeName;
use crate::objects::annotation;
use crate::reclaim::PluginError;

/// What deleting a volume's storage came to.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Deletion {
    /// A plugin deleted the storage.
    Deleted,
    /// An external program deletes it; the volume stays Released for it.
    External,
}

impl Controller {
    /// Deletes a released volume: re-reads it, checks it is still released,
    /// deletes the storage, drops the deletion finalizer and deletes the
    /// object. Runs on the operation tracker as `delete-<pv>[<uid>]`.
    #[tracing::instrument(skip_all, fields(volume = %VolumeName::of(&scheduled), operation = "delete"))]
    pub(super) async fn delete_operation(&self, scheduled: Arc<PersistentVolume>) -> Result<()> {
        let name = VolumeName::of(&scheduled).0;
        let Some(volume) = self.fresh_volume(&name).await? else {
            tracing::debug!("volume already deleted");
            return Ok(());
        };
        if !self.is_volume_released(&volume) {
            tracing::debug!("volume is not released any more, not deleting");
            return Ok(());
        }
        if storage_already_deleted(&volume) {
            tracing::debug!("storage already deleted, the object waits for other finalizers");
            return Ok(());
        }
        match self.delete_storage(&volume).await {
            Ok(Deletion::External) => {
                tracing::debug!("volume is deleted by an external program");
                Ok(())
            }
            Ok(Deletion::Deleted) => {
                tracing::info!("volume storage deleted");
                self.remove_deletion_finalizer(&volume).await?;
                match self
                    .volumes_api()
                    .delete(&name, &DeleteParams::default())
                    .await
                {
                    Ok(_) => tracing::info!("volume object deleted"),
                    // The next sync runs the (idempotent) delete again.
                    Err(error) => tracing::warn!(%error, "deleting the volume object failed"),
                }
                Ok(())
            }
            Err(error) => {
                let message = error.to_string();
                match &error {
                    PluginError::InUse(_) => {
                        tracing::info!(%message, "volume still in use, delete postponed");
                        self.event(
                            reference_of(volume.as_ref()),
                            EventType::Normal,
                            reasons::VOLUME_DELETE,
                            message,
                        )
                        .await;
                    }
                    PluginError::Setup(_) | PluginError::Failed(_) => {
                        tracing::warn!(%message, "deleting volume storage failed");
                        self.set_volume_phase_with_event(
                            &volume,
                            phase::FAILED,
                            EventType::Warning,
                            reasons::VOLUME_FAILED_DELETE,
                            message,
                        )
                        .await?;
                    }
                }
                Err(Error::Plugin {
                    action: format!("deleting volume {name:?}"),
                    source: error,
                })
            }
        }
    }

    /// Deletes a volume's storage with the plugin that provisioned it (by
    /// `provisioned-by`) or, for a volume not provisioned, the plugin that
    /// handles its source. Errors carry upstream's event wording.
    pub(super) async fn delete_storage(
        &self,
        volume: &PersistentVolume,
    ) -> std::result::Result<Deletion, PluginError> {
        let name = VolumeName::of(volume).0;
        let plugins = &self.settings.plugins;
        let provisioner = annotation(&volume.metadata, ANN_DYNAMICALLY_PROVISIONED).unwrap_or("");
        let plugin = if !provisioner.is_empty() {
            match plugins.deleter_by_name(provisioner, volume) {
                Some(plugin) => plugin,
                None if !provisioner.starts_with(IN_TREE_PLUGIN_PREFIX) => {
                    return Ok(Deletion::External);
                }
                None => {
                    return Err(PluginError::Setup(format!(
                        "Error getting deleter volume plugin for volume {name:?}: no deletable volume plugin matched name: {provisioner}"
                    )));
                }
            }
        } else if annotation(&volume.metadata, ANN_MIGRATED_TO).is_some()
            || volume.spec.as_ref().is_some_and(|s| s.csi.is_some())
        {
            return Ok(Deletion::External);
        } else {
            plugins.deleter_for(volume).ok_or_else(|| {
                PluginError::Setup(format!(
                    "Error getting deleter volume plugin for volume {name:?}: no volume plugin matched"
                ))
            })?
        };
        tracing::debug!(plugin = plugin.name(), "deleting volume storage");
        match plugin.delete(volume).await {
            Ok(()) => Ok(Deletion::Deleted),
            Err(PluginError::Setup(message)) => Err(PluginError::Setup(format!(
                "Failed to create deleter for volume {name:?}: {message}"
            ))),
            Err(other) => Err(other),
        }
    }
}
