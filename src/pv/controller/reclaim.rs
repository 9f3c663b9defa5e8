//! Reclaim of released volumes by their policy: Retain keeps them, Delete
//! and Recycle run as operations (see [`super::delete`] and
//! [`super::recycle`]) or are left to an external program, anything else is
//! reported as an unknown policy.

use std::sync::Arc;

use crate::runtime::events::EventType;
use k8s_openapi::api::core::v1::PersistentVolume;

use super::Controller;
use super::changes::PvPlan;
use super::claim::requested_volume;
use crate::pv::constants::reasons;
use crate::pv::error::Result;
use crate::pv::keys::VolumeName;
use crate::pv::migration::is_migrated;
use crate::pv::objects::{
    ReclaimPolicy, VolumePhase, claim_ref_key, claim_ref_uid, reclaim_policy,
};
use crate::pv::operations;
use crate::pv::plugins::{Deleter, VolumePlugins};

/// What to do with a released volume.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum ReclaimAction {
    /// Another program owns reclaim (a volume whose in-tree plugin migrated
    /// to CSI, or one with policy Delete that an external provisioner made):
    /// leave it Released.
    LeaveToExternal,
    /// Policy Retain: keep the volume and its data for an administrator.
    Retain,
    /// Policy Recycle: scrub the volume and make it Available again.
    Recycle,
    /// Policy Delete: delete the storage and the volume object.
    Delete,
    /// A policy the controller does not know.
    Unknown(String),
}

/// Decides how a released volume is reclaimed, with the deleters of
/// `plugins` for policy Delete.
pub(super) fn reclaim_action(volume: &PersistentVolume, plugins: &VolumePlugins) -> ReclaimAction {
    if is_migrated(volume) {
        return ReclaimAction::LeaveToExternal;
    }
    match reclaim_policy(volume) {
        ReclaimPolicy::Retain => ReclaimAction::Retain,
        ReclaimPolicy::Recycle => ReclaimAction::Recycle,
        ReclaimPolicy::Delete => match plugins.deleter(volume) {
            Deleter::External => ReclaimAction::LeaveToExternal,
            Deleter::Plugin(_) | Deleter::Missing(_) => ReclaimAction::Delete,
        },
        ReclaimPolicy::Other(policy) => ReclaimAction::Unknown(policy),
    }
}

impl Controller {
    /// Plans a released volume's reclaim policy: Recycle and Delete start
    /// their operation (at most one per volume at a time).
    pub(super) fn reclaim_volume(
        &self,
        plan: &mut PvPlan,
        volume: &Arc<PersistentVolume>,
    ) -> Result<()> {
        let name = VolumeName::of(volume).as_str().to_owned();
        let uid = volume.metadata.uid.clone().unwrap_or_default();
        match reclaim_action(volume, &self.settings.plugins) {
            ReclaimAction::LeaveToExternal => {
                tracing::debug!("reclaim left to an external program");
                Ok(())
            }
            ReclaimAction::Retain => {
                tracing::debug!("policy Retain, volume kept");
                Ok(())
            }
            ReclaimAction::Recycle => {
                let this = self.clone();
                let volume = Arc::clone(volume);
                plan.start(operations::recycle(&name, &uid), async move {
                    this.recycle_operation(volume).await
                });
                Ok(())
            }
            ReclaimAction::Delete => {
                let this = self.clone();
                let volume = Arc::clone(volume);
                plan.start(operations::delete(&name, &uid), async move {
                    this.delete_operation(volume).await
                });
                Ok(())
            }
            ReclaimAction::Unknown(policy) => {
                tracing::warn!(policy, "unknown reclaim policy");
                self.set_volume_phase_with_event(
                    plan,
                    volume,
                    VolumePhase::Failed,
                    EventType::Warning,
                    reasons::VOLUME_UNKNOWN_RECLAIM_POLICY,
                    "Volume has unrecognized PersistentVolumeReclaimPolicy".to_string(),
                )
                .map(drop)
            }
        }
    }

    /// Whether a volume is still released, judged from the shadow cache: its
    /// claimRef names a claim that is gone, was replaced (another UID), or is
    /// bound to another volume. An operation checks this on the volume it
    /// has just read, so that a volume bound again meanwhile is left alone.
    pub(super) fn is_volume_released(&self, volume: &PersistentVolume) -> bool {
        let uid = claim_ref_uid(volume);
        let Some(key) = claim_ref_key(volume).filter(|_| !uid.is_empty()) else {
            return false;
        };
        let Some(claim) = self.cache.claim(&key) else {
            return true;
        };
        if claim.metadata.uid.as_deref() != Some(uid) {
            return true;
        }
        match requested_volume(&claim) {
            None => false,
            Some(name) => name != VolumeName::of(volume).as_str(),
        }
    }

    /// The volume as the API server has it now (or as a write of this
    /// process made it since), stored in the shadow cache; `None` when it is
    /// gone.
    pub(super) async fn fresh_volume(
        &self,
        name: &VolumeName,
    ) -> Result<Option<Arc<PersistentVolume>>> {
        Ok(self.writers.volumes.refresh(&name.key()).await?)
    }
}
