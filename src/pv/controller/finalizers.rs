//! What the controller keeps up to date on every volume and claim before it
//! decides anything else: the `migrated-to` annotation (see
//! [`crate::pv::migration`]) and the deletion-protection finalizers of
//! provisioned volumes (upstream's HonorPVReclaimPolicy, GA).
//!
//! A volume this controller provisions with policy Delete carries
//! `kubernetes.io/pv-controller`, so that deleting the volume object (by a
//! user, while bound) does not leak its storage: the object stays until the
//! reclaim has deleted the storage, and only then is the finalizer removed.
//! A volume whose plugin migrated to CSI belongs to the driver's external
//! provisioner, which has a finalizer of its own; the controller's is
//! removed from it.

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};

use crate::pv::constants::IN_TREE_PLUGIN_PREFIX;
use crate::pv::migration::{
    MigratedToChange, claim_migrated_to_change, csi_driver_of, volume_migrated_to_change,
};
use crate::pv::objects::{
    ReclaimPolicy, annotation, has_annotation, is_being_deleted, reclaim_policy,
};
use k8s_names::{
    ANN_DYNAMICALLY_PROVISIONED, ANN_MIGRATED_TO, ANN_STORAGE_DELETED, ANN_VALUE_YES,
    FINALIZER_EXTERNAL_PROVISIONER, FINALIZER_PV_CONTROLLER,
};

/// The finalizers a volume should have, when they differ from what it has.
/// Only volumes provisioned by an in-tree plugin are touched: one that
/// migrated to CSI loses the controller's finalizer (and keeps the external
/// provisioner's); otherwise policy Delete gets the controller's finalizer,
/// Retain and Recycle lose it, and the external provisioner's finalizer
/// (left by a rolled-back migration) is removed, since no external
/// provisioner will ever remove it.
pub(super) fn wanted_finalizers(volume: &PersistentVolume) -> Option<Vec<String>> {
    let provisioner = annotation(&volume.metadata, ANN_DYNAMICALLY_PROVISIONED)?;
    let current = volume.metadata.finalizers.clone().unwrap_or_default();
    if csi_driver_of(provisioner).is_some() {
        let wanted: Vec<String> = current
            .iter()
            .filter(|f| f.as_str() != FINALIZER_PV_CONTROLLER)
            .cloned()
            .collect();
        return (wanted != current).then_some(wanted);
    }
    if !provisioner.starts_with(IN_TREE_PLUGIN_PREFIX) {
        return None;
    }
    let mut wanted: Vec<String> = current
        .iter()
        .filter(|f| f.as_str() != FINALIZER_EXTERNAL_PROVISIONER)
        .cloned()
        .collect();
    let has_ours = wanted.iter().any(|f| f == FINALIZER_PV_CONTROLLER);
    // The API server refuses new finalizers on an object being deleted.
    let deleting = is_being_deleted(&volume.metadata);
    match reclaim_policy(volume) {
        ReclaimPolicy::Delete if !has_ours && !deleting => {
            wanted.push(FINALIZER_PV_CONTROLLER.to_string());
        }
        ReclaimPolicy::Retain | ReclaimPolicy::Recycle if has_ours => {
            wanted.retain(|f| f != FINALIZER_PV_CONTROLLER);
        }
        _ => {}
    }
    (wanted != current).then_some(wanted)
}

/// Applies a `migrated-to` change to an object's annotations.
pub(crate) fn apply_migrated_to(
    annotations: &mut Option<std::collections::BTreeMap<String, String>>,
    change: MigratedToChange,
) -> bool {
    match change {
        None => false,
        Some(Some(driver)) => {
            annotations
                .get_or_insert_with(Default::default)
                .insert(ANN_MIGRATED_TO.to_string(), driver);
            true
        }
        Some(None) => {
            if let Some(map) = annotations.as_mut() {
                map.remove(ANN_MIGRATED_TO);
                if map.is_empty() {
                    *annotations = None;
                }
            }
            true
        }
    }
}

/// The annealing of a volume: its `migrated-to` first (the finalizers
/// depend on it), then its finalizers, in one write.
pub(super) fn anneal_volume_edit(volume: &mut PersistentVolume) -> bool {
    let change = volume_migrated_to_change(volume);
    let annotated = apply_migrated_to(&mut volume.metadata.annotations, change);
    match wanted_finalizers(volume) {
        Some(wanted) => {
            volume.metadata.finalizers = (!wanted.is_empty()).then_some(wanted);
            true
        }
        None => annotated,
    }
}

/// The annealing of a claim: its `migrated-to` in line with the
/// provisioner it was handed to.
pub(super) fn anneal_claim_edit(claim: &mut PersistentVolumeClaim) -> bool {
    let change = claim_migrated_to_change(claim);
    apply_migrated_to(&mut claim.metadata.annotations, change)
}

/// Whether the controller already deleted this volume's storage.
pub(crate) fn storage_already_deleted(volume: &PersistentVolume) -> bool {
    has_annotation(&volume.metadata, ANN_STORAGE_DELETED)
}

/// The edit of [`super::changes::mark_storage_deleted`].
pub(super) fn storage_deleted_edit(volume: &mut PersistentVolume) -> bool {
    let finalizers = volume.metadata.finalizers.take().unwrap_or_default();
    let had_ours = finalizers.iter().any(|f| f == FINALIZER_PV_CONTROLLER);
    let rest: Vec<String> = finalizers
        .into_iter()
        .filter(|f| f != FINALIZER_PV_CONTROLLER)
        .collect();
    let lingers = is_being_deleted(&volume.metadata) || !rest.is_empty();
    volume.metadata.finalizers = (!rest.is_empty()).then_some(rest);
    let mut edit = had_ours;
    if lingers && !storage_already_deleted(volume) {
        volume
            .metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert(ANN_STORAGE_DELETED.to_string(), ANN_VALUE_YES.to_string());
        edit = true;
    }
    edit
}

#[cfg(test)]
mod tests;
