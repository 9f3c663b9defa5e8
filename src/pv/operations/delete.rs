//! The delete operation: deletes a released volume's storage through its
//! plugin, then the volume object. A failure marks the volume Failed (one
//! Warning event, when the phase changes) and backs off; storage still in
//! use only postpones the delete (a Normal event).
//!
//! A volume being deleted (it has a deletionTimestamp and waits for its
//! finalizers) is deleted the same way unless the controller recorded that
//! it deleted the storage already: the absence of the controller's
//! finalizer proves nothing, since a volume provisioned before the finalizer
//! existed never had it. A volume whose storage the controller recorded as
//! deleted but which is not being deleted (its object's delete failed, or
//! the record's answer was lost) only has its object deleted.

use k8s_openapi::api::core::v1::PersistentVolume;

use super::{Operations, PvExecutor, another_incarnation, carry_out, read_volume};
use crate::pv::constants::reasons;
use crate::pv::controller::{PvPlan, changes};
use crate::pv::error::{Error, Result};
use crate::pv::keys::VolumeName;
use crate::pv::objects::{VolumePhase, is_being_deleted};
use crate::pv::plugins::{Deleter, PluginError, VolumePlugins};
use crate::runtime::events::EventType;
use crate::runtime::operations::OperationName;

/// What deleting a volume's storage came to.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Deletion {
    /// A plugin deleted the storage.
    Deleted,
    /// An external program deletes it; the volume stays Released for it.
    External,
}

impl Operations {
    /// Deletes a released volume: re-reads it, checks it is the one the
    /// operation was started for and still released, deletes the storage,
    /// drops the deletion finalizer and deletes the object.
    #[tracing::instrument(skip_all, fields(volume = %name.object().name, operation = "delete"))]
    pub(super) async fn delete(&self, name: &OperationName, executor: &PvExecutor) -> Result<()> {
        let volume_name = VolumeName::new(&name.object().name);
        let Some(volume) = read_volume(executor, &volume_name).await? else {
            tracing::debug!("volume already deleted");
            return Ok(());
        };
        if another_incarnation(name, volume.metadata.uid.as_deref()) {
            tracing::debug!("volume re-created under its name, not deleting the new one");
            return Ok(());
        }
        if !self.binder.is_volume_released(&volume) {
            tracing::debug!("volume is not released any more, not deleting");
            return Ok(());
        }
        if changes::storage_already_deleted(&volume) {
            if is_being_deleted(&volume.metadata) {
                tracing::debug!("storage already deleted, the object waits for other finalizers");
            } else {
                // The storage went and was recorded, but the object's
                // delete failed or was never sent (the record's answer
                // was lost); the record kept the storage from being
                // deleted twice, the object is deleted now.
                tracing::info!("storage already deleted, deleting the volume object");
                delete_object(executor, &volume_name, &volume).await;
            }
            return Ok(());
        }
        match delete_storage(&self.binder.settings.plugins, &volume).await {
            Ok(Deletion::External) => {
                tracing::debug!("volume is deleted by an external program");
                Ok(())
            }
            Ok(Deletion::Deleted) => {
                tracing::info!("volume storage deleted");
                let mut plan = PvPlan::default();
                changes::mark_storage_deleted(&mut plan, &volume);
                carry_out(executor, plan).await?;
                delete_object(executor, &volume_name, &volume).await;
                Ok(())
            }
            Err(error) => {
                let message = error.to_string();
                let mut plan = PvPlan::default();
                match &error {
                    PluginError::InUse(_) => {
                        tracing::info!(%message, "volume still in use, delete postponed");
                        plan.event(
                            volume.as_ref(),
                            EventType::Normal,
                            reasons::VOLUME_DELETE,
                            message,
                        );
                    }
                    PluginError::Setup(_) | PluginError::Failed(_) => {
                        tracing::warn!(%message, "deleting volume storage failed");
                        changes::set_volume_phase_with_event(
                            &mut plan,
                            &volume,
                            VolumePhase::Failed,
                            EventType::Warning,
                            reasons::VOLUME_FAILED_DELETE,
                            message,
                        );
                    }
                }
                carry_out(executor, plan).await?;
                Err(Error::Plugin {
                    action: format!("deleting volume {:?}", volume_name.as_str()),
                    source: error,
                })
            }
        }
    }
}

/// Deletes the volume object whose storage is deleted (this incarnation
/// only: its UID is the delete's precondition). A failure is logged: the
/// next sync runs the operation again, and it deletes the object then.
async fn delete_object(executor: &PvExecutor, name: &VolumeName, volume: &PersistentVolume) {
    let mut plan = PvPlan::default();
    plan.delete::<PersistentVolume>(name.key(), volume.metadata.uid.clone());
    match carry_out(executor, plan).await {
        Ok(_) => tracing::info!("volume object deleted"),
        // A volume re-created under this name meanwhile is another
        // object, and the precondition kept it.
        Err(error) => tracing::warn!(%error, "deleting the volume object failed"),
    }
}

/// Deletes a volume's storage with its deleter among `plugins` (see
/// [`VolumePlugins::deleter`]). Errors carry upstream's event wording.
pub(super) async fn delete_storage(
    plugins: &VolumePlugins,
    volume: &PersistentVolume,
) -> std::result::Result<Deletion, PluginError> {
    let name = VolumeName::of(volume).as_str().to_owned();
    let plugin = match plugins.deleter(volume) {
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
