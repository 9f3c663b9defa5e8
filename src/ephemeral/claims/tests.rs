use k8s_openapi::api::core::v1::{EphemeralVolumeSource, PodSpec, Volume};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::*;

fn pod(volumes: &[&str]) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some("test-pod".to_string()),
            namespace: Some("ns".to_string()),
            uid: Some("uid-pod".to_string()),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            volumes: Some(
                volumes
                    .iter()
                    .map(|name| Volume {
                        name: (*name).to_string(),
                        ephemeral: Some(EphemeralVolumeSource {
                            volume_claim_template: Some(PersistentVolumeClaimTemplate::default()),
                        }),
                        ..Volume::default()
                    })
                    .collect(),
            ),
            ..PodSpec::default()
        }),
        status: None,
    }
}

#[test]
fn a_claim_is_named_after_pod_and_volume_and_controlled_by_the_pod() {
    let pod = pod(&["scratch"]);
    let claim = claim_for(&pod, "scratch", &PersistentVolumeClaimTemplate::default());
    assert_eq!(claim.name_any(), "test-pod-scratch");
    assert_eq!(claim.namespace().as_deref(), Some("ns"));
    assert_eq!(not_for_pod(&pod, &claim), None);
    assert_eq!(claim_keys(&pod), [ObjectKey::new("ns", "test-pod-scratch")]);
}

#[test]
fn a_claim_without_the_pod_as_controller_is_not_the_pods() {
    let pod = pod(&["scratch"]);
    let mut claim = claim_for(&pod, "scratch", &PersistentVolumeClaimTemplate::default());
    for owner in claim.metadata.owner_references.iter_mut().flatten() {
        owner.controller = Some(false);
    }
    assert_eq!(
        not_for_pod(&pod, &claim).as_deref(),
        Some("PVC ns/test-pod-scratch was not created for pod ns/test-pod (pod is not owner)")
    );
}

#[test]
fn only_a_live_pod_with_a_missing_or_foreign_claim_needs_work() {
    let mut pod = pod(&["a", "b"]);
    let owned = std::sync::Arc::new(claim_for(
        &pod,
        "a",
        &PersistentVolumeClaimTemplate::default(),
    ));
    let only_a = |key: &ObjectKey| (key.name == "test-pod-a").then(|| owned.clone());
    assert!(needs_work(&pod, only_a), "claim b is missing");
    let both = |_: &ObjectKey| Some(owned.clone());
    assert!(
        !needs_work(&pod, both),
        "every claim exists and is the pod's"
    );
    let foreign = std::sync::Arc::new(PersistentVolumeClaim::default());
    assert!(
        needs_work(&pod, |_| Some(foreign.clone())),
        "claims of someone else"
    );
    pod.metadata.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
    assert!(
        !needs_work(&pod, |_| None),
        "a pod being deleted needs nothing"
    );
    assert!(
        !needs_work(&self::pod(&[]), |_| None),
        "no ephemeral volume"
    );
}
