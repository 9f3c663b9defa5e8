//! A bind made elsewhere, judged by the binder's rules: whether another
//! volume is as good a choice for a claim as the one this controller chose
//! (both fit it; same capacity, class, access modes, volume mode and node
//! affinity), and which volume this controller would have chosen for a
//! claim another controller bound first (the volume it was bound to
//! counted free again).

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};

use k8s_names::{ANN_BIND_COMPLETED, ANN_BOUND_BY_CONTROLLER};

use super::Binder;
use super::claim::check_volume_satisfies_claim;
use crate::pv::index::VolumeIndex;
use crate::pv::keys::VolumeName;
use crate::pv::objects::{
    claim_class, claim_ref_key, volume_access_modes, volume_capacity, volume_class, volume_mode,
};
use crate::pv::store::PvStore;
use crate::runtime::keys::ObjectKey;

/// The annotations a bind leaves on a claim, removed to see it unbound.
const BIND_ANNOTATIONS: [&str; 2] = [ANN_BIND_COMPLETED, ANN_BOUND_BY_CONTROLLER];

/// The claim as it was before a bind: no volume name, no bind annotations.
fn unbound(claim: &PersistentVolumeClaim) -> PersistentVolumeClaim {
    let mut claim = claim.clone();
    if let Some(spec) = claim.spec.as_mut() {
        spec.volume_name = None;
    }
    if let Some(annotations) = claim.metadata.annotations.as_mut() {
        for key in BIND_ANNOTATIONS {
            annotations.remove(key);
        }
    }
    claim.status = None;
    claim
}

/// The volume as it was before a bind: no claimRef, Available, not being
/// deleted (a volume released and reclaimed since the bind was made is
/// judged as it was when it was chosen).
fn freed(volume: &PersistentVolume) -> PersistentVolume {
    let mut volume = volume.clone();
    volume.metadata.deletion_timestamp = None;
    if let Some(spec) = volume.spec.as_mut() {
        spec.claim_ref = None;
    }
    volume.status.get_or_insert_with(Default::default).phase = Some("Available".to_string());
    volume
}

/// Whether `other` is as good a choice as `ours` for the claim `key`.
fn equivalent(store: &PvStore, key: &ObjectKey, ours: &str, other: &str) -> bool {
    let (Some(ours), Some(other), Some(claim)) = (
        store.volume(&VolumeName::new(ours)),
        store.volume(&VolumeName::new(other)),
        store.claim(key),
    ) else {
        return false;
    };
    let claim = unbound(&claim);
    let fits =
        |volume: &PersistentVolume| check_volume_satisfies_claim(&freed(volume), &claim).is_ok();
    let affinity = |volume: &PersistentVolume| {
        volume
            .spec
            .as_ref()
            .and_then(|spec| spec.node_affinity.as_ref())
            .map(|affinity| serde_json::to_value(affinity).unwrap_or_default())
    };
    fits(&ours)
        && fits(&other)
        && volume_capacity(&ours).ok() == volume_capacity(&other).ok()
        && volume_class(&ours) == volume_class(&other)
        && volume_access_modes(&ours).ok() == volume_access_modes(&other).ok()
        && volume_mode(&ours) == volume_mode(&other)
        && affinity(&ours) == affinity(&other)
}

/// The volume this controller would bind the claim `key` to, with `taken`
/// (the volume it was bound to) free again: `Some(None)` to leave it
/// Pending; `None` when the claim is gone.
fn would_bind(store: &PvStore, key: &ObjectKey, taken: &str) -> Option<Option<String>> {
    let claim = unbound(store.claim(key)?.as_ref());
    let class = claim_class(&claim);
    let mut index = VolumeIndex::default();
    // Only volumes the claim could get: of its class, free or pre-bound to
    // it (the index never offers a volume bound to another claim), so a
    // completed cluster's bound volumes cost nothing here.
    for volume in store.volumes() {
        if volume_class(&volume) != class {
            continue;
        }
        let inserted = if volume.metadata.name.as_deref() == Some(taken) {
            index.insert(freed(&volume))
        } else if claim_ref_key(&volume).is_none_or(|bound_to| bound_to == *key) {
            index.insert(volume)
        } else {
            continue;
        };
        if inserted.is_err() {
            continue;
        }
    }
    let chosen = index
        .find_best_match(&claim, false)
        .ok()
        .flatten()
        .and_then(|volume| volume.metadata.name.clone());
    Some(chosen)
}

impl Binder {
    /// Whether the volume `other` is as good a choice as `ours` for the
    /// claim `key`, as this controller knows them.
    pub(crate) fn equally_good(&self, key: &ObjectKey, ours: &str, other: &str) -> bool {
        equivalent(&self.store, key, ours, other)
    }

    /// The volume this controller would bind the claim `key` to, had
    /// `taken` (the volume another controller bound it to) been free:
    /// `Some(None)` to leave the claim Pending; `None` when the claim is
    /// not known here.
    pub(crate) fn would_bind(&self, key: &ObjectKey, taken: &str) -> Option<Option<String>> {
        would_bind(&self.store, key, taken)
    }
}

#[cfg(test)]
mod tests;
