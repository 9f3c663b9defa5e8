//! Reclaim of released volumes by their policy: Retain keeps them, Delete
//! and Recycle need a plugin (or an external program), anything else is
//! reported as an unknown policy.

use std::sync::Arc;

use crate::events::EventType;
use k8s_openapi::api::core::v1::PersistentVolume;

use super::Controller;
use super::binding::phase;
use super::volume::reclaim_policy;
use crate::constants::{
    ANN_DYNAMICALLY_PROVISIONED, ANN_MIGRATED_TO, IN_TREE_PLUGIN_PREFIX, reasons,
};
use crate::error::Result;
use crate::keys::VolumeName;
use crate::objects::annotation;

/// What to do with a released volume.
#[derive(Debug, PartialEq, Eq)]
pub enum ReclaimAction {
    /// Another program owns reclaim (a migrated volume, or one provisioned by
    /// an external provisioner with policy Delete): leave it Released.
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

/// Decides how a released volume is reclaimed.
pub fn reclaim_action(volume: &PersistentVolume) -> ReclaimAction {
    if annotation(&volume.metadata, ANN_MIGRATED_TO).is_some_and(|v| !v.is_empty()) {
        return ReclaimAction::LeaveToExternal;
    }
    match reclaim_policy(volume) {
        "Retain" => ReclaimAction::Retain,
        "Recycle" => ReclaimAction::Recycle,
        "Delete" => {
            let provisioner =
                annotation(&volume.metadata, ANN_DYNAMICALLY_PROVISIONED).unwrap_or("");
            if !provisioner.is_empty() && !provisioner.starts_with(IN_TREE_PLUGIN_PREFIX) {
                ReclaimAction::LeaveToExternal
            } else {
                ReclaimAction::Delete
            }
        }
        other => ReclaimAction::Unknown(other.to_string()),
    }
}

impl Controller {
    /// Runs a released volume's reclaim policy.
    pub(super) async fn reclaim_volume(&self, volume: &Arc<PersistentVolume>) -> Result<()> {
        let name = VolumeName::of(volume).0;
        match reclaim_action(volume) {
            ReclaimAction::LeaveToExternal => {
                tracing::debug!("reclaim left to an external program");
                Ok(())
            }
            ReclaimAction::Retain => {
                tracing::debug!("policy Retain, volume kept");
                Ok(())
            }
            ReclaimAction::Recycle => self
                .set_volume_phase_with_event(
                    volume,
                    phase::FAILED,
                    EventType::Warning,
                    reasons::VOLUME_FAILED_RECYCLE,
                    "No recycler plugin found for the volume!".to_string(),
                )
                .await
                .map(drop),
            ReclaimAction::Delete => self
                .set_volume_phase_with_event(
                    volume,
                    phase::FAILED,
                    EventType::Warning,
                    reasons::VOLUME_FAILED_DELETE,
                    format!("Error getting deleter volume plugin for volume {name:?}: no volume plugin matched"),
                )
                .await
                .map(drop),
            ReclaimAction::Unknown(policy) => {
                tracing::warn!(policy, "unknown reclaim policy");
                self.set_volume_phase_with_event(
                    volume,
                    phase::FAILED,
                    EventType::Warning,
                    reasons::VOLUME_UNKNOWN_RECLAIM_POLICY,
                    "Volume has unrecognized PersistentVolumeReclaimPolicy".to_string(),
                )
                .await
                .map(drop)
            }
        }
    }
}
