//! The changes the controller's plans make to volumes and claims: the
//! four binding writes in their fixed order, the phases, the unbind, the
//! default class and the annotations and finalizers kept in line. Each is
//! an edit of named fields (a function on the object that says whether it
//! changed anything), made once on the copy the decision read when the
//! plan is made; the executor sends what changed, conditional on that copy.
//! The decisions and the long operations plan with these alike.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use quantity::Amount;

use super::PvPlan;
pub(crate) use super::finalizers::storage_already_deleted;
use super::finalizers::{anneal_claim_edit, anneal_volume_edit, storage_deleted_edit};
use crate::pv::error::{Error, Result};
use crate::pv::keys::VolumeName;
use crate::pv::objects::{
    ClaimPhase, VolumePhase, claim_has_class, claim_phase, claim_reference, has_annotation,
    is_volume_bound_to_claim, volume_phase,
};
use crate::runtime::events::EventType;
use crate::runtime::keys::ObjectKey;
use crate::runtime::kinds::Part;
use k8s_names::{
    ANN_BIND_COMPLETED, ANN_BOUND_BY_CONTROLLER, ANN_PRE_RESIZE_CAPACITY, ANN_RECYCLER_POD_UID,
    ANN_VALUE_YES,
};

/// Step 1 of a bind: the claimRef names the claim, and bound-by-controller
/// is set unless a user pre-bound the volume to it.
fn reserve_edit(volume: &mut PersistentVolume, claim: &PersistentVolumeClaim) -> bool {
    let pre_bound_here = is_volume_bound_to_claim(volume, claim);
    let mut changed = false;
    let spec = volume.spec.get_or_insert_with(Default::default);
    let reference_matches = spec.claim_ref.as_ref().is_some_and(|r| {
        r.name == claim.metadata.name
            && r.namespace == claim.metadata.namespace
            && r.uid == claim.metadata.uid
    });
    if !reference_matches {
        spec.claim_ref = Some(claim_reference(claim));
        changed = true;
    }
    if !pre_bound_here && !has_annotation(&volume.metadata, ANN_BOUND_BY_CONTROLLER) {
        set_annotation(&mut volume.metadata.annotations, ANN_BOUND_BY_CONTROLLER);
        changed = true;
    }
    changed
}

/// Step 2 of a bind: volumeName and the binding annotations.
fn bind_claim_edit(claim: &mut PersistentVolumeClaim, volume_name: &str) -> bool {
    let mut changed = false;
    let spec = claim.spec.get_or_insert_with(Default::default);
    if spec.volume_name.as_deref() != Some(volume_name) {
        spec.volume_name = Some(volume_name.to_string());
        changed = true;
        if !has_annotation(&claim.metadata, ANN_BOUND_BY_CONTROLLER) {
            set_annotation(&mut claim.metadata.annotations, ANN_BOUND_BY_CONTROLLER);
        }
    }
    if !has_annotation(&claim.metadata, ANN_BIND_COMPLETED) {
        set_annotation(&mut claim.metadata.annotations, ANN_BIND_COMPLETED);
        changed = true;
    }
    changed
}

/// The unbind: a binding the controller made is removed; a user's
/// pre-binding stays, only the claim UID is cleared. The record of the
/// release's recycler pod goes with the binding.
fn unbind_edit(volume: &mut PersistentVolume) -> bool {
    let recycler_recorded = remove_annotation(volume, ANN_RECYCLER_POD_UID);
    if has_annotation(&volume.metadata, ANN_BOUND_BY_CONTROLLER) {
        if let Some(spec) = volume.spec.as_mut() {
            spec.claim_ref = None;
        }
        remove_annotation(volume, ANN_BOUND_BY_CONTROLLER);
        return true;
    }
    match volume.spec.as_mut().and_then(|s| s.claim_ref.as_mut()) {
        Some(reference) if reference.uid.is_some() => {
            reference.uid = None;
            true
        }
        _ => recycler_recorded,
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

/// A claim's phase, with access modes and capacity from the volume (or
/// cleared without one).
fn claim_status_edit(
    claim: &mut PersistentVolumeClaim,
    new_phase: ClaimPhase,
    volume: Option<&PersistentVolume>,
    capacity: Option<Quantity>,
) -> bool {
    let phase_changes = claim_phase(claim) != Some(new_phase);
    let status = claim.status.get_or_insert_with(Default::default);
    let mut changed = false;
    if phase_changes {
        status.phase = Some(new_phase.as_str().to_string());
        changed = true;
    }
    match volume {
        None => {
            changed |= status.access_modes.take().is_some();
            changed |= status.capacity.take().is_some();
            changed |= status.current_volume_attributes_class_name.take().is_some();
        }
        Some(volume) => {
            let spec = volume.spec.as_ref();
            let modes = spec.and_then(|s| s.access_modes.clone());
            if status.access_modes != modes {
                status.access_modes = modes;
                changed = true;
            }
            if let Some(capacity) = capacity.filter(|_| phase_changes) {
                let current = status.capacity.as_ref().and_then(|c| c.get("storage"));
                if !same_quantity(current, Some(&capacity)) {
                    status.capacity = Some(BTreeMap::from([("storage".to_string(), capacity)]));
                    changed = true;
                }
            }
            let class = spec.and_then(|s| s.volume_attributes_class_name.clone());
            if status.current_volume_attributes_class_name != class {
                status.current_volume_attributes_class_name = class;
                changed = true;
            }
        }
    }
    changed
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
pub(crate) fn set_annotation(annotations: &mut Option<BTreeMap<String, String>>, key: &str) {
    annotations
        .get_or_insert_with(BTreeMap::new)
        .insert(key.to_string(), ANN_VALUE_YES.to_string());
}

/// A volume's phase and status message.
fn volume_phase_edit(
    volume: &mut PersistentVolume,
    phase: VolumePhase,
    message: Option<String>,
) -> bool {
    if volume_phase(volume) == Some(phase) {
        return false;
    }
    let status = volume.status.get_or_insert_with(Default::default);
    status.phase = Some(phase.as_str().to_string());
    status.message = message;
    true
}

/// Whether a plan step was added: `after` is not `before` itself.
pub(crate) fn added<K>(before: &Arc<K>, after: &Arc<K>) -> bool {
    !Arc::ptr_eq(before, after)
}

/// Plans a volume's `migrated-to` annotation and deletion finalizers in
/// line with its provisioner and policy; returns the volume as the plan
/// leaves it.
pub(crate) fn anneal_volume(
    plan: &mut PvPlan,
    volume: &Arc<PersistentVolume>,
) -> Arc<PersistentVolume> {
    plan.update(
        volume,
        Part::Spec,
        "migrated-to and finalizers",
        anneal_volume_edit,
    )
}

/// Plans a claim's `migrated-to` annotation in line with the provisioner
/// it was handed to; returns the claim as the plan leaves it.
pub(crate) fn anneal_claim(
    plan: &mut PvPlan,
    claim: &Arc<PersistentVolumeClaim>,
) -> Arc<PersistentVolumeClaim> {
    plan.update(claim, Part::Spec, "migrated-to", anneal_claim_edit)
}

/// Plans the four binding writes, volume first, the two objects taking
/// turns (the next sync completes whatever a failure leaves undone). Each
/// write is conditional on the copy decided on, so a volume that changed
/// meanwhile (taken by another claim, shrunk, re-created) is never bound
/// by this plan: the claim is decided again.
pub(crate) fn bind(
    plan: &mut PvPlan,
    volume: &Arc<PersistentVolume>,
    claim: &Arc<PersistentVolumeClaim>,
) -> Result<()> {
    let label = format!("claimRef {}", ObjectKey::of(claim.as_ref()));
    let volume = plan.update(volume, Part::Spec, label, |v| reserve_edit(v, claim));
    let name = VolumeName::of(&volume).as_str().to_owned();
    let claim = plan.update(claim, Part::Spec, format!("volumeName {name}"), |c| {
        bind_claim_edit(c, &name)
    });
    let volume = set_volume_phase(plan, &volume, VolumePhase::Bound, None);
    set_claim_status(plan, &claim, ClaimPhase::Bound, Some(&volume))?;
    Ok(())
}

/// Plans a volume's phase (and message) when it differs; returns the
/// volume as the plan leaves it.
pub(crate) fn set_volume_phase(
    plan: &mut PvPlan,
    basis: &Arc<PersistentVolume>,
    phase: VolumePhase,
    message: Option<String>,
) -> Arc<PersistentVolume> {
    let label = match &message {
        None => format!("phase {phase}"),
        Some(message) => format!("phase {phase} ({message})"),
    };
    plan.update(basis, Part::Status, label, |v| {
        volume_phase_edit(v, phase, message)
    })
}

/// Plans a volume Available (the store tells the claims waiting for a
/// volume when this frees it); returns whether the plan writes.
pub(crate) fn make_available(plan: &mut PvPlan, basis: &Arc<PersistentVolume>) -> bool {
    let available = set_volume_phase(plan, basis, VolumePhase::Available, None);
    added(basis, &available)
}

/// Plans a volume's phase and, only when the phase changes, an event;
/// the message also goes into the volume's status.
pub(crate) fn set_volume_phase_with_event(
    plan: &mut PvPlan,
    basis: &Arc<PersistentVolume>,
    phase: VolumePhase,
    event_type: EventType,
    reason: &str,
    message: String,
) -> Arc<PersistentVolume> {
    let changed = set_volume_phase(plan, basis, phase, Some(message.clone()));
    if added(basis, &changed) {
        plan.event(changed.as_ref(), event_type, reason, message);
    }
    changed
}

/// Plans a claim's phase, and its access modes and capacity from the
/// volume (or clears them without one); returns the claim as the plan
/// leaves it. Capacity is only copied when the claim becomes Bound, so a
/// resized claim keeps what it reports.
pub(crate) fn set_claim_status(
    plan: &mut PvPlan,
    basis: &Arc<PersistentVolumeClaim>,
    phase: ClaimPhase,
    volume: Option<&Arc<PersistentVolume>>,
) -> Result<Arc<PersistentVolumeClaim>> {
    // A volume without a readable capacity is an error only when the
    // claim is about to take it over.
    let capacity = match volume {
        Some(volume) if claim_phase(basis) != Some(phase) => Some(bound_claim_capacity(volume)?),
        _ => None,
    };
    Ok(
        plan.update(basis, Part::Status, format!("phase {phase}"), |c| {
            claim_status_edit(c, phase, volume.map(AsRef::as_ref), capacity)
        }),
    )
}

/// Plans a claim's phase and, only when the phase changes, an event.
pub(crate) fn set_claim_phase_with_event(
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
    let changed = set_claim_status(plan, claim, phase, None)?;
    plan.event(changed.as_ref(), event_type, reason, message.to_string());
    Ok(())
}

/// Plans the undoing of a binding from the volume side (see
/// [`unbind_edit`]); the volume becomes Available again.
pub(crate) fn unbind_volume(plan: &mut PvPlan, volume: &Arc<PersistentVolume>) {
    let unbound = plan.update(volume, Part::Spec, "unbound", unbind_edit);
    make_available(plan, &unbound);
}

/// Plans the record that a volume's storage is gone: the controller's
/// finalizer removed and, on a volume that will linger (being deleted, or
/// held by other finalizers), the mark that says so, in one write.
pub(crate) fn mark_storage_deleted(plan: &mut PvPlan, volume: &Arc<PersistentVolume>) {
    plan.update(volume, Part::Spec, "storage deleted", storage_deleted_edit);
}

/// Plans the cluster's default class `class` for a claim without any.
pub(crate) fn default_class(plan: &mut PvPlan, claim: &Arc<PersistentVolumeClaim>, class: &str) {
    plan.update(
        claim,
        Part::Spec,
        format!("storageClassName {class}"),
        |c| {
            if claim_has_class(c) {
                return false;
            }
            c.spec
                .get_or_insert_with(Default::default)
                .storage_class_name = Some(class.to_string());
            true
        },
    );
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
