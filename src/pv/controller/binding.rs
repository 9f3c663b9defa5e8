//! Binding and unbinding: the four binding writes in their fixed order, and
//! the reverse operation for a volume whose claim went elsewhere.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::runtime::events::EventType;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use quantity::Amount;

use super::Controller;
use super::writes::{Edit, Part, claim_in_phase, same_claim_binding, same_claim_ref};
use crate::pv::constants::{
    ANN_BIND_COMPLETED, ANN_BOUND_BY_CONTROLLER, ANN_PRE_RESIZE_CAPACITY, ANN_VALUE_YES,
};
use crate::pv::error::{Error, Result};
use crate::pv::keys::VolumeName;
use crate::pv::objects::{
    ClaimPhase, VolumePhase, claim_phase, claim_reference, has_annotation, is_volume_bound_to_claim,
};
use crate::pv::plugins::recycler::ANN_POD_UID as ANN_RECYCLER_POD_UID;
use crate::runtime::keys::ObjectKey;

impl Controller {
    /// Binds a volume and a claim with the four writes, volume first, and
    /// stops at the first failure (the next sync completes the rest). Each
    /// write re-checks on the newest copy that the binding still holds, so a
    /// volume taken by another claim meanwhile is never given to this one.
    #[tracing::instrument(skip_all, fields(volume = %VolumeName::of(volume), claim = %ObjectKey::of(claim.as_ref())))]
    pub(super) async fn bind(
        &self,
        volume: &Arc<PersistentVolume>,
        claim: &Arc<PersistentVolumeClaim>,
    ) -> Result<()> {
        let volume = self.bind_volume_to_claim(volume, claim).await?;
        let claim = self.bind_claim_to_volume(claim, &volume).await?;
        let volume = self
            .set_volume_phase(&volume, VolumePhase::Bound, None)
            .await?;
        self.set_claim_status(&claim, ClaimPhase::Bound, Some(&volume))
            .await?;
        tracing::debug!("binding complete");
        Ok(())
    }

    /// Step 1: the volume's claimRef (and bound-by-controller, unless a user
    /// pre-bound the volume to this claim). Refused when the newest copy of
    /// the volume belongs to another claim.
    async fn bind_volume_to_claim(
        &self,
        volume: &Arc<PersistentVolume>,
        claim: &PersistentVolumeClaim,
    ) -> Result<Arc<PersistentVolume>> {
        let mut wrote = false;
        let stored = self
            .write_volume(volume, Part::Spec, |volume| {
                let edit = reserve_edit(volume, claim);
                wrote = edit == Edit::Changed;
                edit
            })
            .await?;
        if wrote {
            tracing::info!("volume reserved for claim");
        }
        Ok(stored)
    }

    /// Step 2: the claim's volumeName and annotations. Refused when the
    /// newest copy is another incarnation of the claim or names another
    /// volume.
    async fn bind_claim_to_volume(
        &self,
        claim: &Arc<PersistentVolumeClaim>,
        volume: &PersistentVolume,
    ) -> Result<Arc<PersistentVolumeClaim>> {
        let volume_name = VolumeName::of(volume).as_str().to_owned();
        self.write_claim(claim, Part::Spec, |changed| {
            if changed.metadata.uid != claim.metadata.uid {
                return Edit::Refused("the claim was re-created".to_string());
            }
            let mut edit = Edit::Unchanged;
            let spec = changed.spec.get_or_insert_with(Default::default);
            match spec.volume_name.as_deref() {
                Some(name) if name == volume_name => {}
                Some(name) if !name.is_empty() => {
                    return Edit::Refused(format!("it now names volume {name:?}"));
                }
                _ => {
                    spec.volume_name = Some(volume_name);
                    edit = Edit::Changed;
                    if !has_annotation(&changed.metadata, ANN_BOUND_BY_CONTROLLER) {
                        set_annotation(&mut changed.metadata.annotations, ANN_BOUND_BY_CONTROLLER);
                    }
                }
            }
            if !has_annotation(&changed.metadata, ANN_BIND_COMPLETED) {
                set_annotation(&mut changed.metadata.annotations, ANN_BIND_COMPLETED);
                edit = Edit::Changed;
            }
            edit
        })
        .await
    }

    /// Sets a claim's phase, and its access modes and capacity from the
    /// volume (or clears them without one). Capacity is only copied when the
    /// claim becomes Bound, so a resized claim keeps what it reports.
    /// Refused when the claim's binding changed since `basis`.
    pub(super) async fn set_claim_status(
        &self,
        basis: &Arc<PersistentVolumeClaim>,
        new_phase: ClaimPhase,
        volume: Option<&PersistentVolume>,
    ) -> Result<Arc<PersistentVolumeClaim>> {
        // A volume without a readable capacity is an error only when the
        // claim is about to take it over.
        let capacity = match volume {
            Some(volume) if claim_phase(basis) != Some(new_phase) => {
                Some(bound_claim_capacity(volume)?)
            }
            _ => None,
        };
        let mut entered = false;
        let stored = self
            .write_claim(basis, Part::Status, |claim| {
                if !same_claim_binding(basis, claim) {
                    return Edit::Refused(format!(
                        "its binding changed before it could become {new_phase}"
                    ));
                }
                entered = !claim_in_phase(claim, new_phase);
                claim_status_edit(claim, new_phase, volume, capacity)
            })
            .await?;
        if entered {
            tracing::info!(phase = %new_phase, "claim entered phase");
        }
        Ok(stored)
    }

    /// Sets a claim's phase and, only when the phase changes, records an event.
    pub(super) async fn set_claim_phase_with_event(
        &self,
        claim: &Arc<PersistentVolumeClaim>,
        new_phase: ClaimPhase,
        event_type: EventType,
        reason: &str,
        message: &str,
    ) -> Result<()> {
        if claim_phase(claim) == Some(new_phase) {
            return Ok(());
        }
        let stored = self.set_claim_status(claim, new_phase, None).await?;
        self.record(stored.as_ref(), event_type, reason, message.to_string());
        Ok(())
    }

    /// Undoes a binding from the volume side: a binding the controller made is
    /// removed; a user's pre-binding stays, only the claim UID is cleared.
    /// The volume becomes Available again. Refused when the claimRef changed
    /// since `volume` was read.
    #[tracing::instrument(skip_all, fields(volume = %VolumeName::of(volume)))]
    pub(super) async fn unbind_volume(&self, volume: &Arc<PersistentVolume>) -> Result<()> {
        let stored = self
            .write_volume(volume, Part::Spec, |changed| {
                if !same_claim_ref(volume, changed) {
                    return Edit::Refused("its claimRef changed before the unbind".to_string());
                }
                unbind_edit(changed)
            })
            .await?;
        tracing::info!("volume released from its claim");
        self.make_available(&stored).await.map(drop)
    }
}

/// The reservation of step 1 on the newest copy of the volume.
fn reserve_edit(volume: &mut PersistentVolume, claim: &PersistentVolumeClaim) -> Edit {
    let has_claim_ref = volume.spec.as_ref().is_some_and(|s| s.claim_ref.is_some());
    let pre_bound_here = is_volume_bound_to_claim(volume, claim);
    if has_claim_ref && !pre_bound_here {
        return Edit::Refused("it is bound to another claim".to_string());
    }
    let mut edit = Edit::Unchanged;
    let spec = volume.spec.get_or_insert_with(Default::default);
    let reference_matches = spec.claim_ref.as_ref().is_some_and(|r| {
        r.name == claim.metadata.name
            && r.namespace == claim.metadata.namespace
            && r.uid == claim.metadata.uid
    });
    if !reference_matches {
        spec.claim_ref = Some(claim_reference(claim));
        edit = Edit::Changed;
    }
    if !pre_bound_here && !has_annotation(&volume.metadata, ANN_BOUND_BY_CONTROLLER) {
        set_annotation(&mut volume.metadata.annotations, ANN_BOUND_BY_CONTROLLER);
        edit = Edit::Changed;
    }
    edit
}

/// The unbind on the newest copy of the volume; the record of the
/// release's recycler pod goes with the binding.
fn unbind_edit(volume: &mut PersistentVolume) -> Edit {
    let recycler_recorded = remove_annotation(volume, ANN_RECYCLER_POD_UID);
    if has_annotation(&volume.metadata, ANN_BOUND_BY_CONTROLLER) {
        if let Some(spec) = volume.spec.as_mut() {
            spec.claim_ref = None;
        }
        remove_annotation(volume, ANN_BOUND_BY_CONTROLLER);
        return Edit::Changed;
    }
    match volume.spec.as_mut().and_then(|s| s.claim_ref.as_mut()) {
        Some(reference) if reference.uid.is_some() => {
            reference.uid = None;
            Edit::Changed
        }
        _ if recycler_recorded => Edit::Changed,
        _ => Edit::Unchanged,
    }
}

/// Removes the annotation `key` (and an annotation map left empty);
/// returns whether it was there.
fn remove_annotation(volume: &mut PersistentVolume, key: &str) -> bool {
    let Some(annotations) = volume.metadata.annotations.as_mut() else {
        return false;
    };
    let removed = annotations.remove(key).is_some();
    if annotations.is_empty() {
        volume.metadata.annotations = None;
    }
    removed
}

/// The status edit of [`Controller::set_claim_status`] on the newest copy.
fn claim_status_edit(
    claim: &mut PersistentVolumeClaim,
    new_phase: ClaimPhase,
    volume: Option<&PersistentVolume>,
    capacity: Option<Quantity>,
) -> Edit {
    let phase_changes = claim_phase(claim) != Some(new_phase);
    let status = claim.status.get_or_insert_with(Default::default);
    let mut dirty = false;
    if phase_changes {
        status.phase = Some(new_phase.as_str().to_string());
        dirty = true;
    }
    match volume {
        None => {
            dirty |= status.access_modes.take().is_some();
            dirty |= status.capacity.take().is_some();
            dirty |= status.current_volume_attributes_class_name.take().is_some();
        }
        Some(volume) => {
            let spec = volume.spec.as_ref();
            let modes = spec.and_then(|s| s.access_modes.clone());
            if status.access_modes != modes {
                status.access_modes = modes;
                dirty = true;
            }
            if let Some(capacity) = capacity.filter(|_| phase_changes) {
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
    if dirty {
        Edit::Changed
    } else {
        Edit::Unchanged
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
                VolumeName::of(volume).as_str().to_owned()
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
