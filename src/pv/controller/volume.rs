//! Volume decisions: keep a volume's phase in line with its claim, release it
//! when the claim is gone, and undo bindings the claim no longer wants.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};

use super::changes::{make_available, set_volume_phase, unbind_volume};
use super::claim::requested_volume;
use super::{Binder, Complete, PvEffect, PvPlan, plan_or_failure};
use crate::pv::constants::reasons;
use crate::pv::error::{Error, Result};
use crate::pv::keys::{self, VolumeName};
use crate::pv::objects::{
    ReclaimPolicy, VolumePhase, claim_ref_key, claim_ref_uid, claim_volume_mode, has_annotation,
    reclaim_policy, volume_access_modes, volume_capacity, volume_mode, volume_phase,
};
use crate::runtime::events::EventType;
use crate::runtime::keys::ObjectKey;
use crate::runtime::plan::Reads;
use k8s_names::{ANN_BOUND_BY_CONTROLLER, ANN_DYNAMICALLY_PROVISIONED};

/// Where a volume stands relative to the claim its claimRef names.
#[derive(Debug)]
pub(super) enum VolumeSituation {
    /// No claimRef: the volume is free.
    Unclaimed,
    /// A claimRef without UID: a user reserved the volume for a claim that
    /// has not been bound yet.
    PreBound,
    /// The claim is gone (or was replaced by one with another UID).
    ClaimMissing,
    /// The claim exists but names no volume yet: the claim sync finishes it.
    ClaimNotBoundYet(Arc<PersistentVolumeClaim>),
    /// The claim names this volume: all is bound.
    ClaimBoundHere(Arc<PersistentVolumeClaim>),
    /// The claim names another volume.
    ClaimBoundElsewhere,
}

/// Classifies a volume given the claim its claimRef names (already checked to
/// have the claimRef's UID; `None` when missing or replaced).
pub(super) fn classify_volume(
    volume: &PersistentVolume,
    claim: Option<Arc<PersistentVolumeClaim>>,
) -> VolumeSituation {
    let Some(reference) = volume.spec.as_ref().and_then(|s| s.claim_ref.as_ref()) else {
        return VolumeSituation::Unclaimed;
    };
    if reference.uid.as_deref().unwrap_or("").is_empty() {
        return VolumeSituation::PreBound;
    }
    let Some(claim) = claim else {
        return VolumeSituation::ClaimMissing;
    };
    match requested_volume(&claim) {
        None => VolumeSituation::ClaimNotBoundYet(claim),
        Some(name) if name == VolumeName::of(volume).as_str() => {
            VolumeSituation::ClaimBoundHere(claim)
        }
        Some(_) => VolumeSituation::ClaimBoundElsewhere,
    }
}

/// The claim a volume's claimRef names, as far as a decision can know it.
enum ClaimOfVolume {
    /// Known: the claim with the claimRef's UID, or `None` when it is gone.
    Known(Option<Arc<PersistentVolumeClaim>>),
    /// To be read from the API server.
    Read(ObjectKey),
}

impl Binder {
    /// Decides about the volume `name` as the store holds it, if a watch
    /// has shown it (a volume known only from the answer to a write of the
    /// process is not decided on its own). `reads` is what the API server
    /// answered for the claim the volume names, when an earlier decision
    /// asked for it.
    pub(crate) fn decide_volume_of(&self, name: &VolumeName, reads: &Reads) -> PvPlan {
        match self.store.listed_volume(name) {
            Some(volume) => self.decide_volume(&volume, reads),
            None => PvPlan::default(),
        }
    }

    /// Decides about a volume: keep its phase in line with its claim,
    /// release it when the claim is gone, run its reclaim policy. May ask
    /// for the volume's claim to be read from the API server first.
    #[tracing::instrument(skip_all, fields(volume = %VolumeName::of(volume)))]
    pub(crate) fn decide_volume(&self, volume: &Arc<PersistentVolume>, reads: &Reads) -> PvPlan {
        let mut plan = PvPlan::default();
        let problem = invalid_volume(volume);
        let valid = problem.is_none();
        if let Some(problem) = problem {
            tracing::warn!(%problem, "invalid volume, left alone");
            plan.event(
                volume.as_ref(),
                EventType::Warning,
                reasons::INVALID_VOLUME,
                problem,
            );
            if has_unusable_claim_ref(volume) {
                // Releasing would run the reclaim policy on a guess.
                return plan;
            }
        }
        let volume = &super::changes::anneal_volume(&mut plan, volume);
        let claim = match self.claim_of_volume(volume, reads) {
            ClaimOfVolume::Known(claim) => claim,
            ClaimOfVolume::Read(key) => {
                let mut read = PvPlan::default();
                read.read::<PersistentVolumeClaim>(key);
                return read;
            }
        };
        let decided = self.decide_for_claim(&mut plan, volume, claim, valid);
        plan_or_failure(decided.map(|()| plan))
    }

    /// Decides about a volume given the claim its claimRef names.
    fn decide_for_claim(
        &self,
        plan: &mut PvPlan,
        volume: &Arc<PersistentVolume>,
        claim: Option<Arc<PersistentVolumeClaim>>,
        valid: bool,
    ) -> Result<()> {
        match classify_volume(volume, claim) {
            situation @ (VolumeSituation::Unclaimed | VolumeSituation::PreBound) => {
                if self.store.is_reserved(&VolumeName::of(volume)) {
                    // A claim's binding is under way: the volume becomes
                    // Bound, or free again when the binding fails (then the
                    // next resync makes it Available).
                    tracing::debug!("volume reserved for a claim being bound, phase left as is");
                } else {
                    let writes = make_available(plan, volume);
                    if !writes && valid && matches!(situation, VolumeSituation::Unclaimed) {
                        plan.local(PvEffect::Complete(Complete::FreeVolume(Arc::clone(volume))));
                    }
                }
                Ok(())
            }
            VolumeSituation::ClaimMissing => {
                self.unless_provisioning(volume)?;
                self.release_and_reclaim(plan, volume)
            }
            VolumeSituation::ClaimNotBoundYet(claim) => {
                if volume_mode(volume) != claim_volume_mode(&claim) {
                    // The claim sync will never pick this volume; say why on
                    // both objects instead of waiting silently.
                    let volume_message = format!(
                        "Cannot bind PersistentVolume to requested PersistentVolumeClaim {:?} due to incompatible volumeMode.",
                        claim.metadata.name.as_deref().unwrap_or("")
                    );
                    plan.event(
                        volume.as_ref(),
                        EventType::Warning,
                        reasons::VOLUME_MISMATCH,
                        volume_message,
                    );
                    let claim_message = format!(
                        "Cannot bind PersistentVolume {:?} to requested PersistentVolumeClaim due to incompatible volumeMode.",
                        VolumeName::of(volume).as_str().to_owned()
                    );
                    plan.event(
                        claim.as_ref(),
                        EventType::Warning,
                        reasons::VOLUME_MISMATCH,
                        claim_message,
                    );
                    return Ok(());
                }
                // Bound on the volume side only: a provisioner or a crash
                // mid-bind left it so. The claim sync finishes the binding.
                tracing::debug!(claim = %ObjectKey::of(claim.as_ref()), "volume waits for its claim to be bound");
                plan.local(PvEffect::SyncClaim(ObjectKey::of(claim.as_ref())));
                Ok(())
            }
            VolumeSituation::ClaimBoundHere(claim) => {
                set_volume_phase(plan, volume, VolumePhase::Bound, None);
                if valid {
                    // Nothing was written unless the phase lagged (then
                    // the version recorded is no longer the stored one).
                    plan.local(PvEffect::Complete(Complete::Volume {
                        volume: Arc::clone(volume),
                        claim,
                    }));
                }
                Ok(())
            }
            VolumeSituation::ClaimBoundElsewhere => {
                let provisioned = has_annotation(&volume.metadata, ANN_DYNAMICALLY_PROVISIONED);
                if provisioned && reclaim_policy(volume) == ReclaimPolicy::Delete {
                    // Provisioned for this claim, which took another volume:
                    // this one is not needed any more.
                    self.unless_provisioning(volume)?;
                    self.release_and_reclaim(plan, volume)
                } else {
                    tracing::debug!(
                        by_controller = has_annotation(&volume.metadata, ANN_BOUND_BY_CONTROLLER),
                        "claim is bound to another volume, unbinding"
                    );
                    unbind_volume(plan, volume);
                    Ok(())
                }
            }
        }
    }

    /// The claim a volume's claimRef names, if it exists with the claimRef's
    /// UID. A claim missing from the store is read from the server before
    /// the volume is released: releasing because of a stale store would
    /// reclaim a volume in use. A released volume's claim found in the
    /// store is read from the server too: the volume was released because
    /// the claim was gone, and binding it again to a copy the store kept
    /// would release it a second time (a second reclaim). `reads` holds the
    /// server's answer, once read.
    fn claim_of_volume(&self, volume: &PersistentVolume, reads: &Reads) -> ClaimOfVolume {
        let uid = claim_ref_uid(volume);
        let Some(key) = claim_ref_key(volume).filter(|_| !uid.is_empty()) else {
            return ClaimOfVolume::Known(None);
        };
        let stored = self.store.claim(&key);
        let stored_uid = stored.as_ref().and_then(|c| c.metadata.uid.as_deref());
        let reclaiming = matches!(
            volume_phase(volume),
            Some(VolumePhase::Released | VolumePhase::Failed)
        );
        if stored_uid == Some(uid) && !reclaiming {
            return ClaimOfVolume::Known(stored);
        }
        if stored.is_none() && reclaiming {
            return ClaimOfVolume::Known(None);
        }
        match reads.get::<PersistentVolumeClaim>(&key) {
            Some(read) => {
                ClaimOfVolume::Known(read.filter(|c| c.metadata.uid.as_deref() == Some(uid)))
            }
            None => ClaimOfVolume::Read(key),
        }
    }

    /// Fails with [`Error::Waiting`] while the provisioning of the claim the
    /// volume names still runs: a create that got through unanswered is
    /// retried by it, and a volume released and deleted meanwhile would be
    /// created again, for storage already deleted. Once the provisioning
    /// ends, the volume is released as usual.
    fn unless_provisioning(&self, volume: &PersistentVolume) -> Result<()> {
        let Some(key) = claim_ref_key(volume) else {
            return Ok(());
        };
        let provisioning = keys::provision(&key.namespace, &key.name, claim_ref_uid(volume));
        if self.running.is_running(&provisioning) {
            tracing::debug!(claim = %key, "provisioning for the volume's claim still runs");
            return Err(Error::Waiting {
                object: format!("volume {}", VolumeName::of(volume)),
                reason: format!("{provisioning} still runs"),
            });
        }
        Ok(())
    }

    /// Plans a volume Released (unless it already is, or Failed) and its
    /// reclaim policy.
    fn release_and_reclaim(&self, plan: &mut PvPlan, volume: &Arc<PersistentVolume>) -> Result<()> {
        let volume = if let Some(VolumePhase::Released | VolumePhase::Failed) = volume_phase(volume)
        {
            Arc::clone(volume)
        } else {
            tracing::info!(
                policy = %reclaim_policy(volume),
                "volume released, reclaim policy will run"
            );
            set_volume_phase(plan, volume, VolumePhase::Released, None)
        };
        self.reclaim_volume(plan, &volume);
        Ok(())
    }
}

/// What makes a volume unusable for binding, if anything.
fn invalid_volume(volume: &PersistentVolume) -> Option<String> {
    if has_unusable_claim_ref(volume) {
        return Some("claimRef has a UID but no namespace or name".to_string());
    }
    if let Err(error) = volume_capacity(volume) {
        return Some(error.to_string());
    }
    volume_access_modes(volume)
        .err()
        .map(|error| error.to_string())
}

/// Whether the claimRef names a claim by UID but not by namespace and name.
fn has_unusable_claim_ref(volume: &PersistentVolume) -> bool {
    volume
        .spec
        .as_ref()
        .and_then(|s| s.claim_ref.as_ref())
        .is_some_and(|r| {
            !r.uid.as_deref().unwrap_or("").is_empty()
                && (r.namespace.as_deref().unwrap_or("").is_empty()
                    || r.name.as_deref().unwrap_or("").is_empty())
        })
}
