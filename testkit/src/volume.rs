//! The PersistentVolume builder.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{
    CSIPersistentVolumeSource, GCEPersistentDiskVolumeSource, HostPathVolumeSource,
    ObjectReference, PersistentVolume, PersistentVolumeSpec, PersistentVolumeStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;

use crate::{ROX, RWO, annotation_value, non_empty, storage, strings};

/// A volume under construction; start one with [`volume`], finish it with
/// [`VolumeBuilder::build`], [`VolumeBuilder::arc`] or `.into()`. The field
/// is public so that a test can reach what no method sets.
#[derive(Clone, Debug)]
pub struct VolumeBuilder(pub PersistentVolume);

/// A volume of the given capacity: phase Pending, access modes
/// ReadWriteOnce + ReadOnlyMany, volume mode Filesystem, reclaim policy
/// Retain, a GCE PD source, no class, no claimRef.
pub fn volume(name: &str, capacity: &str) -> VolumeBuilder {
    VolumeBuilder(PersistentVolume {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            ..Default::default()
        },
        spec: Some(PersistentVolumeSpec {
            capacity: Some(storage(capacity)),
            access_modes: Some(strings(&[RWO, ROX])),
            persistent_volume_reclaim_policy: Some("Retain".to_string()),
            volume_mode: Some("Filesystem".to_string()),
            gce_persistent_disk: Some(GCEPersistentDiskVolumeSource::default()),
            ..Default::default()
        }),
        status: Some(PersistentVolumeStatus {
            phase: Some("Pending".to_string()),
            ..Default::default()
        }),
    })
}

/// The volumes of a list of builders, for a row's volume lists.
pub fn volumes<const N: usize>(list: [VolumeBuilder; N]) -> Vec<PersistentVolume> {
    list.into_iter().map(VolumeBuilder::build).collect()
}

impl VolumeBuilder {
    fn spec(&mut self) -> &mut PersistentVolumeSpec {
        self.0.spec.get_or_insert_with(Default::default)
    }

    fn status(&mut self) -> &mut PersistentVolumeStatus {
        self.0.status.get_or_insert_with(Default::default)
    }

    /// A claimRef to the claim `namespace/name` with the given UID, as the
    /// controller writes one (kind and apiVersion set); an empty namespace,
    /// name or UID is left out (`""` UID: pre-bound by name).
    #[must_use]
    pub fn claim_ref(mut self, namespace: &str, name: &str, uid: &str) -> Self {
        self.spec().claim_ref = Some(ObjectReference {
            kind: Some("PersistentVolumeClaim".to_string()),
            api_version: Some("v1".to_string()),
            namespace: non_empty(namespace),
            name: non_empty(name),
            uid: non_empty(uid),
            ..Default::default()
        });
        self
    }

    /// A claimRef to the claim `default/<claim>` with the given UID (`""`:
    /// pre-bound by name); see [`VolumeBuilder::claim_ref`].
    #[must_use]
    pub fn bound_to(self, uid: &str, claim: &str) -> Self {
        self.claim_ref("default", claim, uid)
    }

    /// Sets `status.phase`.
    #[must_use]
    pub fn phase(mut self, phase: &str) -> Self {
        self.status().phase = Some(phase.to_string());
        self
    }

    /// Sets `status.message`.
    #[must_use]
    pub fn message(mut self, message: &str) -> Self {
        self.status().message = Some(message.to_string());
        self
    }

    /// Sets the reclaim policy (`""`: none at all).
    #[must_use]
    pub fn policy(mut self, policy: &str) -> Self {
        self.spec().persistent_volume_reclaim_policy = non_empty(policy);
        self
    }

    /// Sets `spec.storageClassName` (`""`: none, which for a volume means the
    /// same as an empty class).
    #[must_use]
    pub fn class(mut self, class: &str) -> Self {
        self.spec().storage_class_name = non_empty(class);
        self
    }

    /// Sets the access modes (strings, so that a test can also write one the
    /// controller does not know).
    #[must_use]
    pub fn modes(mut self, list: &[&str]) -> Self {
        self.spec().access_modes = Some(strings(list));
        self
    }

    /// Sets the volume mode (`""`: the field absent).
    #[must_use]
    pub fn volume_mode(mut self, mode: &str) -> Self {
        self.spec().volume_mode = non_empty(mode);
        self
    }

    /// Sets `spec.volumeAttributesClassName` (`""` stays an empty name).
    #[must_use]
    pub fn vac(mut self, class: &str) -> Self {
        self.spec().volume_attributes_class_name = Some(class.to_string());
        self
    }

    /// Adds annotations with upstream's test values: the mock plugin for
    /// provisioner keys, `yes` for the others.
    #[must_use]
    pub fn annotations(mut self, keys: &[&str]) -> Self {
        let map = self
            .0
            .metadata
            .annotations
            .get_or_insert_with(BTreeMap::new);
        for key in keys {
            map.insert((*key).to_string(), annotation_value(key));
        }
        self
    }

    /// Adds one annotation with the given value.
    #[must_use]
    pub fn annotation(mut self, key: &str, value: &str) -> Self {
        self.0
            .metadata
            .annotations
            .get_or_insert_with(BTreeMap::new)
            .insert(key.to_string(), value.to_string());
        self
    }

    /// Adds labels.
    #[must_use]
    pub fn labels(mut self, labels: &[(&str, &str)]) -> Self {
        let map = self.0.metadata.labels.get_or_insert_with(BTreeMap::new);
        for (key, value) in labels {
            map.insert((*key).to_string(), (*value).to_string());
        }
        self
    }

    /// A CSI volume of `driver` (handle `handle`) instead of the GCE PD
    /// source.
    #[must_use]
    pub fn csi(self, driver: &str) -> Self {
        let mut this = self.no_source();
        this.spec().csi = Some(CSIPersistentVolumeSource {
            driver: driver.to_string(),
            volume_handle: "handle".to_string(),
            ..Default::default()
        });
        this
    }

    /// Removes the volume source the builder sets (GCE PD or CSI): a volume
    /// no plugin recognises.
    #[must_use]
    pub fn no_source(mut self) -> Self {
        let spec = self.spec();
        spec.gce_persistent_disk = None;
        spec.csi = None;
        self
    }

    /// Makes it a hostPath volume at `path` (instead of the GCE PD the
    /// builder sets): one the in-process plugins can delete and recycle.
    #[must_use]
    pub fn host_path(mut self, path: &str) -> Self {
        let spec = self.spec();
        spec.gce_persistent_disk = None;
        spec.host_path = Some(HostPathVolumeSource {
            path: path.to_string(),
            type_: None,
        });
        self
    }

    /// Marks the volume as being deleted: a deletionTimestamp, the grace
    /// period a real server stamps with it, and the protection finalizer
    /// that keeps it on the server.
    #[must_use]
    pub fn deleting(mut self) -> Self {
        self.0.metadata.deletion_timestamp = Some(Time(Timestamp::UNIX_EPOCH));
        self.0.metadata.deletion_grace_period_seconds = Some(0);
        self.0.metadata.finalizers = Some(vec![k8s_names::FINALIZER_PV_PROTECTION.to_string()]);
        self
    }

    /// Sets the finalizers.
    #[must_use]
    pub fn finalizers(mut self, list: &[&str]) -> Self {
        self.0.metadata.finalizers = Some(strings(list));
        self
    }

    /// Sets `metadata.resourceVersion` (objects offered to a cache without
    /// a server).
    #[must_use]
    pub fn rv(mut self, resource_version: &str) -> Self {
        self.0.metadata.resource_version = Some(resource_version.to_string());
        self
    }

    /// The volume.
    #[must_use]
    pub fn build(self) -> PersistentVolume {
        self.0
    }

    /// The volume, shared as the controller's caches hold it.
    #[must_use]
    pub fn arc(self) -> Arc<PersistentVolume> {
        Arc::new(self.0)
    }
}

impl From<VolumeBuilder> for PersistentVolume {
    fn from(builder: VolumeBuilder) -> Self {
        builder.0
    }
}
