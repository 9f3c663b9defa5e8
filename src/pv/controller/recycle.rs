//! The recycle operation: scrubs a released volume with its plugin (a
//! recycler pod for hostPath and NFS) and makes it Available again. A volume
//! still mounted by a pod is not touched; a volume no plugin can recycle, or
//! whose scrub failed, is marked Failed.

use std::sync::Arc;

use k8s_openapi::api::core::v1::PersistentVolume;

use super::Controller;
use super::changes::PvPlan;
use crate::pv::constants::reasons;
use crate::pv::error::{Error, Result};
use crate::pv::keys::VolumeName;
use crate::pv::objects::claim_ref_key;
use crate::pv::plugins::{EventRelay, RecycleContext, RecycledVolumes, RecyclerPods};
use crate::runtime::events::reference_of;

impl Controller {
    /// Recycles a released volume: re-reads it, checks it is still released
    /// and unused, scrubs it and unbinds it. Runs on the operation tracker as
    /// `recycle-<pv>[<uid>]`; a failed scrub is an error, so the next attempt
    /// waits out the tracker's backoff.
    #[tracing::instrument(skip_all, fields(volume = %VolumeName::of(&scheduled), operation = "recycle"))]
    pub(super) async fn recycle_operation(&self, scheduled: Arc<PersistentVolume>) -> Result<()> {
        let name = VolumeName::of(&scheduled);
        let Some(volume) = self.fresh_volume(&name).await? else {
            tracing::debug!("volume deleted, nothing to recycle");
            return Ok(());
        };
        if !self.is_volume_released(&volume) {
            tracing::debug!("volume is not released any more, not recycling");
            return Ok(());
        }
        let users = self.pods_using_old_claim(&volume);
        if !users.is_empty() {
            tracing::info!(pods = ?users, "volume still used by pods, recycle postponed");
            self.note(
                volume.as_ref(),
                reasons::VOLUME_FAILED_RECYCLE,
                format!("Volume is used by pods: {}", users.join(",")),
            );
            return Ok(());
        }
        let Some(plugin) = self.settings.plugins.recycler_for(&volume) else {
            tracing::warn!("no plugin can recycle the volume");
            self.fail_volume(
                &volume,
                reasons::VOLUME_FAILED_RECYCLE,
                "No recycler plugin found for the volume!".to_string(),
            )
            .await?;
            return Ok(());
        };
        let context = RecycleContext {
            client: self.client.clone(),
            pods: RecyclerPods(self.writers.pods.clone()),
            volumes: RecycledVolumes(self.writers.volumes.clone()),
            relay: EventRelay::new(self.recorder.clone(), reference_of(volume.as_ref())),
        };
        tracing::info!(plugin = plugin.name(), "recycling volume");
        match plugin.recycle(&volume, &context).await {
            Ok(()) => {
                tracing::info!("volume recycled");
                self.note(
                    volume.as_ref(),
                    reasons::VOLUME_RECYCLED,
                    "Volume recycled".to_string(),
                );
                let mut unbind = PvPlan::default();
                self.unbind_volume(&mut unbind, &volume)?;
                self.carry_out(unbind).await?;
                // Only now: until the volume is Available, the plugin's
                // proof of the scrub must stay for a retry to find.
                if let Err(error) = plugin.finish_recycle(&volume, &context).await {
                    tracing::warn!(%error, "cleaning up after the recycle failed");
                }
                Ok(())
            }
            Err(error) => {
                tracing::warn!(%error, "recycling failed");
                self.fail_volume(
                    &volume,
                    reasons::VOLUME_FAILED_RECYCLE,
                    format!("Recycle failed: {error}"),
                )
                .await?;
                Err(Error::Plugin {
                    action: format!("recycling volume {name:?}"),
                    source: error,
                })
            }
        }
    }

    /// The running pods (`ns/name`, sorted) that mount the claim the volume
    /// was bound to. Ignored when a claim of that name exists again: the pods
    /// then use the new claim, not this volume.
    fn pods_using_old_claim(&self, volume: &PersistentVolume) -> Vec<String> {
        let Some(key) = claim_ref_key(volume) else {
            return vec![];
        };
        if self.cache.claim(&key).is_some() {
            return vec![];
        }
        let mut users: Vec<String> = self
            .active_pods_using(&key)
            .iter()
            .map(|pod| {
                format!(
                    "{}/{}",
                    key.namespace,
                    pod.metadata.name.as_deref().unwrap_or("")
                )
            })
            .collect();
        users.sort();
        users
    }
}
