//! Reclaim of released volumes by their policy: Retain keeps them, Delete
//! and Recycle run as operations ([`crate::pv::operations`]) or are left to
//! an external program, anything else is reported as an unknown policy.

use std::sync::Arc;

use crate::runtime::events::EventType;
use k8s_openapi::api::core::v1::PersistentVolume;

use super::changes::set_volume_phase_with_event;
use super::claim::requested_volume;
use super::{Binder, PvPlan};
use crate::pv::constants::reasons;
use crate::pv::keys::{self, VolumeName};
use crate::pv::migration::is_migrated;
use crate::pv::objects::{
    ReclaimPolicy, VolumePhase, claim_ref_key, claim_ref_uid, reclaim_policy,
};
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

impl Binder {
    /// Plans a released volume's reclaim policy: Recycle and Delete start
    /// their operation (at most one per volume at a time).
    pub(super) fn reclaim_volume(&self, plan: &mut PvPlan, volume: &Arc<PersistentVolume>) {
        let name = VolumeName::of(volume);
        let uid = volume.metadata.uid.as_deref().unwrap_or_default();
        match reclaim_action(volume, &self.settings.plugins) {
            ReclaimAction::LeaveToExternal => {
                tracing::debug!("reclaim left to an external program");
            }
            ReclaimAction::Retain => {
                tracing::debug!("policy Retain, volume kept");
            }
            ReclaimAction::Recycle => plan.start(keys::recycle(name.as_str(), uid)),
            ReclaimAction::Delete => plan.start(keys::delete(name.as_str(), uid)),
            ReclaimAction::Unknown(policy) => {
                tracing::warn!(policy, "unknown reclaim policy");
                set_volume_phase_with_event(
                    plan,
                    volume,
                    VolumePhase::Failed,
                    EventType::Warning,
                    reasons::VOLUME_UNKNOWN_RECLAIM_POLICY,
                    "Volume has unrecognized PersistentVolumeReclaimPolicy".to_string(),
                );
            }
        }
    }

    /// Whether a volume is still released, judged from the store: its
    /// claimRef names a claim that is gone, was replaced (another UID), or is
    /// bound to another volume. An operation checks this on the volume it
    /// has just read, so that a volume bound again meanwhile is left alone.
    pub(crate) fn is_volume_released(&self, volume: &PersistentVolume) -> bool {
        let uid = claim_ref_uid(volume);
        let Some(key) = claim_ref_key(volume).filter(|_| !uid.is_empty()) else {
            return false;
        };
        let Some(claim) = self.store.claim(&key) else {
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
}
