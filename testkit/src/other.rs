//! StorageClasses and pods, the objects around volumes and claims.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateRunning, ContainerStateTerminated, ContainerStatus,
    EphemeralVolumeSource, PersistentVolumeClaim, PersistentVolumeClaimTemplate,
    PersistentVolumeClaimVolumeSource, Pod, PodSpec, PodStatus, Volume,
};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;

/// A StorageClass with a provisioner and binding mode
/// (`Immediate` or `WaitForFirstConsumer`), reclaim policy Delete.
pub fn storage_class(name: &str, provisioner: &str, binding_mode: &str) -> StorageClass {
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
pub fn default_class(mut class: StorageClass) -> StorageClass {
    class
        .metadata
        .annotations
        .get_or_insert_with(BTreeMap::new)
        .insert(
            k8s_names::ANN_IS_DEFAULT_CLASS.to_string(),
            "true".to_string(),
        );
    class
}

/// A pod in `default` using the named claims, with a phase and (optionally)
/// a node.
pub fn pod(name: &str, claims: &[&str], phase: &str, node: Option<&str>) -> Pod {
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
pub fn deleting_pod_with_running_init_container(name: &str, claims: &[&str]) -> Pod {
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

/// `pod` with one more volume: an ephemeral one named `volume`, whose claim
/// is made from `template`'s spec.
pub fn with_ephemeral_volume(mut pod: Pod, volume: &str, template: PersistentVolumeClaim) -> Pod {
    let spec = pod.spec.get_or_insert_with(PodSpec::default);
    spec.volumes.get_or_insert_with(Vec::new).push(Volume {
        name: volume.to_string(),
        ephemeral: Some(EphemeralVolumeSource {
            volume_claim_template: Some(PersistentVolumeClaimTemplate {
                metadata: None,
                spec: template.spec.unwrap_or_default(),
            }),
        }),
        ..Volume::default()
    });
    pod
}
