//! Short builders for the objects of scenario tables, so that a row reads
//! like `volume("volume1-1", "1Gi").bound_to("uid1-1", "claim1-1")`.
//!
//! Defaults follow upstream's test framework: namespace `default`, access
//! modes ReadWriteOnce + ReadOnlyMany, volume mode Filesystem, reclaim policy
//! Retain, a GCE PD source on volumes.

#![allow(dead_code)]

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    GCEPersistentDiskVolumeSource, ObjectReference, PersistentVolume, PersistentVolumeClaim,
    PersistentVolumeClaimSpec, PersistentVolumeClaimStatus, PersistentVolumeSpec,
    PersistentVolumeStatus, Pod, PodSpec, PodStatus, VolumeResourceRequirements,
};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    LabelSelector, LabelSelectorRequirement, ObjectMeta, Time,
};
use k8s_openapi::jiff::Timestamp;

/// The provisioner name used for volumes and claims of the mock plugin.
pub(crate) const MOCK_PLUGIN: &str = "kubernetes.io/mock-volume";

pub(crate) const RWO: &str = "ReadWriteOnce";
pub(crate) const ROX: &str = "ReadOnlyMany";
pub(crate) const RWX: &str = "ReadWriteMany";
pub(crate) const RWOP: &str = "ReadWriteOncePod";

pub(crate) const ANN_BIND_COMPLETED: &str = "pv.kubernetes.io/bind-completed";
pub(crate) const ANN_BOUND_BY_CONTROLLER: &str = "pv.kubernetes.io/bound-by-controller";
pub(crate) const ANN_PROVISIONED_BY: &str = "pv.kubernetes.io/provisioned-by";
pub(crate) const ANN_STORAGE_PROVISIONER: &str = "volume.kubernetes.io/storage-provisioner";
pub(crate) const ANN_BETA_STORAGE_PROVISIONER: &str =
    "volume.beta.kubernetes.io/storage-provisioner";
pub(crate) const ANN_SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";
pub(crate) const ANN_BETA_CLASS: &str = "volume.beta.kubernetes.io/storage-class";
pub(crate) const ANN_PRE_RESIZE_CAPACITY: &str = "volume.alpha.kubernetes.io/pre-resize-capacity";
pub(crate) const ANN_MIGRATED_TO: &str = "pv.kubernetes.io/migrated-to";
pub(crate) const ANN_STORAGE_DELETED: &str = "pv-controller.k8s.io/storage-deleted";
pub(crate) const FINALIZER_EXTERNAL: &str = "external-provisioner.volume.kubernetes.io/finalizer";

fn quantity(value: &str) -> Quantity {
    Quantity(value.to_string())
}

fn storage(value: &str) -> BTreeMap<String, Quantity> {
    BTreeMap::from([("storage".to_string(), quantity(value))])
}

fn modes(list: &[&str]) -> Vec<String> {
    list.iter().map(std::string::ToString::to_string).collect()
}

/// The value a test annotation gets: the mock plugin for provisioner keys,
/// `yes` otherwise (as upstream's framework).
fn annotation_value(key: &str) -> String {
    match key {
        ANN_PROVISIONED_BY | ANN_STORAGE_PROVISIONER | ANN_BETA_STORAGE_PROVISIONER => {
            MOCK_PLUGIN.to_string()
        }
        _ => "yes".to_string(),
    }
}

/// A volume builder.
#[derive(Clone, Debug)]
pub struct VolumeBuilder(pub PersistentVolume);

/// A volume of the given capacity, Pending, Retain, no class, unbound.
pub(crate) fn volume(name: &str, capacity: &str) -> VolumeBuilder {
    VolumeBuilder(PersistentVolume {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            ..Default::default()
        },
        spec: Some(PersistentVolumeSpec {
            capacity: Some(storage(capacity)),
            access_modes: Some(modes(&[RWO, ROX])),
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

impl VolumeBuilder {
    fn spec(&mut self) -> &mut PersistentVolumeSpec {
        self.0.spec.get_or_insert_with(Default::default)
    }

    /// claimRef to `default/<claim>` with the given UID ("" = pre-bound by name).
    pub fn bound_to(mut self, uid: &str, claim: &str) -> Self {
        self.spec().claim_ref = Some(ObjectReference {
            kind: Some("PersistentVolumeClaim".to_string()),
            api_version: Some("v1".to_string()),
            namespace: Some("default".to_string()),
            name: Some(claim.to_string()),
            uid: (!uid.is_empty()).then(|| uid.to_string()),
            ..Default::default()
        });
        self
    }

    /// Removes the claimRef.
    pub fn unbound(mut self) -> Self {
        self.spec().claim_ref = None;
        self
    }

    pub fn phase(mut self, phase: &str) -> Self {
        self.0.status.get_or_insert_with(Default::default).phase = Some(phase.to_string());
        self
    }

    pub fn message(mut self, message: &str) -> Self {
        self.0.status.get_or_insert_with(Default::default).message = Some(message.to_string());
        self
    }

    pub fn policy(mut self, policy: &str) -> Self {
        self.spec().persistent_volume_reclaim_policy = Some(policy.to_string());
        self
    }

    pub fn class(mut self, class: &str) -> Self {
        self.spec().storage_class_name = (!class.is_empty()).then(|| class.to_string());
        self
    }

    pub fn modes(mut self, list: &[&str]) -> Self {
        self.spec().access_modes = Some(modes(list));
        self
    }

    pub fn volume_mode(mut self, mode: &str) -> Self {
        self.spec().volume_mode = Some(mode.to_string());
        self
    }

    pub fn vac(mut self, class: &str) -> Self {
        self.spec().volume_attributes_class_name = Some(class.to_string());
        self
    }

    /// Adds annotations with upstream's test values (see `annotation_value`).
    pub fn annotations(mut self, keys: &[&str]) -> Self {
        let map = self
            .0
            .metadata
            .annotations
            .get_or_insert_with(BTreeMap::new);
        for key in keys {
            map.insert(key.to_string(), annotation_value(key));
        }
        self
    }

    pub fn annotation(mut self, key: &str, value: &str) -> Self {
        self.0
            .metadata
            .annotations
            .get_or_insert_with(BTreeMap::new)
            .insert(key.to_string(), value.to_string());
        self
    }

    pub fn labels(mut self, labels: &[(&str, &str)]) -> Self {
        let map = self.0.metadata.labels.get_or_insert_with(BTreeMap::new);
        for (k, v) in labels {
            map.insert(k.to_string(), v.to_string());
        }
        self
    }

    /// A CSI volume of `driver` instead of the default GCE PD source.
    pub fn csi(mut self, driver: &str) -> Self {
        let spec = self.spec();
        spec.gce_persistent_disk = None;
        spec.csi = Some(k8s_openapi::api::core::v1::CSIPersistentVolumeSource {
            driver: driver.to_string(),
            volume_handle: "handle".to_string(),
            ..Default::default()
        });
        self
    }

    /// Marks the volume as being deleted (deletionTimestamp plus a finalizer
    /// so the server keeps it).
    pub fn deleting(mut self) -> Self {
        self.0.metadata.deletion_timestamp = Some(Time(Timestamp::UNIX_EPOCH));
        // A real server always stamps the grace period with the timestamp.
        self.0.metadata.deletion_grace_period_seconds = Some(0);
        self.0.metadata.finalizers = Some(vec!["kubernetes.io/pv-protection".to_string()]);
        self
    }

    pub fn finalizers(mut self, list: &[&str]) -> Self {
        self.0.metadata.finalizers =
            Some(list.iter().map(std::string::ToString::to_string).collect());
        self
    }

    pub fn build(self) -> PersistentVolume {
        self.0
    }
}

impl From<VolumeBuilder> for PersistentVolume {
    fn from(b: VolumeBuilder) -> Self {
        b.0
    }
}

/// A claim builder.
#[derive(Clone, Debug)]
pub struct ClaimBuilder(pub PersistentVolumeClaim);

/// A claim in namespace `default` with the given UID and request, Pending,
/// no class (nil), no volume.
pub(crate) fn claim(name: &str, uid: &str, request: &str) -> ClaimBuilder {
    ClaimBuilder(PersistentVolumeClaim {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some("default".to_string()),
            uid: Some(uid.to_string()),
            ..Default::default()
        },
        spec: Some(PersistentVolumeClaimSpec {
            access_modes: Some(modes(&[RWO, ROX])),
            resources: Some(VolumeResourceRequirements {
                requests: Some(storage(request)),
                ..Default::default()
            }),
            volume_mode: Some("Filesystem".to_string()),
            ..Default::default()
        }),
        status: Some(PersistentVolumeClaimStatus {
            phase: Some("Pending".to_string()),
            ..Default::default()
        }),
    })
}

impl ClaimBuilder {
    fn spec(&mut self) -> &mut PersistentVolumeClaimSpec {
        self.0.spec.get_or_insert_with(Default::default)
    }

    fn status(&mut self) -> &mut PersistentVolumeClaimStatus {
        self.0.status.get_or_insert_with(Default::default)
    }

    pub fn volume_name(mut self, volume: &str) -> Self {
        self.spec().volume_name = (!volume.is_empty()).then(|| volume.to_string());
        self
    }

    /// Sets the phase; Bound also sets status access modes and capacity from
    /// the spec (upstream's framework does the same).
    pub fn phase(mut self, phase: &str) -> Self {
        self.status().phase = Some(phase.to_string());
        if phase == "Bound" {
            let spec = self.0.spec.clone().unwrap_or_default();
            let status = self.status();
            status.access_modes = spec.access_modes.clone();
            status.capacity = spec.resources.and_then(|r| r.requests);
            status.current_volume_attributes_class_name = spec.volume_attributes_class_name;
        } else {
            let status = self.status();
            status.access_modes = None;
            status.capacity = None;
        }
        self
    }

    /// Status capacity as the volume reports it (bound claims).
    pub fn capacity(mut self, capacity: &str) -> Self {
        self.status().capacity = Some(storage(capacity));
        self
    }

    /// Status access modes (bound claims whose volume offers others).
    pub fn status_modes(mut self, list: &[&str]) -> Self {
        self.status().access_modes = Some(modes(list));
        self
    }

    /// Sets `spec.storageClassName` (Some("") is an explicit empty class).
    pub fn class(mut self, class: &str) -> Self {
        self.spec().storage_class_name = Some(class.to_string());
        self
    }

    pub fn modes(mut self, list: &[&str]) -> Self {
        self.spec().access_modes = Some(modes(list));
        self
    }

    pub fn volume_mode(mut self, mode: &str) -> Self {
        self.spec().volume_mode = Some(mode.to_string());
        self
    }

    pub fn vac(mut self, class: &str) -> Self {
        self.spec().volume_attributes_class_name = Some(class.to_string());
        self
    }

    pub fn current_vac(mut self, class: Option<&str>) -> Self {
        self.status().current_volume_attributes_class_name = class.map(str::to_string);
        self
    }

    pub fn annotations(mut self, keys: &[&str]) -> Self {
        let map = self
            .0
            .metadata
            .annotations
            .get_or_insert_with(BTreeMap::new);
        for key in keys {
            map.insert(key.to_string(), annotation_value(key));
        }
        self
    }

    pub fn annotation(mut self, key: &str, value: &str) -> Self {
        self.0
            .metadata
            .annotations
            .get_or_insert_with(BTreeMap::new)
            .insert(key.to_string(), value.to_string());
        self
    }

    /// A label selector with matchLabels.
    pub fn selector(mut self, labels: &[(&str, &str)]) -> Self {
        self.spec().selector = Some(LabelSelector {
            match_labels: Some(
                labels
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            ),
            ..Default::default()
        });
        self
    }

    /// A label selector with one matchExpressions requirement.
    pub fn selector_expression(mut self, key: &str, operator: &str, values: &[&str]) -> Self {
        self.spec().selector = Some(LabelSelector {
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: key.to_string(),
                operator: operator.to_string(),
                values: Some(
                    values
                        .iter()
                        .map(std::string::ToString::to_string)
                        .collect(),
                ),
            }]),
            ..Default::default()
        });
        self
    }

    pub fn namespace(mut self, namespace: &str) -> Self {
        self.0.metadata.namespace = Some(namespace.to_string());
        self
    }

    pub fn build(self) -> PersistentVolumeClaim {
        self.0
    }
}

impl From<ClaimBuilder> for PersistentVolumeClaim {
    fn from(b: ClaimBuilder) -> Self {
        b.0
    }
}

/// A StorageClass with a provisioner and binding mode
/// (`Immediate` or `WaitForFirstConsumer`), reclaim policy Delete.
pub(crate) fn storage_class(name: &str, provisioner: &str, binding_mode: &str) -> StorageClass {
    StorageClass {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            ..Default::default()
        },
        provisioner: provisioner.to_string(),
        reclaim_policy: Some("Delete".to_string()),
        volume_binding_mode: Some(binding_mode.to_string()),
        ..Default::default()
    }
}

/// Marks a StorageClass as the cluster default.
pub(crate) fn default_class(mut class: StorageClass) -> StorageClass {
    class
        .metadata
        .annotations
        .get_or_insert_with(BTreeMap::new)
        .insert(
            "storageclass.kubernetes.io/is-default-class".to_string(),
            "true".to_string(),
        );
    class
}

/// A pod in `default` using the named claims, with a phase and (optionally)
/// a node.
pub(crate) fn pod(name: &str, claims: &[&str], phase: &str, node: Option<&str>) -> Pod {
    use k8s_openapi::api::core::v1::{PersistentVolumeClaimVolumeSource, Volume};
    Pod {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some("default".to_string()),
            uid: Some(format!("uid-{name}")),
            ..Default::default()
        },
        spec: Some(PodSpec {
            node_name: node.map(str::to_string),
            volumes: Some(
                claims
                    .iter()
                    .map(|c| Volume {
                        name: format!("vol-{c}"),
                        persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                            claim_name: c.to_string(),
                            read_only: None,
                        }),
                        ..Default::default()
                    })
                    .collect(),
            ),
            ..Default::default()
        }),
        status: Some(PodStatus {
            phase: Some(phase.to_string()),
            ..Default::default()
        }),
    }
}

/// A pod being deleted whose containers stopped but whose init container
/// still runs: not terminated (upstream's `IsPodTerminated`).
pub(crate) fn deleting_pod_with_running_init_container(name: &str, claims: &[&str]) -> Pod {
    use k8s_openapi::api::core::v1::{
        ContainerState, ContainerStateRunning, ContainerStateTerminated, ContainerStatus,
    };
    let status = |name: &str, state: ContainerState| ContainerStatus {
        name: name.to_string(),
        state: Some(state),
        ..Default::default()
    };
    let mut pod = pod(name, claims, "Running", Some("node1"));
    pod.metadata.deletion_timestamp = Some(Time(Timestamp::UNIX_EPOCH));
    pod.metadata.deletion_grace_period_seconds = Some(30);
    pod.metadata.finalizers = Some(vec!["example.com/hold".to_string()]);
    let pod_status = pod.status.get_or_insert_with(Default::default);
    pod_status.init_container_statuses = Some(vec![status(
        "init",
        ContainerState {
            running: Some(ContainerStateRunning::default()),
            ..Default::default()
        },
    )]);
    pod_status.container_statuses = Some(vec![status(
        "main",
        ContainerState {
            terminated: Some(ContainerStateTerminated::default()),
            ..Default::default()
        },
    )]);
    pod
}

/// Builds a list of volumes from builders.
pub(crate) fn volumes<const N: usize>(list: [VolumeBuilder; N]) -> Vec<PersistentVolume> {
    list.into_iter().map(|b| b.0).collect()
}

/// Builds a list of claims from builders.
pub(crate) fn claims<const N: usize>(list: [ClaimBuilder; N]) -> Vec<PersistentVolumeClaim> {
    list.into_iter().map(|b| b.0).collect()
}
