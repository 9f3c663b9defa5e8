//! The changes the controller's plans make to volumes and claims, as data:
//! each names the fields it sets and re-checks, on the newest copy when its
//! step runs, what the decision assumed.

use std::fmt;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::binding::{bind_claim_edit, claim_status_edit, reserve_edit, unbind_edit};
use super::finalizers::{anneal_claim_edit, anneal_volume_edit};
use super::writes::{same_claim_binding, same_claim_ref, set_phase_edit};
use crate::pv::objects::{ClaimPhase, VolumePhase, claim_has_class};
use crate::runtime::keys::ObjectKey;
use crate::runtime::plan::{Change, Plan};
use crate::runtime::write::Edit;

use super::Next;

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

/// Whether a plan step was added: `after` is not `before` itself.
pub(crate) fn added<K>(before: &Arc<K>, after: &Arc<K>) -> bool {
    !Arc::ptr_eq(before, after)
}
