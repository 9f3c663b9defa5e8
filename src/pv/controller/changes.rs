//! The changes the controller's plans make to volumes and claims: planned
//! by the decisions (the four binding writes in their fixed order, the
//! phases, the unbind) and kept as data with the edits that make them;
//! each names the fields it sets and re-checks, on the newest copy when
//! its step runs, what the decision assumed.

use std::fmt;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use std::collections::BTreeMap;

use quantity::Amount;

use super::finalizers::{anneal_claim_edit, anneal_volume_edit};
use crate::pv::objects::{
    ClaimPhase, VolumePhase, claim_has_class, claim_phase, claim_reference, has_annotation,
    is_volume_bound_to_claim, volume_phase,
};
use crate::runtime::keys::ObjectKey;
use crate::runtime::plan::{Change, Plan};
use crate::runtime::write::Edit;
use k8s_names::{
    ANN_BIND_COMPLETED, ANN_BOUND_BY_CONTROLLER, ANN_PRE_RESIZE_CAPACITY, ANN_RECYCLER_POD_UID,
    ANN_VALUE_YES,
};

use super::{Controller, Next};
use crate::pv::error::{Error, Result};
use crate::pv::keys::VolumeName;
use crate::runtime::events::EventType;
use crate::runtime::kinds::Part;

/// The plan of one decision of the controller.
pub(crate) type PvPlan = Plan<Next>;

/// A change of a volume.
pub(crate) enum VolumeChange {
    /// Step 1 of a bind: the claimRef names the claim (and
    /// bound-by-controller is set, unless a user pre-bound the volume to
    /// it). Refused when the volume belongs to another claim.
    Reserve(Arc<PersistentVolumeClaim>),
    /// The phase, and its message. Refused when the claimRef is no longer
    /// the one of the copy decided on.
    Phase {
        /// The phase.
        phase: VolumePhase,
        /// The status message (cleared when `None`).
        message: Option<String>,
        /// The copy the phase was decided on.
        basis: Arc<PersistentVolume>,
    },
    /// The binding undone from the volume's side (and the release's
    /// recycler pod forgotten). Refused when the claimRef changed since
    /// the copy decided on.
    Unbind(Arc<PersistentVolume>),
    /// `migrated-to` and the deletion finalizers brought in line.
    Anneal,
}

impl Change<PersistentVolume> for VolumeChange {
    fn apply(&self, newest: &mut PersistentVolume) -> Edit {
        match self {
            Self::Reserve(claim) => reserve_edit(newest, claim),
            Self::Phase {
                phase,
                message,
                basis,
            } => set_phase_edit(basis, newest, *phase, message.clone()),
            Self::Unbind(basis) => {
                if !same_claim_ref(basis, newest) {
                    return Edit::Refused("its claimRef changed before the unbind".to_string());
                }
                unbind_edit(newest)
            }
            Self::Anneal => anneal_volume_edit(newest),
        }
    }
}

impl fmt::Display for VolumeChange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Reserve(claim) => write!(f, "claimRef {}", ObjectKey::of(claim.as_ref())),
            Self::Phase {
                phase,
                message: None,
                ..
            } => write!(f, "phase {phase}"),
            Self::Phase {
                phase,
                message: Some(message),
                ..
            } => write!(f, "phase {phase} ({message})"),
            Self::Unbind(_) => f.write_str("unbound"),
            Self::Anneal => f.write_str("migrated-to and finalizers"),
        }
    }
}

/// A change of a claim.
pub(crate) enum ClaimChange {
    /// Step 2 of a bind: volumeName and the binding annotations. Refused
    /// when the claim was re-created or names another volume.
    BindTo {
        /// The UID of the claim decided on.
        uid: Option<String>,
        /// The volume.
        volume: String,
    },
    /// The phase, with access modes and capacity from the volume (or
    /// cleared without one). Refused when the claim's binding changed
    /// since the copy decided on.
    Status {
        /// The phase.
        phase: ClaimPhase,
        /// The volume the claim is bound to, if any.
        volume: Option<Arc<PersistentVolume>>,
        /// The capacity to report, when the claim becomes Bound.
        capacity: Option<Quantity>,
        /// The copy the phase was decided on.
        basis: Arc<PersistentVolumeClaim>,
    },
    /// The cluster's default StorageClass, for a claim without any class.
    DefaultClass(String),
    /// `migrated-to` brought in line with the claim's provisioner.
    Anneal,
}

impl Change<PersistentVolumeClaim> for ClaimChange {
    fn apply(&self, newest: &mut PersistentVolumeClaim) -> Edit {
        match self {
            Self::BindTo { uid, volume } => bind_claim_edit(newest, uid.as_deref(), volume),
            Self::Status {
                phase,
                volume,
                capacity,
                basis,
            } => {
                if !same_claim_binding(basis, newest) {
                    return Edit::Refused(format!(
                        "its binding changed before it could become {phase}"
                    ));
                }
                claim_status_edit(newest, *phase, volume.as_deref(), capacity.clone())
            }
            Self::DefaultClass(class) => {
                if claim_has_class(newest) {
                    return Edit::Unchanged;
                }
                newest
                    .spec
                    .get_or_insert_with(Default::default)
                    .storage_class_name = Some(class.clone());
                Edit::Changed
            }
            Self::Anneal => anneal_claim_edit(newest),
        }
    }
}

impl fmt::Display for ClaimChange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::BindTo { volume, .. } => write!(f, "volumeName {volume}"),
            Self::Status { phase, .. } => write!(f, "phase {phase}"),
            Self::DefaultClass(class) => write!(f, "storageClassName {class}"),
            Self::Anneal => f.write_str("migrated-to"),
        }
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

/// The edit that moves a volume to `phase`, unless its claimRef is no longer
/// the one of `basis`.
pub(super) fn set_phase_edit(
    basis: &PersistentVolume,
    volume: &mut PersistentVolume,
    phase: VolumePhase,
    message: Option<String>,
) -> Edit {
    if !same_claim_ref(basis, volume) {
        return Edit::Refused(format!(
            "its claimRef changed before it could become {phase}"
        ));
    }
    if volume_phase(volume) == Some(phase) {
        return Edit::Unchanged;
    }
    let status = volume.status.get_or_insert_with(Default::default);
    status.phase = Some(phase.as_str().to_string());
    status.message = message;
    Edit::Changed
}

/// Whether two copies of a volume name the same claim (namespace, name, UID).
pub(super) fn same_claim_ref(a: &PersistentVolume, b: &PersistentVolume) -> bool {
    let reference = |v: &PersistentVolume| {
        v.spec.as_ref().and_then(|s| s.claim_ref.as_ref()).map(|r| {
            (
                r.namespace.clone().unwrap_or_default(),
                r.name.clone().unwrap_or_default(),
                r.uid.clone().unwrap_or_default(),
            )
        })
    };
    reference(a) == reference(b)
}

/// Whether two copies of a claim are the same incarnation at the same
/// binding step (UID, requested volume, bind-completed), so a decision made
/// on one still holds for the other.
pub(super) fn same_claim_binding(a: &PersistentVolumeClaim, b: &PersistentVolumeClaim) -> bool {
    let binding = |c: &PersistentVolumeClaim| {
        (
            c.metadata.uid.clone(),
            c.spec.as_ref().and_then(|s| s.volume_name.clone()),
            crate::pv::objects::has_annotation(&c.metadata, k8s_names::ANN_BIND_COMPLETED),
        )
    };
    binding(a) == binding(b)
}

/// Whether a plan step was added: `after` is not `before` itself.
pub(crate) fn added<K>(before: &Arc<K>, after: &Arc<K>) -> bool {
    !Arc::ptr_eq(before, after)
}

impl Controller {
    /// Plans a volume's `migrated-to` annotation and deletion finalizers in
    /// line with its provisioner and policy; returns the volume as the plan
    /// leaves it.
    pub(super) fn anneal_volume(
        &self,
        plan: &mut PvPlan,
        volume: &Arc<PersistentVolume>,
    ) -> Result<Arc<PersistentVolume>> {
        Ok(plan.update(volume, Part::Spec, VolumeChange::Anneal)?)
    }

    /// Plans a claim's `migrated-to` annotation in line with the provisioner
    /// it was handed to; returns the claim as the plan leaves it.
    pub(super) fn anneal_claim(
        &self,
        plan: &mut PvPlan,
        claim: &Arc<PersistentVolumeClaim>,
    ) -> Result<Arc<PersistentVolumeClaim>> {
        Ok(plan.update(claim, Part::Spec, ClaimChange::Anneal)?)
    }

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

    /// Plans a volume's phase (and message) when it differs; returns the
    /// volume as the plan leaves it. Refused when the volume's claimRef
    /// changed since `basis`: the phase was decided for a binding that no
    /// longer holds.
    pub(super) fn set_volume_phase(
        &self,
        plan: &mut PvPlan,
        basis: &Arc<PersistentVolume>,
        phase: VolumePhase,
        message: Option<String>,
    ) -> Result<Arc<PersistentVolume>> {
        let change = VolumeChange::Phase {
            phase,
            message,
            basis: Arc::clone(basis),
        };
        Ok(plan.update(basis, Part::Status, change)?)
    }

    /// Plans a volume Available (the shadow cache tells the claims waiting
    /// for a volume when this frees it); returns whether the plan writes.
    pub(super) fn make_available(
        &self,
        plan: &mut PvPlan,
        basis: &Arc<PersistentVolume>,
    ) -> Result<bool> {
        let available = self.set_volume_phase(plan, basis, VolumePhase::Available, None)?;
        Ok(added(basis, &available))
    }

    /// Plans a volume's phase and, only when the phase changes, an event;
    /// the message also goes into the volume's status.
    pub(super) fn set_volume_phase_with_event(
        &self,
        plan: &mut PvPlan,
        basis: &Arc<PersistentVolume>,
        phase: VolumePhase,
        event_type: EventType,
        reason: &str,
        message: String,
    ) -> Result<Arc<PersistentVolume>> {
        let changed = self.set_volume_phase(plan, basis, phase, Some(message.clone()))?;
        if added(basis, &changed) {
            plan.event(changed.as_ref(), event_type, reason, message);
        }
        Ok(changed)
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
