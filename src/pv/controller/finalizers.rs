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
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::PersistentVolumeSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn volume(provisioner: Option<&str>, policy: &str, finalizers: &[&str]) -> PersistentVolume {
        PersistentVolume {
            metadata: ObjectMeta {
                name: Some("pv".to_string()),
                annotations: provisioner
                    .map(|p| [(ANN_DYNAMICALLY_PROVISIONED.to_string(), p.to_string())].into()),
                finalizers: (!finalizers.is_empty()).then(|| {
                    finalizers
                        .iter()
                        .map(std::string::ToString::to_string)
                        .collect()
                }),
                ..Default::default()
            },
            spec: Some(PersistentVolumeSpec {
                persistent_volume_reclaim_policy: Some(policy.to_string()),
                ..Default::default()
            }),
            status: None,
        }
    }

    /// Upstream's TestModifyDeletionFinalizers (13-1 to 13-15), in this
    /// controller's terms: `None` means no write.
    #[test]
    fn deletion_finalizers_follow_provisioner_policy_and_migration() {
        const EXT: &str = FINALIZER_EXTERNAL_PROVISIONER;
        const OURS: &str = FINALIZER_PV_CONTROLLER;
        const CUSTOM: &str = "test.io/custom";
        const MOCK: &str = "kubernetes.io/mock-volume";
        /// Name, provisioner, policy, finalizers, the finalizers wanted.
        type Case = (
            &'static str,
            Option<&'static str>,
            &'static str,
            &'static [&'static str],
            Option<&'static [&'static str]>,
        );
        let cases: [Case; 15] = [
            (
                "13-1 CSI volume keeps the external finalizer",
                Some("rbd.csi.ceph.com"),
                "Delete",
                &[EXT],
                None,
            ),
            (
                "13-2 CSI volume without finalizer",
                Some("rbd.csi.ceph.com"),
                "Delete",
                &[],
                None,
            ),
            (
                "13-3 in-tree Delete gets ours beside a custom one",
                Some(MOCK),
                "Delete",
                &[CUSTOM],
                Some(&[CUSTOM, OURS]),
            ),
            (
                "13-4 in-tree Delete gets ours",
                Some(MOCK),
                "Delete",
                &[],
                Some(&[OURS]),
            ),
            (
                "13-5 in-tree: the external finalizer is replaced by ours",
                Some(MOCK),
                "Delete",
                &[EXT],
                Some(&[OURS]),
            ),
            (
                "13-6 in-tree with custom and external",
                Some(MOCK),
                "Delete",
                &[CUSTOM, EXT],
                Some(&[CUSTOM, OURS]),
            ),
            (
                "13-7 migrated volume loses ours, keeps external",
                Some("kubernetes.io/gce-pd"),
                "Delete",
                &[EXT, OURS],
                Some(&[EXT]),
            ),
            (
                "13-8 in-tree with both keeps only ours",
                Some(MOCK),
                "Delete",
                &[EXT, OURS],
                Some(&[OURS]),
            ),
            (
                "13-9 in-tree with all three",
                Some(MOCK),
                "Delete",
                &[CUSTOM, EXT, OURS],
                Some(&[CUSTOM, OURS]),
            ),
            (
                "13-10 not provisioned, external finalizer",
                None,
                "Delete",
                &[EXT],
                None,
            ),
            (
                "13-11 not provisioned, no finalizers",
                None,
                "Delete",
                &[],
                None,
            ),
            (
                "13-12 Retain without finalizer",
                Some(MOCK),
                "Retain",
                &[],
                None,
            ),
            (
                "13-13 Recycle without finalizer",
                Some(MOCK),
                "Recycle",
                &[],
                None,
            ),
            (
                "13-14 Retain loses ours",
                Some(MOCK),
                "Retain",
                &[OURS],
                Some(&[]),
            ),
            ("13-15 static volume", None, "Retain", &[], None),
        ];
        for (name, provisioner, policy, finalizers, wanted) in cases {
            let wanted = wanted.map(|list| {
                list.iter()
                    .map(std::string::ToString::to_string)
                    .collect::<Vec<_>>()
            });
            assert_eq!(
                wanted_finalizers(&volume(provisioner, policy, finalizers)),
                wanted,
                "{name}"
            );
        }
    }

    #[test]
    fn in_tree_delete_gets_the_finalizer() {
        let v = volume(
            Some("kubernetes.io/host-path"),
            "Delete",
            &["kubernetes.io/pv-protection"],
        );
        assert_eq!(
            wanted_finalizers(&v),
            Some(vec![
                "kubernetes.io/pv-protection".to_string(),
                FINALIZER_PV_CONTROLLER.to_string()
            ])
        );
        let done = volume(
            Some("kubernetes.io/host-path"),
            "Delete",
            &[FINALIZER_PV_CONTROLLER],
        );
        assert_eq!(wanted_finalizers(&done), None);
    }

    #[test]
    fn retain_and_recycle_lose_it_and_external_finalizer_goes() {
        for policy in ["Retain", "Recycle"] {
            let v = volume(
                Some("kubernetes.io/host-path"),
                policy,
                &[FINALIZER_PV_CONTROLLER],
            );
            assert_eq!(wanted_finalizers(&v), Some(vec![]));
        }
        let v = volume(
            Some("kubernetes.io/host-path"),
            "Delete",
            &[FINALIZER_EXTERNAL_PROVISIONER, FINALIZER_PV_CONTROLLER],
        );
        assert_eq!(
            wanted_finalizers(&v),
            Some(vec![FINALIZER_PV_CONTROLLER.to_string()])
        );
    }

    #[test]
    fn external_and_unprovisioned_volumes_are_left_alone() {
        assert_eq!(wanted_finalizers(&volume(None, "Delete", &[])), None);
        let external = volume(
            Some("ebs.csi.aws.com"),
            "Delete",
            &[FINALIZER_EXTERNAL_PROVISIONER],
        );
        assert_eq!(wanted_finalizers(&external), None);
    }
}
