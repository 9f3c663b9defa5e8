//! The delete operation: deletes a released volume's storage through its
//! plugin, then the volume object. A failure marks the volume Failed (one
//! Warning event, when the phase changes) and backs off; storage still in
//! use only postpones the delete (a Normal event).
//!
//! A volume being deleted (it has a deletionTimestamp and waits for its
//! finalizers) is deleted the same way unless the controller recorded that
//! it deleted the storage already: the absence of the controller's
//! finalizer proves nothing, since a volume provisioned before the finalizer
//! existed never had it.

use std::sync::Arc;

use k8s_openapi::api::core::v1::PersistentVolume;

use super::Controller;
use super::finalizers::{storage_already_deleted, storage_deleted_edit};
use super::writes::{Edit, Part};
use crate::pv::constants::reasons;
use crate::pv::error::{Error, Result};
use crate::pv::keys::VolumeName;
use crate::pv::plugins::{Deleter, PluginError};

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
        let name = VolumeName::of(&scheduled);
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
                let volume = self.mark_storage_deleted(&volume).await?;
                match self.delete_volume(&volume).await {
                    Ok(()) => tracing::info!("volume object deleted"),
                    // The next sync runs the (idempotent) delete again; a
                    // volume re-created under this name meanwhile is another
                    // object, and the precondition kept it.
                    Err(error) => tracing::warn!(%error, "deleting the volume object failed"),
                }
                Ok(())
            }
            Err(error) => {
                let message = error.to_string();
                match &error {
                    PluginError::InUse(_) => {
                        tracing::info!(%message, "volume still in use, delete postponed");
                        self.note(volume.as_ref(), reasons::VOLUME_DELETE, message);
                    }
                    PluginError::Setup(_) | PluginError::Failed(_) => {
                        tracing::warn!(%message, "deleting volume storage failed");
                        self.fail_volume(&volume, reasons::VOLUME_FAILED_DELETE, message)
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

    /// Deletes a volume's storage with its deleter (see
    /// [`VolumePlugins::deleter`](crate::pv::plugins::VolumePlugins::deleter)).
    /// Errors carry upstream's event wording.
    pub(super) async fn delete_storage(
        &self,
        volume: &PersistentVolume,
    ) -> std::result::Result<Deletion, PluginError> {
        let name = VolumeName::of(volume).as_str().to_owned();
        let plugin = match self.settings.plugins.deleter(volume) {
            Deleter::Plugin(plugin) => plugin,
            Deleter::External => return Ok(Deletion::External),
            Deleter::Missing(reason) => {
                return Err(PluginError::Setup(format!(
                    "Error getting deleter volume plugin for volume {name:?}: {reason}"
                )));
            }
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

impl Controller {
    /// Records that the volume's storage is gone: removes the controller's
    /// finalizer and, on a volume that will linger (it is being deleted and
    /// waits for other finalizers, or still has one), marks it
    /// [`ANN_STORAGE_DELETED`] in the same write. A volume about to be
    /// deleted with nothing to remove needs no write.
    pub(super) async fn mark_storage_deleted(
        &self,
        volume: &Arc<PersistentVolume>,
    ) -> Result<Arc<PersistentVolume>> {
        let mut check = PersistentVolume::clone(volume);
        if storage_deleted_edit(&mut check) == Edit::Unchanged {
            return Ok(Arc::clone(volume));
        }
        let stored = self
            .write_volume(volume, Part::Spec, storage_deleted_edit)
            .await?;
        tracing::info!("volume storage recorded as deleted, deletion finalizer removed");
        Ok(stored)
    }
}
