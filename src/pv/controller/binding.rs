//! Binding and unbinding: the plan of the four binding writes in their
//! fixed order, and of the reverse for a volume whose claim went elsewhere.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::runtime::events::EventType;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use quantity::Amount;

use super::Controller;
use super::changes::{ClaimChange, PvPlan, VolumeChange};
use super::writes::{Edit, Part};
use crate::pv::constants::{
    ANN_BIND_COMPLETED, ANN_BOUND_BY_CONTROLLER, ANN_PRE_RESIZE_CAPACITY, ANN_VALUE_YES,
};
use crate::pv::error::{Error, Result};
use crate::pv::keys::VolumeName;
use crate::pv::objects::{
    ClaimPhase, VolumePhase, claim_phase, claim_reference, has_annotation, is_volume_bound_to_claim,
};
use crate::pv::plugins::recycler::ANN_POD_UID as ANN_RECYCLER_POD_UID;

impl Controller {
    /// Plans the four binding writes, volume first (the next sync completes
    /// whatever a failure leaves undone). Each write re-checks on the
    /// newest copy that the binding still holds, so a volume taken by
    /// another claim meanwhile is never given to this one.
    pub(super) fn bind(
        &self,
        plan: &mut PvPlan,
        volume: &Arc<PersistentVolume>,
        claim: &Arc<PersistentVolumeClaim>,
    ) -> Result<()> {
        let volume = plan.update(volume, Part::Spec, VolumeChange::Reserve(Arc::clone(claim)))?;
        let claim = plan.update(
            claim,
            Part::Spec,
            ClaimChange::BindTo {
                uid: claim.metadata.uid.clone(),
                volume: VolumeName::of(&volume).as_str().to_owned(),
            },
        )?;
        let volume = self.set_volume_phase(plan, &volume, VolumePhase::Bound, None)?;
        self.set_claim_status(plan, &claim, ClaimPhase::Bound, Some(&volume))?;
        Ok(())
    }

    /// Plans a claim's phase, and its access modes and capacity from the
    /// volume (or clears them without one); returns the claim as the plan
    /// leaves it. Capacity is only copied when the claim becomes Bound, so
    /// a resized claim keeps what it reports.
    pub(super) fn set_claim_status(
        &self,
        plan: &mut PvPlan,
        basis: &Arc<PersistentVolumeClaim>,
        phase: ClaimPhase,
        volume: Option<&Arc<PersistentVolume>>,
    ) -> Result<Arc<PersistentVolumeClaim>> {
        // A volume without a readable capacity is an error only when the
        // claim is about to take it over.
        let capacity = match volume {
            Some(volume) if claim_phase(basis) != Some(phase) => {
                Some(bound_claim_capacity(volume)?)
            }
            _ => None,
        };
        let change = ClaimChange::Status {
            phase,
            volume: volume.cloned(),
            capacity,
            basis: Arc::clone(basis),
        };
        Ok(plan.update(basis, Part::Status, change)?)
    }

    /// Plans a claim's phase and, only when the phase changes, an event.
    pub(super) fn set_claim_phase_with_event(
        &self,
        plan: &mut PvPlan,
        claim: &Arc<PersistentVolumeClaim>,
        phase: ClaimPhase,
        event_type: EventType,
        reason: &str,
        message: &str,
    ) -> Result<()> {
        if claim_phase(claim) == Some(phase) {
            return Ok(());
        }
        let changed = self.set_claim_status(plan, claim, phase, None)?;
        plan.event(changed.as_ref(), event_type, reason, message.to_string());
        Ok(())
    }

    /// Plans the undoing of a binding from the volume side: a binding the
    /// controller made is removed; a user's pre-binding stays, only the
    /// claim UID is cleared. The volume becomes Available again.
    pub(super) fn unbind_volume(
        &self,
        plan: &mut PvPlan,
        volume: &Arc<PersistentVolume>,
    ) -> Result<()> {
        let unbound = plan.update(volume, Part::Spec, VolumeChange::Unbind(Arc::clone(volume)))?;
        self.make_available(plan, &unbound).map(drop)
    }
}

/// Step 2 of a bind on the newest copy of the claim: volumeName and the
/// binding annotations, unless the claim was re-created (another `uid`) or
/// names another volume.
pub(super) fn bind_claim_edit(
    claim: &mut PersistentVolumeClaim,
    uid: Option<&str>,
    volume_name: &str,
) -> Edit {
    if claim.metadata.uid.as_deref() != uid {
        return Edit::Refused("the claim was re-created".to_string());
    }
    let mut edit = Edit::Unchanged;
    let spec = claim.spec.get_or_insert_with(Default::default);
    match spec.volume_name.as_deref() {
        Some(name) if name == volume_name => {}
        Some(name) if !name.is_empty() => {
            return Edit::Refused(format!("it now names volume {name:?}"));
        }
        _ => {
            spec.volume_name = Some(volume_name.to_string());
            edit = Edit::Changed;
            if !has_annotation(&claim.metadata, ANN_BOUND_BY_CONTROLLER) {
                set_annotation(&mut claim.metadata.annotations, ANN_BOUND_BY_CONTROLLER);
            }
        }
    }
    if !has_annotation(&claim.metadata, ANN_BIND_COMPLETED) {
        set_annotation(&mut claim.metadata.annotations, ANN_BIND_COMPLETED);
        edit = Edit::Changed;
    }
    edit
}

/// The reservation of step 1 on the newest copy of the volume.
pub(super) fn reserve_edit(volume: &mut PersistentVolume, claim: &PersistentVolumeClaim) -> Edit {
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
pub(super) fn unbind_edit(volume: &mut PersistentVolume) -> Edit {
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
pub(super) fn claim_status_edit(
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
