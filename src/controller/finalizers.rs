//! Deletion-protection finalizers of provisioned volumes (upstream's
//! HonorPVReclaimPolicy, GA): a volume this controller provisions with
//! policy Delete carries `kubernetes.io/pv-controller`, so that deleting the
//! volume object (by a user, while bound) does not leak its storage: the
//! object stays until the reclaim has deleted the storage, and only then is
//! the finalizer removed.

use std::sync::Arc;

use k8s_openapi::api::core::v1::PersistentVolume;

use super::Controller;
use super::volume::reclaim_policy;
use crate::constants::{
    ANN_DYNAMICALLY_PROVISIONED, FINALIZER_EXTERNAL_PROVISIONER, FINALIZER_PV_CONTROLLER,
    IN_TREE_PLUGIN_PREFIX,
};
use crate::error::Result;

/// The finalizers a volume should have, when they differ from what it has.
/// Only volumes provisioned by an in-tree plugin are touched: policy Delete
/// gets the controller's finalizer, Retain and Recycle lose it, and the
/// external provisioner's finalizer (left by a rolled-back CSI migration) is
/// removed, since no external provisioner will ever remove it.
pub fn wanted_finalizers(volume: &PersistentVolume) -> Option<Vec<String>> {
    let provisioner = crate::objects::annotation(&volume.metadata, ANN_DYNAMICALLY_PROVISIONED)?;
    if !provisioner.starts_with(IN_TREE_PLUGIN_PREFIX) {
        return None;
    }
    let current = volume.metadata.finalizers.clone().unwrap_or_default();
    let mut wanted: Vec<String> = current
        .iter()
        .filter(|f| f.as_str() != FINALIZER_EXTERNAL_PROVISIONER)
        .cloned()
        .collect();
    let has_ours = wanted.iter().any(|f| f == FINALIZER_PV_CONTROLLER);
    // The API server refuses new finalizers on an object being deleted.
    let deleting = crate::objects::is_being_deleted(&volume.metadata);
    match reclaim_policy(volume) {
        "Delete" if !has_ours && !deleting => wanted.push(FINALIZER_PV_CONTROLLER.to_string()),
        "Retain" | "Recycle" if has_ours => wanted.retain(|f| f != FINALIZER_PV_CONTROLLER),
        _ => {}
    }
    (wanted != current).then_some(wanted)
}

/// Whether the storage of a volume being deleted is known to be gone: the
/// volume was provisioned in-tree with policy Delete (so it had the
/// controller's finalizer) and the finalizer has been removed, which happens
/// only after the storage was deleted. Its object merely waits for other
/// finalizers, and deleting the storage again would be wrong.
pub fn storage_already_deleted(volume: &PersistentVolume) -> bool {
    let in_tree = crate::objects::annotation(&volume.metadata, ANN_DYNAMICALLY_PROVISIONED)
        .is_some_and(|p| p.starts_with(IN_TREE_PLUGIN_PREFIX));
    let has_ours = volume
        .metadata
        .finalizers
        .iter()
        .flatten()
        .any(|f| f == FINALIZER_PV_CONTROLLER);
    crate::objects::is_being_deleted(&volume.metadata) && in_tree && !has_ours
}

impl Controller {
    /// Brings a volume's deletion finalizers in line with its policy; returns
    /// the volume as it now is.
    pub(super) async fn fix_deletion_finalizers(
        &self,
        volume: &Arc<PersistentVolume>,
    ) -> Result<Arc<PersistentVolume>> {
        let Some(wanted) = wanted_finalizers(volume) else {
            return Ok(Arc::clone(volume));
        };
        let mut changed = PersistentVolume::clone(volume);
        changed.metadata.finalizers = (!wanted.is_empty()).then_some(wanted);
        let stored = self.update_volume(&changed).await?;
        tracing::info!(finalizers = ?stored.metadata.finalizers, "volume deletion finalizers updated");
        Ok(stored)
    }

    /// Removes the controller's finalizer once the volume's storage is gone.
    pub(super) async fn remove_deletion_finalizer(
        &self,
        volume: &Arc<PersistentVolume>,
    ) -> Result<Arc<PersistentVolume>> {
        let finalizers = volume.metadata.finalizers.clone().unwrap_or_default();
        if !finalizers.iter().any(|f| f == FINALIZER_PV_CONTROLLER) {
            return Ok(Arc::clone(volume));
        }
        let mut changed = PersistentVolume::clone(volume);
        let rest: Vec<String> = finalizers
            .into_iter()
            .filter(|f| f != FINALIZER_PV_CONTROLLER)
            .collect();
        changed.metadata.finalizers = (!rest.is_empty()).then_some(rest);
        let stored = self.update_volume(&changed).await?;
        tracing::info!("volume deletion finalizer removed");
        Ok(stored)
    }
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
                finalizers: (!finalizers.is_empty())
                    .then(|| finalizers.iter().map(|f| f.to_string()).collect()),
                ..Default::default()
            },
            spec: Some(PersistentVolumeSpec {
                persistent_volume_reclaim_policy: Some(policy.to_string()),
                ..Default::default()
            }),
            status: None,
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
