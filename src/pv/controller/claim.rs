//! Claim decisions: an unbound claim is matched, pre-bound or handed to a
//! provisioner; a bound claim is checked against its volume.

use std::sync::Arc;

use crate::runtime::events::EventType;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};

use super::{Controller, Next};
use crate::pv::cache::Reservation;
use crate::pv::constants::{
    ANN_BIND_COMPLETED, ANN_BOUND_BY_CONTROLLER, ANN_SELECTED_NODE, reasons,
};
use crate::pv::error::{Error, Result};
use crate::pv::keys::VolumeName;
use crate::pv::objects::{
    ClaimPhase, claim_access_modes, claim_class, claim_request, claim_vac, claim_volume_mode,
    has_annotation, is_being_deleted, is_volume_bound_to_claim, volume_access_modes,
    volume_capacity, volume_class, volume_mode, volume_vac,
};
use crate::runtime::keys::ObjectKey;

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
/// from the shadow cache without all of them unpacked at once.
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

/// Whether a sync of `claim` searches for a volume: it is unbound and names
/// none.
fn searches_for_volume(claim: &PersistentVolumeClaim) -> bool {
    !has_annotation(&claim.metadata, ANN_BIND_COMPLETED) && requested_volume(claim).is_none()
}

impl Controller {
    /// Whether the next sync of this claim, as the cache holds it now,
    /// searches for a volume, and so must reserve in the order claims left
    /// the queue ([`Self::reserve_in_order`]). A claim that changes before
    /// its sync still gets a volume, from the sync's own search.
    pub(crate) fn searches_in_order(&self, key: &ObjectKey) -> bool {
        self.cache.is_listed_claim(key)
            && self
                .cache
                .claim(key)
                .is_some_and(|claim| searches_for_volume(&claim))
    }

    /// Reserves the volume the next sync of this claim would bind, when
    /// that sync would search for one (an unbound claim naming no volume).
    /// The wiring calls it as the claim leaves the queue, one claim at a
    /// time, and keeps the reservation until the sync ends: so claims synced
    /// by several workers at once pick their volumes in the order they left
    /// the queue, exactly as one worker syncing them one by one would, and
    /// the sync's own search finds the volume held for it.
    pub(crate) fn reserve_in_order(&self, key: &ObjectKey) -> Option<Reservation> {
        let claim = self.cache.claim(key)?;
        if !searches_for_volume(&claim) {
            return None;
        }
        let delay_binding = self.is_delay_binding(&claim).ok()?;
        self.cache
            .reserve_best_match(&claim, delay_binding)
            .ok()
            .flatten()
    }

    pub(super) async fn sync_unbound_claim(
        &self,
        claim: &Arc<PersistentVolumeClaim>,
    ) -> Result<Next> {
        let requested =
            requested_volume(claim).and_then(|name| self.cache.volume(&VolumeName::new(name)));
        match classify_unbound(claim, requested) {
            UnboundClaimSituation::NoVolumeRequested => self.find_volume_for_claim(claim).await,
            UnboundClaimSituation::RequestedVolumeMissing => {
                tracing::debug!("requested volume not found, claim stays pending");
                self.set_claim_status(claim, ClaimPhase::Pending, None)
                    .await
                    .map(|_| Next::nothing())
            }
            UnboundClaimSituation::RequestedVolumeFree(volume) => {
                match check_volume_satisfies_claim(&volume, claim) {
                    Ok(()) => self.bind(&volume, claim).await.map(|()| Next::nothing()),
                    Err(reason) => {
                        let message = format!(
                            "Cannot bind to requested volume {:?}: {reason}",
                            crate::pv::keys::VolumeName::of(&volume).as_str().to_owned()
                        );
                        self.warn(claim.as_ref(), reasons::VOLUME_MISMATCH, message);
                        self.set_claim_status(claim, ClaimPhase::Pending, None)
                            .await
                            .map(|_| Next::nothing())
                    }
                }
            }
            UnboundClaimSituation::RequestedVolumeBoundHere(volume) => {
                tracing::debug!("requested volume is bound to this claim, finishing the binding");
                self.bind(&volume, claim).await.map(|()| Next::nothing())
            }
            UnboundClaimSituation::RequestedVolumeBoundElsewhere(volume) => {
                let name = crate::pv::keys::VolumeName::of(&volume).as_str().to_owned();
                let message = format!("volume {name:?} already bound to a different claim.");
                self.warn(claim.as_ref(), reasons::FAILED_BINDING, message);
                if has_annotation(&claim.metadata, ANN_BOUND_BY_CONTROLLER) {
                    // Only a removed bind-completed annotation gets a claim
                    // here: refuse to guess which side is right.
                    let owner = volume
                        .spec
                        .as_ref()
                        .and_then(|s| s.claim_ref.as_ref())
                        .map(|r| {
                            format!(
                                "{}/{}",
                                r.namespace.as_deref().unwrap_or(""),
                                r.name.as_deref().unwrap_or("")
                            )
                        })
                        .unwrap_or_default();
                    return Err(Error::Inconsistent(format!(
                        "invalid binding of claim {} to volume {name:?}: volume already claimed by {owner:?}",
                        ObjectKey::of(claim.as_ref())
                    )));
                }
                self.set_claim_status(claim, ClaimPhase::Pending, None)
                    .await
                    .map(|_| Next::nothing())
            }
        }
    }

    /// An unbound claim that names no volume: bind the best match, or wait,
    /// or provision, or report that nothing fits. Without a match the claim
    /// waits for a volume to become free ([`Next::claim_waits`]). The match
    /// is reserved for this claim until the binding ends, so a claim synced
    /// at the same time by another worker never takes it.
    async fn find_volume_for_claim(&self, claim: &Arc<PersistentVolumeClaim>) -> Result<Next> {
        let delay_binding = self.is_delay_binding(claim)?;
        let found = match self.cache.reserve_best_match(claim, delay_binding) {
            Ok(found) => found,
            Err(error) => {
                tracing::warn!(%error, "claim cannot be matched");
                self.warn(
                    claim.as_ref(),
                    reasons::FAILED_BINDING,
                    format!("invalid claim: {error}"),
                );
                return Ok(Next::nothing());
            }
        };
        if let Some(reservation) = found {
            let volume = reservation.volume();
            tracing::debug!(volume = %crate::pv::keys::VolumeName::of(volume), "found a matching volume");
            self.bind(volume, claim).await?;
            if let (Some(shadow), Some(uid)) = (&self.shadow, claim.metadata.uid.as_deref()) {
                // The bind was not sent: the volume stays held for the claim
                // until the cluster shows what became of it.
                let name = volume.metadata.name.clone().unwrap_or_default();
                shadow.hold(uid, &name, Box::new(reservation.into_hold()));
            }
            return Ok(Next::nothing());
        }
        let waits = Next {
            claim_waits: true,
            ..Next::default()
        };
        if self.assign_default_class(claim).await? {
            return Ok(waits);
        }
        let selected_node = has_annotation(&claim.metadata, ANN_SELECTED_NODE);
        if delay_binding && !selected_node {
            self.event_for_waiting_claim(claim);
        } else if !claim_class(claim).is_empty() {
            self.provision_claim(claim)?;
            return Ok(waits);
        } else {
            self.note_with_nearest_misses(
                claim,
                delay_binding,
                false,
                reasons::FAILED_BINDING,
                "no persistent volumes available for this claim and no storage class is set",
            );
        }
        self.set_claim_status(claim, ClaimPhase::Pending, None)
            .await?;
        Ok(waits)
    }

    pub(super) async fn sync_bound_claim(
        &self,
        claim: &Arc<PersistentVolumeClaim>,
    ) -> Result<Next> {
        let volume =
            requested_volume(claim).and_then(|name| self.cache.volume(&VolumeName::new(name)));
        match classify_bound(claim, volume) {
            BoundClaimSituation::NoVolumeName => {
                self.set_claim_phase_with_event(
                    claim,
                    ClaimPhase::Lost,
                    EventType::Warning,
                    reasons::CLAIM_LOST,
                    "Bound claim has lost reference to PersistentVolume. Data on the volume is lost!",
                )
                .await
                .map(|()| Next::nothing())
            }
            BoundClaimSituation::Missing => {
                self.set_claim_phase_with_event(
                    claim,
                    ClaimPhase::Lost,
                    EventType::Warning,
                    reasons::CLAIM_LOST,
                    "Bound claim has lost its PersistentVolume. Data on the volume is lost!",
                )
                .await
                .map(|()| Next::nothing())
            }
            // The volume came unbound, or its claimRef write has not been
            // seen yet; either way binding again is right.
            BoundClaimSituation::Unclaimed(volume) => {
                self.bind(&volume, claim).await.map(|()| Next::nothing())
            }
            // All is well; bind() only fixes phases that lag behind. When it
            // had nothing to fix, the resync may pass the claim by until it or
            // its volume changes.
            BoundClaimSituation::BoundHere(volume) => {
                self.bind(&volume, claim).await?;
                self.cache.settle_claim(claim, &volume);
                Ok(Next::nothing())
            }
            BoundClaimSituation::BoundElsewhere => {
                self.set_claim_phase_with_event(
                    claim,
                    ClaimPhase::Lost,
                    EventType::Warning,
                    reasons::CLAIM_MISBOUND,
                    "Two claims are bound to the same volume, this one is bound incorrectly",
                )
                .await
                .map(|()| Next::nothing())
            }
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
            crate::pv::keys::VolumeName::of(volume).as_str().to_owned()
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
