//! Volume decisions: keep a volume's phase in line with its claim, release it
//! when the claim is gone, and undo bindings the claim no longer wants.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};

use super::claim::requested_volume;
use super::{Controller, Next};
use crate::pv::constants::{ANN_BOUND_BY_CONTROLLER, ANN_DYNAMICALLY_PROVISIONED, reasons};
use crate::pv::error::{Error, Result, api};
use crate::pv::keys::VolumeName;
use crate::pv::objects::{
    ReclaimPolicy, VolumePhase, claim_ref_key, claim_ref_uid, claim_volume_mode, has_annotation,
    reclaim_policy, volume_access_modes, volume_capacity, volume_mode, volume_phase,
};
use crate::pv::operations;
use crate::runtime::keys::ObjectKey;

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

impl Controller {
    pub(super) async fn sync_volume_inner(&self, volume: &Arc<PersistentVolume>) -> Result<Next> {
        let problem = invalid_volume(volume);
        let valid = problem.is_none();
        if let Some(problem) = problem {
            tracing::warn!(%problem, "invalid volume, left alone");
            self.warn(volume.as_ref(), reasons::INVALID_VOLUME, problem);
            if has_unusable_claim_ref(volume) {
                // Releasing would run the reclaim policy on a guess.
                return Ok(Next::nothing());
            }
        }
        let volume = &self.anneal_volume(volume).await?;
        let claim = self.claim_of_volume(volume).await?;
        match classify_volume(volume, claim) {
            situation @ (VolumeSituation::Unclaimed | VolumeSituation::PreBound) => {
                if self.cache.is_reserved(&VolumeName::of(volume)) {
                    // A claim's binding is under way: the volume becomes
                    // Bound, or free again when the binding fails (then the
                    // next resync makes it Available).
                    tracing::debug!("volume held for a claim being bound, phase left as is");
                } else {
                    let wrote = self.make_available(volume).await?;
                    if !wrote && valid && matches!(situation, VolumeSituation::Unclaimed) {
                        self.cache.settle_free_volume(volume);
                    }
                }
                Ok(Next::nothing())
            }
            VolumeSituation::ClaimMissing => {
                self.unless_provisioning(volume)?;
                self.release_and_reclaim(volume).await?;
                Ok(Next::nothing())
            }
            VolumeSituation::ClaimNotBoundYet(claim) => {
                if volume_mode(volume) != claim_volume_mode(&claim) {
                    // The claim sync will never pick this volume; say why on
                    // both objects instead of waiting silently.
                    let volume_message = format!(
                        "Cannot bind PersistentVolume to requested PersistentVolumeClaim {:?} due to incompatible volumeMode.",
                        claim.metadata.name.as_deref().unwrap_or("")
                    );
                    self.warn(volume.as_ref(), reasons::VOLUME_MISMATCH, volume_message);
                    let claim_message = format!(
                        "Cannot bind PersistentVolume {:?} to requested PersistentVolumeClaim due to incompatible volumeMode.",
                        VolumeName::of(volume).as_str().to_owned()
                    );
                    self.warn(claim.as_ref(), reasons::VOLUME_MISMATCH, claim_message);
                    return Ok(Next::nothing());
                }
                // Bound on the volume side only: a provisioner or a crash
                // mid-bind left it so. The claim sync finishes the binding.
                tracing::debug!(claim = %ObjectKey::of(claim.as_ref()), "volume waits for its claim to be bound");
                Ok(Next {
                    sync_claims: vec![ObjectKey::of(claim.as_ref())],
                    ..Next::default()
                })
            }
            VolumeSituation::ClaimBoundHere(claim) => {
                self.set_volume_phase(volume, VolumePhase::Bound, None)
                    .await?;
                if valid {
                    // Nothing was written unless the phase lagged (then
                    // the version settled is no longer the stored one).
                    self.cache.settle_volume(volume, &claim);
                }
                Ok(Next::nothing())
            }
            VolumeSituation::ClaimBoundElsewhere => {
                let provisioned = has_annotation(&volume.metadata, ANN_DYNAMICALLY_PROVISIONED);
                if provisioned && reclaim_policy(volume) == ReclaimPolicy::Delete {
                    // Provisioned for this claim, which took another volume:
                    // this one is not needed any more.
                    self.unless_provisioning(volume)?;
                    self.release_and_reclaim(volume).await?;
                    Ok(Next::nothing())
                } else {
                    tracing::debug!(
                        by_controller = has_annotation(&volume.metadata, ANN_BOUND_BY_CONTROLLER),
                        "claim is bound to another volume, unbinding"
                    );
                    self.unbind_volume(volume).await?;
                    Ok(Next::nothing())
                }
            }
        }
    }

    /// The claim a volume's claimRef names, if it exists with the claimRef's
    /// UID. A claim missing from the shadow cache is looked up on the server
    /// before the volume is released: releasing because of a stale cache would
    /// reclaim a volume in use. A released volume's claim found in the cache
    /// is looked up on the server too: the volume was released because the
    /// claim was gone, and binding it again to a copy the cache kept would
    /// release it a second time (a second reclaim).
    async fn claim_of_volume(
        &self,
        volume: &PersistentVolume,
    ) -> Result<Option<Arc<PersistentVolumeClaim>>> {
        let uid = claim_ref_uid(volume);
        let Some(key) = claim_ref_key(volume).filter(|_| !uid.is_empty()) else {
            return Ok(None);
        };
        let cached = self.cache.claim(&key);
        let cached_uid = cached.as_ref().and_then(|c| c.metadata.uid.as_deref());
        let reclaiming = matches!(
            volume_phase(volume),
            Some(VolumePhase::Released | VolumePhase::Failed)
        );
        if cached_uid == Some(uid) && !reclaiming {
            return Ok(cached);
        }
        if cached.is_none() && reclaiming {
            return Ok(None);
        }
        let live =
            kube::Api::<PersistentVolumeClaim>::namespaced(self.client.clone(), &key.namespace)
                .get_opt(&key.name)
                .await
                .map_err(api(|| format!("getting claim {key}")))?;
        Ok(live
            .filter(|c| c.metadata.uid.as_deref() == Some(uid))
            .map(Arc::new))
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
        let provisioning = operations::provision(&key.namespace, &key.name, claim_ref_uid(volume));
        if self.operations().is_running(&provisioning) {
            tracing::debug!(claim = %key, "provisioning for the volume's claim still runs");
            return Err(Error::Waiting {
                object: format!("volume {}", VolumeName::of(volume)),
                reason: format!("{provisioning} still runs"),
            });
        }
        Ok(())
    }

    /// Marks a volume Released (unless it already is, or Failed) and runs
    /// its reclaim policy.
    async fn release_and_reclaim(&self, volume: &Arc<PersistentVolume>) -> Result<()> {
        let volume = if let Some(VolumePhase::Released | VolumePhase::Failed) = volume_phase(volume)
        {
            Arc::clone(volume)
        } else {
            tracing::info!(
                policy = %reclaim_policy(volume),
                "volume released, reclaim policy will run"
            );
            self.set_volume_phase(volume, VolumePhase::Released, None)
                .await?
        };
        self.reclaim_volume(&volume).await
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

#[cfg(test)]
mod tests;
