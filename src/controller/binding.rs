//! Binding and unbinding: the four binding writes in their fixed order, and
//! the reverse operation for a volume whose claim went elsewhere.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::events::EventType;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::Controller;
use super::writes::claim_phase;
use crate::constants::{
    ANN_BIND_COMPLETED, ANN_BOUND_BY_CONTROLLER, ANN_PRE_RESIZE_CAPACITY, ANN_VALUE_YES,
};
use crate::error::{Error, Result};
use crate::events::reference_of;
use crate::keys::{ClaimKey, VolumeName};
use crate::objects::{claim_reference, has_annotation, is_volume_bound_to_claim};
use crate::quantity::Amount;

/// Phase names, as the API spells them.
pub(super) mod phase {
    pub const PENDING: &str = "Pending";
    pub const AVAILABLE: &str = "Available";
    pub const BOUND: &str = "Bound";
    pub const RELEASED: &str = "Released";
    pub const FAILED: &str = "Failed";
    pub const LOST: &str = "Lost";
}

impl Controller {
    /// Binds a volume and a claim with the four writes, volume first, and
    /// stops at the first failure (the next sync completes the rest).
    #[tracing::instrument(skip_all, fields(volume = %VolumeName::of(volume), claim = %ClaimKey::of(claim)))]
    pub(super) async fn bind(
        &self,
        volume: &Arc<PersistentVolume>,
        claim: &Arc<PersistentVolumeClaim>,
    ) -> Result<()> {
        let volume = self.bind_volume_to_claim(volume, claim).await?;
        let volume = self.set_volume_phase(&volume, phase::BOUND, None).await?;
        let claim = self.bind_claim_to_volume(claim, &volume).await?;
        self.set_claim_status(&claim, phase::BOUND, Some(&volume))
            .await?;
        tracing::debug!("binding complete");
        Ok(())
    }

    /// Step 1: the volume's claimRef (and bound-by-controller, unless a user
    /// pre-bound the volume to this claim).
    async fn bind_volume_to_claim(
        &self,
        volume: &Arc<PersistentVolume>,
        claim: &PersistentVolumeClaim,
    ) -> Result<Arc<PersistentVolume>> {
        let mut changed = PersistentVolume::clone(volume);
        let mut dirty = false;
        let pre_bound_here = is_volume_bound_to_claim(volume, claim);
        let spec = changed.spec.get_or_insert_with(Default::default);
        let reference_matches = spec.claim_ref.as_ref().is_some_and(|r| {
            r.name == claim.metadata.name
                && r.namespace == claim.metadata.namespace
                && r.uid == claim.metadata.uid
        });
        if !reference_matches {
            spec.claim_ref = Some(claim_reference(claim));
            dirty = true;
        }
        if !pre_bound_here && !has_annotation(&changed.metadata, ANN_BOUND_BY_CONTROLLER) {
            set_annotation(&mut changed.metadata.annotations, ANN_BOUND_BY_CONTROLLER);
            dirty = true;
        }
        if !dirty {
            return Ok(Arc::clone(volume));
        }
        let stored = self.update_volume(&changed).await?;
        tracing::info!("volume reserved for claim");
        Ok(stored)
    }

    /// Step 3: the claim's volumeName and annotations.
    async fn bind_claim_to_volume(
        &self,
        claim: &Arc<PersistentVolumeClaim>,
        volume: &PersistentVolume,
    ) -> Result<Arc<PersistentVolumeClaim>> {
        let volume_name = VolumeName::of(volume).0;
        let mut changed = PersistentVolumeClaim::clone(claim);
        let mut dirty = false;
        let spec = changed.spec.get_or_insert_with(Default::default);
        if spec.volume_name.as_deref() != Some(volume_name.as_str()) {
            spec.volume_name = Some(volume_name);
            dirty = true;
            if !has_annotation(&changed.metadata, ANN_BOUND_BY_CONTROLLER) {
                set_annotation(&mut changed.metadata.annotations, ANN_BOUND_BY_CONTROLLER);
            }
        }
        if !has_annotation(&changed.metadata, ANN_BIND_COMPLETED) {
            set_annotation(&mut changed.metadata.annotations, ANN_BIND_COMPLETED);
            dirty = true;
        }
        if !dirty {
            return Ok(Arc::clone(claim));
        }
        self.update_claim(&changed).await
    }

    /// Sets a claim's phase, and its access modes and capacity from the
    /// volume (or clears them without one). Capacity is only copied when the
    /// claim becomes Bound, so a resized claim keeps what it reports.
    pub(super) async fn set_claim_status(
        &self,
        claim: &Arc<PersistentVolumeClaim>,
        new_phase: &str,
        volume: Option<&PersistentVolume>,
    ) -> Result<Arc<PersistentVolumeClaim>> {
        let old_phase = claim_phase(claim).to_string();
        let mut changed = PersistentVolumeClaim::clone(claim);
        let status = changed.status.get_or_insert_with(Default::default);
        let mut dirty = false;
        if old_phase != new_phase {
            status.phase = Some(new_phase.to_string());
            dirty = true;
        }
        match volume {
            None => {
                if status.access_modes.is_some() {
                    status.access_modes = None;
                    dirty = true;
                }
                if status.capacity.is_some() {
                    status.capacity = None;
                    dirty = true;
                }
                if status.current_volume_attributes_class_name.is_some() {
                    status.current_volume_attributes_class_name = None;
                    dirty = true;
                }
            }
            Some(volume) => {
                let spec = volume.spec.as_ref();
                let modes = spec.and_then(|s| s.access_modes.clone());
                if status.access_modes != modes {
                    status.access_modes = modes;
                    dirty = true;
                }
                if old_phase != new_phase {
                    let capacity = bound_claim_capacity(volume)?;
                    let current = status.capacity.as_ref().and_then(|c| c.get("storage"));
                    if !same_quantity(current, Some(&capacity)) {
                        status.capacity = Some(BTreeMap::from([("storage".to_string(), capacity)]));
                        dirty = true;
                    }
                }
                let class = spec.and_then(|s| s.volume_attributes_class_name.clone());
                if status.current_volume_attributes_class_name != class {
                    status.current_volume_attributes_class_name = class;
                    dirty = true;
                }
            }
        }
        if !dirty {
            tracing::debug!(phase = new_phase, "claim status already set");
            return Ok(Arc::clone(claim));
        }
        let stored = self.update_claim_status(&changed).await?;
        if old_phase != new_phase {
            tracing::info!(phase = new_phase, "claim entered phase");
        }
        Ok(stored)
    }

    /// Sets a claim's phase and, only when the phase changes, records an event.
    pub(super) async fn set_claim_phase_with_event(
        &self,
        claim: &Arc<PersistentVolumeClaim>,
        new_phase: &str,
        event_type: EventType,
        reason: &str,
        message: &str,
    ) -> Result<()> {
        if claim_phase(claim) == new_phase {
            return Ok(());
        }
        let stored = self.set_claim_status(claim, new_phase, None).await?;
        self.event(
            reference_of(stored.as_ref()),
            event_type,
            reason,
            message.to_string(),
        )
        .await;
        Ok(())
    }

    /// Undoes a binding from the volume side: a binding the controller made is
    /// removed; a user's pre-binding stays, only the claim UID is cleared.
    /// The volume becomes Available again.
    #[tracing::instrument(skip_all, fields(volume = %VolumeName::of(volume)))]
    pub(super) async fn unbind_volume(&self, volume: &Arc<PersistentVolume>) -> Result<()> {
        let mut changed = PersistentVolume::clone(volume);
        if has_annotation(&changed.metadata, ANN_BOUND_BY_CONTROLLER) {
            if let Some(spec) = changed.spec.as_mut() {
                spec.claim_ref = None;
            }
            if let Some(annotations) = changed.metadata.annotations.as_mut() {
                annotations.remove(ANN_BOUND_BY_CONTROLLER);
                if annotations.is_empty() {
                    changed.metadata.annotations = None;
                }
            }
        } else if let Some(reference) = changed.spec.as_mut().and_then(|s| s.claim_ref.as_mut()) {
            reference.uid = None;
        }
        let stored = self.update_volume(&changed).await?;
        tracing::info!("volume released from its claim");
        self.set_volume_phase(&stored, phase::AVAILABLE, None)
            .await?;
        self.retry_unmatched();
        Ok(())
    }
}

/// The capacity a claim reports once bound: the volume's, or the size before a
/// resize when the volume records one.
fn bound_claim_capacity(volume: &PersistentVolume) -> Result<Quantity> {
    let capacity = volume
        .spec
        .as_ref()
        .and_then(|s| s.capacity.as_ref())
        .and_then(|c| c.get("storage"))
        .cloned()
        .ok_or_else(|| {
            Error::Inconsistent(format!(
                "PersistentVolume {:?} is without a storage capacity",
                VolumeName::of(volume).0
            ))
        })?;
    let pre_resize = volume
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ANN_PRE_RESIZE_CAPACITY))
        .filter(|value| Amount::parse(value).is_ok());
    Ok(pre_resize
        .map(|value| Quantity(value.clone()))
        .unwrap_or(capacity))
}

/// Whether two quantities are the same amount (not the same spelling).
fn same_quantity(a: Option<&Quantity>, b: Option<&Quantity>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => match (Amount::from_quantity(a), Amount::from_quantity(b)) {
            (Ok(x), Ok(y)) => x == y,
            _ => a.0 == b.0,
        },
        (None, None) => true,
        _ => false,
    }
}

/// Sets a controller annotation to `yes`.
pub(super) fn set_annotation(annotations: &mut Option<BTreeMap<String, String>>, key: &str) {
    annotations
        .get_or_insert_with(BTreeMap::new)
        .insert(key.to_string(), ANN_VALUE_YES.to_string());
}
