//! Binding and unbinding: the plan of the four binding writes in their
//! fixed order, and of the reverse for a volume whose claim went elsewhere.

use std::sync::Arc;

use crate::runtime::events::EventType;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use quantity::Amount;

use super::Controller;
use super::changes::{ClaimChange, PvPlan, VolumeChange};
use super::writes::Part;
use crate::pv::error::{Error, Result};
use crate::pv::keys::VolumeName;
use crate::pv::objects::{ClaimPhase, claim_phase};
use k8s_names::ANN_PRE_RESIZE_CAPACITY;

impl Controller {
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
