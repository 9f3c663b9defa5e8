//! The text every packed object is compressed against: a bound volume and a
//! bound claim as the controller writes them, with the fields, annotations
//! and values most objects share. An object's own text then packs to its
//! names, UIDs, versions and sizes, a sixth to a third of its length.
//!
//! The samples are read into their types and written back once, so the
//! dictionary has the exact field order every packed object has. It is the
//! same in every process, and nothing packed outlives the process.

use std::sync::OnceLock;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};

const SAMPLE_VOLUME: &str = r#"{"apiVersion":"v1","kind":"PersistentVolume","metadata":{
 "annotations":{"pv.kubernetes.io/bound-by-controller":"yes","pv.kubernetes.io/provisioned-by":"ebs.csi.aws.com",
  "pv.kubernetes.io/migrated-to":"ebs.csi.aws.com","volume.kubernetes.io/provisioner-deletion-secret-name":""},
 "creationTimestamp":"2026-01-01T00:00:00Z","finalizers":["kubernetes.io/pv-protection","external-provisioner.volume.kubernetes.io/finalizer"],
 "labels":{"topology.kubernetes.io/zone":"zone-a","topology.kubernetes.io/region":"region-1"},
 "name":"pvc-00000000-0000-0000-0000-000000000000","resourceVersion":"100000","uid":"00000000-0000-0000-0000-000000000000"},
 "spec":{"accessModes":["ReadWriteOnce","ReadWriteMany","ReadOnlyMany","ReadWriteOncePod"],"capacity":{"storage":"10Gi"},
  "claimRef":{"apiVersion":"v1","kind":"PersistentVolumeClaim","name":"data","namespace":"default","resourceVersion":"100000","uid":"00000000-0000-0000-0000-000000000000"},
  "csi":{"driver":"ebs.csi.aws.com","fsType":"ext4","volumeAttributes":{"storage.kubernetes.io/csiProvisionerIdentity":"1700000000000-0000-ebs.csi.aws.com"},"volumeHandle":"vol-0"},
  "hostPath":{"path":"/tmp/","type":"DirectoryOrCreate"},
  "nodeAffinity":{"required":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"topology.kubernetes.io/zone","operator":"In","values":["zone-a"]}]}]}},
  "persistentVolumeReclaimPolicy":"Delete","storageClassName":"standard","volumeMode":"Filesystem"},
 "status":{"lastPhaseTransitionTime":"2026-01-01T00:00:00Z","phase":"Available"}}"#;

const SAMPLE_CLAIM: &str = r#"{"apiVersion":"v1","kind":"PersistentVolumeClaim","metadata":{
 "annotations":{"pv.kubernetes.io/bind-completed":"yes","pv.kubernetes.io/bound-by-controller":"yes",
  "volume.beta.kubernetes.io/storage-provisioner":"ebs.csi.aws.com","volume.kubernetes.io/storage-provisioner":"ebs.csi.aws.com",
  "volume.kubernetes.io/selected-node":"node-1"},
 "creationTimestamp":"2026-01-01T00:00:00Z","finalizers":["kubernetes.io/pvc-protection"],"labels":{"app":"data"},
 "name":"data","namespace":"default","resourceVersion":"100000","uid":"00000000-0000-0000-0000-000000000000"},
 "spec":{"accessModes":["ReadWriteOnce","ReadWriteMany"],"resources":{"requests":{"storage":"10Gi"}},
  "selector":{"matchLabels":{"tier":"gold"}},"storageClassName":"standard","volumeMode":"Filesystem",
  "volumeName":"pvc-00000000-0000-0000-0000-000000000000"},
 "status":{"accessModes":["ReadWriteOnce"],"capacity":{"storage":"10Gi"},"phase":"Pending"}}"#;

/// The dictionary packed objects are compressed against.
pub(super) fn dictionary() -> &'static [u8] {
    static DICTIONARY: OnceLock<Vec<u8>> = OnceLock::new();
    DICTIONARY.get_or_init(|| {
        let mut text = canonical::<PersistentVolume>(SAMPLE_VOLUME);
        text.extend(canonical::<PersistentVolumeClaim>(SAMPLE_CLAIM));
        text
    })
}

/// `sample` as its type writes it; the sample as written if it does not
/// read (a dictionary only changes how well objects pack, never what they
/// unpack to).
fn canonical<K: serde::Serialize + serde::de::DeserializeOwned>(sample: &str) -> Vec<u8> {
    serde_json::from_str::<K>(sample)
        .and_then(|object| serde_json::to_vec(&object))
        .unwrap_or_else(|_| sample.as_bytes().to_vec())
}

#[cfg(test)]
mod tests;
