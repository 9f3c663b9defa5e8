//! Claim decisions: an unbound claim is matched, pre-bound or handed to a
//! provisioner; a bound claim is checked against its volume.

use std::sync::Arc;

use crate::runtime::events::EventType;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};

use super::changes::{anneal_claim, bind, set_claim_phase_with_event, set_claim_status};
use super::{Binder, Complete, PvEffect, PvPlan, plan_or_failure};
use crate::pv::constants::reasons;
use crate::pv::error::Result;
use crate::pv::keys::VolumeName;
use crate::pv::objects::{
    ClaimPhase, claim_access_modes, claim_class, claim_ref_key, claim_request, claim_vac,
    claim_volume_mode, has_annotation, is_being_deleted, is_volume_bound_to_claim,
    volume_access_modes, volume_capacity, volume_class, volume_mode, volume_vac,
};
use crate::runtime::keys::ObjectKey;
use crate::runtime::plan::{Failure, Reservation, Then};
use k8s_names::{ANN_BIND_COMPLETED, ANN_BOUND_BY_CONTROLLER, ANN_SELECTED_NODE};

/// Where an unbound claim (no `bind-completed` annotation) stands.
#[derive(Debug)]
pub(super) enum UnboundClaimSituation {
    /// The claim names no volume: find one.
    NoVolumeRequested,
    /// The claim names a volume the controller does not know (yet).
    RequestedVolumeMissing,
    /// The claim names a volume that nobody has claimed.
    RequestedVolumeFree(Arc<PersistentVolume>),
    /// The claim names a volume that is (pre-)bound to this very claim.
    RequestedVolumeBoundHere(Arc<PersistentVolume>),
    /// The claim names a volume that belongs to another claim.
    RequestedVolumeBoundElsewhere(Arc<PersistentVolume>),
}

/// Where a bound claim (`bind-completed` set) stands.
#[derive(Debug)]
pub(super) enum BoundClaimSituation {
    /// The claim no longer names a volume.
    NoVolumeName,
    /// The claim names a volume that does not exist.
    Missing,
    /// The volume exists but has no claimRef (or the binding is half done).
    Unclaimed(Arc<PersistentVolume>),
    /// The volume points back at this claim (by UID).
    BoundHere(Arc<PersistentVolume>),
    /// The volume belongs to another claim.
    BoundElsewhere,
}

/// Classifies an unbound claim given the volume it names, if any.
pub(super) fn classify_unbound(
    claim: &PersistentVolumeClaim,
    requested: Option<Arc<PersistentVolume>>,
) -> UnboundClaimSituation {
    if requested_volume(claim).is_none() {
        return UnboundClaimSituation::NoVolumeRequested;
    }
    match requested {
        None => UnboundClaimSituation::RequestedVolumeMissing,
        Some(volume) => {
            let has_claim_ref = volume.spec.as_ref().is_some_and(|s| s.claim_ref.is_some());
            if !has_claim_ref {
                UnboundClaimSituation::RequestedVolumeFree(volume)
            } else if is_volume_bound_to_claim(&volume, claim) {
                UnboundClaimSituation::RequestedVolumeBoundHere(volume)
            } else {
                UnboundClaimSituation::RequestedVolumeBoundElsewhere(volume)
            }
        }
    }
}

/// Classifies a bound claim given the volume it names, if any.
pub(super) fn classify_bound(
    claim: &PersistentVolumeClaim,
    volume: Option<Arc<PersistentVolume>>,
) -> BoundClaimSituation {
    if requested_volume(claim).is_none() {
        return BoundClaimSituation::NoVolumeName;
    }
    let Some(volume) = volume else {
        return BoundClaimSituation::Missing;
    };
    let claim_ref_uid = volume
        .spec
        .as_ref()
        .and_then(|s| s.claim_ref.as_ref())
        .map(|r| r.uid.clone().unwrap_or_default());
    match claim_ref_uid {
        None => BoundClaimSituation::Unclaimed(volume),
        Some(uid) if Some(&uid) == claim.metadata.uid.as_ref() => {
            BoundClaimSituation::BoundHere(volume)
        }
        Some(_) => BoundClaimSituation::BoundElsewhere,
    }
}

/// The order in which to sync many claims that arrive together (the first
/// pass after start-up, a resync, the claims woken by a freed volume), so
/// that best fit holds for the batch as it would for claims arriving one by
/// one: unbound claims first, the largest requests first (a small claim
/// synced first may take the only volume a larger one fits, which the
/// larger one can never return the favour for), and at equal requests those
/// with a label selector first (they fit fewer volumes); claims already
/// bound last. Ties keep key order, so runs repeat. Each claim is dropped
/// as soon as its place is known, so the claims may come one at a time
/// from the store without all of them unpacked at once.
pub(crate) fn binding_order(
    claims: impl IntoIterator<Item = Arc<PersistentVolumeClaim>>,
) -> Vec<ObjectKey> {
    let mut order: Vec<_> = claims
        .into_iter()
        .map(|claim| {
            let bound = has_annotation(&claim.metadata, ANN_BIND_COMPLETED);
            let request = claim_request(&claim).ok();
            let selector = claim.spec.as_ref().is_some_and(|s| s.selector.is_some());
            (
                bound,
                std::cmp::Reverse(request),
                !selector,
                ObjectKey::of(claim.as_ref()),
            )
        })
        .collect();
    order.sort();
    order.into_iter().map(|(.., key)| key).collect()
}

/// The volume a claim names in `spec.volumeName`, if any.
pub(super) fn requested_volume(claim: &PersistentVolumeClaim) -> Option<&str> {
    claim
        .spec
        .as_ref()
        .and_then(|s| s.volume_name.as_deref())
        .filter(|n| !n.is_empty())
}

impl Binder {
    /// Decides about the claim of `key` as the store holds it, if a watch
    /// has shown it (a claim known only from the answer to a write of the
    /// process is not decided on its own): bind it, finish a half-done
    /// binding, hand it to a provisioner, or mark it Pending or Lost.
    pub(crate) fn decide_claim_of(&self, key: &ObjectKey) -> PvPlan {
        let newest = self
            .store
            .is_listed_claim(key)
            .then(|| self.store.claim(key))
            .flatten();
        match newest {
            Some(claim) => self.decide_claim(&claim),
            None => PvPlan::default(),
        }
    }

    /// Decides about one claim (see [`Binder::decide_claim_of`]).
    #[tracing::instrument(skip_all, fields(claim = %ObjectKey::of(claim.as_ref())))]
    pub(crate) fn decide_claim(&self, claim: &Arc<PersistentVolumeClaim>) -> PvPlan {
        let mut plan = PvPlan::default();
        let claim = &anneal_claim(&mut plan, claim);
        let decided = if has_annotation(&claim.metadata, ANN_BIND_COMPLETED) {
            self.decide_bound_claim(&mut plan, claim)
        } else {
            self.decide_unbound_claim(&mut plan, claim)
        };
        plan_or_failure(decided.map(|()| plan))
    }

    /// Decides about an unbound claim (no bind-completed annotation).
    pub(super) fn decide_unbound_claim(
        &self,
        plan: &mut PvPlan,
        claim: &Arc<PersistentVolumeClaim>,
    ) -> Result<()> {
        let requested =
            requested_volume(claim).and_then(|name| self.store.volume(&VolumeName::new(name)));
        match classify_unbound(claim, requested) {
            UnboundClaimSituation::NoVolumeRequested => self.find_volume_for_claim(plan, claim),
            UnboundClaimSituation::RequestedVolumeMissing => {
                tracing::debug!("requested volume not found, claim stays pending");
                set_claim_status(plan, claim, ClaimPhase::Pending, None).map(drop)
            }
            UnboundClaimSituation::RequestedVolumeFree(volume) => {
                match check_volume_satisfies_claim(&volume, claim) {
                    Ok(()) => bind(plan, &volume, claim),
                    Err(reason) => {
                        let message = format!(
                            "Cannot bind to requested volume {:?}: {reason}",
                            VolumeName::of(&volume).as_str().to_owned()
                        );
                        plan.event(
                            claim.as_ref(),
                            EventType::Warning,
                            reasons::VOLUME_MISMATCH,
                            message,
                        );
                        set_claim_status(plan, claim, ClaimPhase::Pending, None).map(drop)
                    }
                }
            }
            UnboundClaimSituation::RequestedVolumeBoundHere(volume) => {
                tracing::debug!("requested volume is bound to this claim, finishing the binding");
                bind(plan, &volume, claim)
            }
            UnboundClaimSituation::RequestedVolumeBoundElsewhere(volume) => {
                let name = VolumeName::of(&volume).as_str().to_owned();
                let message = format!("volume {name:?} already bound to a different claim.");
                plan.event(
                    claim.as_ref(),
                    EventType::Warning,
                    reasons::FAILED_BINDING,
                    message,
                );
                if has_annotation(&claim.metadata, ANN_BOUND_BY_CONTROLLER) {
                    // Only a removed bind-completed annotation gets a claim
                    // here: refuse to guess which side is right.
                    let owner = claim_ref_key(&volume)
                        .map(|key| format!("{}/{}", key.namespace, key.name))
                        .unwrap_or_default();
                    plan.then(Then::Fail(Failure {
                        reason: format!(
                            "invalid binding of claim {} to volume {name:?}: volume already claimed by {owner:?}",
                            ObjectKey::of(claim.as_ref())
                        ),
                        label: "inconsistent",
                        expected: false,
                    }));
                    return Ok(());
                }
                set_claim_status(plan, claim, ClaimPhase::Pending, None).map(drop)
            }
        }
    }

    /// An unbound claim that names no volume: bind the best match, or wait,
    /// or provision, or report that nothing fits. Without a match the claim
    /// waits for a volume to become free ([`Then::Wait`]). The match is
    /// reserved for this claim while the plan runs, so no claim decided
    /// meanwhile takes it.
    fn find_volume_for_claim(
        &self,
        plan: &mut PvPlan,
        claim: &Arc<PersistentVolumeClaim>,
    ) -> Result<()> {
        let delay_binding = self.is_delay_binding(claim)?;
        let found = match self.store.best_match(claim, delay_binding) {
            Ok(found) => found,
            Err(error) => {
                tracing::warn!(%error, "claim cannot be matched");
                plan.event(
                    claim.as_ref(),
                    EventType::Warning,
                    reasons::FAILED_BINDING,
                    format!("invalid claim: {error}"),
                );
                return Ok(());
            }
        };
        if let Some(volume) = found {
            tracing::debug!(volume = %VolumeName::of(&volume), "found a matching volume");
            plan.reserve(Reservation {
                for_key: ObjectKey::of(claim.as_ref()),
                for_uid: claim.metadata.uid.clone().unwrap_or_default(),
                reserved: VolumeName::of(&volume).as_str().to_owned(),
            });
            return bind(plan, &volume, claim);
        }
        plan.then(Then::Wait);
        if self.assign_default_class(plan, claim) {
            return Ok(());
        }
        let selected_node = has_annotation(&claim.metadata, ANN_SELECTED_NODE);
        if delay_binding && !selected_node {
            self.event_for_waiting_claim(plan, claim);
        } else if !claim_class(claim).is_empty() {
            return self.provision_claim(plan, claim);
        } else {
            self.tell_with_nearest_misses(
                plan,
                claim,
                delay_binding,
                false,
                reasons::FAILED_BINDING,
                "no persistent volumes available for this claim and no storage class is set",
            );
        }
        set_claim_status(plan, claim, ClaimPhase::Pending, None).map(drop)
    }

    /// Decides about a bound claim (bind-completed set): the binding still
    /// holds, or the claim is Lost.
    pub(super) fn decide_bound_claim(
        &self,
        plan: &mut PvPlan,
        claim: &Arc<PersistentVolumeClaim>,
    ) -> Result<()> {
        let volume =
            requested_volume(claim).and_then(|name| self.store.volume(&VolumeName::new(name)));
        match classify_bound(claim, volume) {
            BoundClaimSituation::NoVolumeName => set_claim_phase_with_event(
                plan,
                claim,
                ClaimPhase::Lost,
                EventType::Warning,
                reasons::CLAIM_LOST,
                "Bound claim has lost reference to PersistentVolume. Data on the volume is lost!",
            ),
            BoundClaimSituation::Missing => set_claim_phase_with_event(
                plan,
                claim,
                ClaimPhase::Lost,
                EventType::Warning,
                reasons::CLAIM_LOST,
                "Bound claim has lost its PersistentVolume. Data on the volume is lost!",
            ),
            // The volume came unbound, or its claimRef write has not been
            // seen yet; either way binding again is right.
            BoundClaimSituation::Unclaimed(volume) => bind(plan, &volume, claim),
            // All is well; bind() only fixes phases that lag behind. When it
            // had nothing to fix, the resync may pass the claim by until it or
            // its volume changes.
            BoundClaimSituation::BoundHere(volume) => {
                bind(plan, &volume, claim)?;
                plan.local(PvEffect::Complete(Complete::Claim {
                    claim: Arc::clone(claim),
                    volume,
                }));
                Ok(())
            }
            BoundClaimSituation::BoundElsewhere => set_claim_phase_with_event(
                plan,
                claim,
                ClaimPhase::Lost,
                EventType::Warning,
                reasons::CLAIM_MISBOUND,
                "Two claims are bound to the same volume, this one is bound incorrectly",
            ),
        }
    }
}

/// Why a volume named by a claim cannot serve it, in upstream's words and
/// order; `Ok` when it can. The claim's label selector is deliberately not
/// checked: naming a volume overrides it.
pub(super) fn check_volume_satisfies_claim(
    volume: &PersistentVolume,
    claim: &PersistentVolumeClaim,
) -> std::result::Result<(), String> {
    if is_being_deleted(&volume.metadata) {
        return Err(format!(
            "the volume is marked for deletion {:?}",
            VolumeName::of(volume).as_str().to_owned()
        ));
    }
    let request = claim_request(claim).map_err(|e| e.to_string())?;
    let capacity = volume_capacity(volume).map_err(|e| e.to_string())?;
    if capacity < request {
        return Err("requested PV is too small".to_string());
    }
    if volume_class(volume) != claim_class(claim) {
        return Err("storageClassName does not match".to_string());
    }
    if volume_vac(volume) != claim_vac(claim) {
        return Err("volumeAttributesClassName does not match".to_string());
    }
    if volume_mode(volume) != claim_volume_mode(claim) {
        return Err("incompatible volumeMode".to_string());
    }
    let wanted = claim_access_modes(claim).map_err(|e| e.to_string())?;
    let offered = volume_access_modes(volume).map_err(|e| e.to_string())?;
    if !offered.is_superset_of(wanted) {
        return Err("incompatible accessMode".to_string());
    }
    Ok(())
}
