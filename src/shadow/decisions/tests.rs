use super::*;
use crate::shadow::tests::typed;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::resource::v1::ResourceClaim;
use serde_json::json;

#[test]
fn a_bind_is_one_decision_on_the_claim_from_either_side() {
    let volume_before: PersistentVolume = typed(
        json!({ "metadata": { "name": "v1", "uid": "pv-uid" }, "spec": {}, "status": { "phase": "Available" } }),
    );
    let volume_after: PersistentVolume = typed(
        json!({ "metadata": { "name": "v1", "uid": "pv-uid" },
            "spec": { "claimRef": { "namespace": "ns", "name": "c", "uid": "c-uid" } }, "status": { "phase": "Bound" } }),
    );
    let from_volume = of_write(
        VOLUMES,
        Verb::Update,
        Some(&View::of(&volume_before)),
        Some(&View::of(&volume_after)),
    );
    assert_eq!(from_volume.len(), 1, "{from_volume:?}");
    assert_eq!(from_volume[0].kind, "bind");
    assert_eq!(from_volume[0].expected, Expected::BoundTo("v1".into()));
    let claim_before: PersistentVolumeClaim = typed(
        json!({ "metadata": { "namespace": "ns", "name": "c", "uid": "c-uid" }, "spec": {}, "status": { "phase": "Pending" } }),
    );
    let claim_after: PersistentVolumeClaim = typed(
        json!({ "metadata": { "namespace": "ns", "name": "c", "uid": "c-uid",
            "annotations": { "pv.kubernetes.io/bind-completed": "yes" } }, "spec": { "volumeName": "v1" }, "status": { "phase": "Bound" } }),
    );
    let from_claim = of_write(
        CLAIMS,
        Verb::Update,
        Some(&View::of(&claim_before)),
        Some(&View::of(&claim_after)),
    );
    assert_eq!(from_claim.len(), 1, "{from_claim:?}");
    assert_eq!(from_claim[0].subject, from_volume[0].subject);
    assert_eq!(from_claim[0].uid, from_volume[0].uid);
}

#[test]
fn phases_finalizers_hand_offs_and_deletes_are_decisions() {
    let before: PersistentVolume = typed(
        json!({ "metadata": { "name": "v1", "uid": "u", "finalizers": ["kubernetes.io/pv-controller"] },
            "spec": { "claimRef": { "namespace": "ns", "name": "c", "uid": "c-uid" } }, "status": { "phase": "Bound" } }),
    );
    let after: PersistentVolume = typed(
        json!({ "metadata": { "name": "v1", "uid": "u" }, "spec": {}, "status": { "phase": "Released" } }),
    );
    let kinds: Vec<&str> = of_write(
        VOLUMES,
        Verb::Update,
        Some(&View::of(&before)),
        Some(&View::of(&after)),
    )
    .iter()
    .map(|d| d.kind)
    .collect();
    assert_eq!(kinds, ["unbind", "volume_phase", "volume_finalizer"]);
    let claim: PersistentVolumeClaim =
        typed(json!({ "metadata": { "namespace": "ns", "name": "c", "uid": "c" }, "spec": {} }));
    let handed: PersistentVolumeClaim = typed(
        json!({ "metadata": { "namespace": "ns", "name": "c", "uid": "c",
            "annotations": { "volume.beta.kubernetes.io/storage-provisioner": "p", "volume.kubernetes.io/storage-provisioner": "p" } }, "spec": {} }),
    );
    let decisions = of_write(
        CLAIMS,
        Verb::Update,
        Some(&View::of(&claim)),
        Some(&View::of(&handed)),
    );
    assert_eq!(decisions.len(), 1);
    assert_eq!(decisions[0].kind, "provisioning");
    let deleted = of_write(VOLUMES, Verb::Delete, Some(&View::of(&after)), None);
    assert_eq!(deleted[0].expected, Expected::Gone);
    assert!(of_write(PODS, Verb::Delete, Some(&View::of(&after)), None).is_empty());
}

#[test]
fn a_generated_resource_claim_is_judged_by_its_pod_and_entry() {
    let claim: ResourceClaim = typed(
        json!({ "metadata": { "namespace": "ns", "generateName": "p-gpu-",
            "annotations": { ANN_POD_CLAIM_NAME: "gpu" },
            "ownerReferences": [ { "kind": "Pod", "uid": "pod-uid", "controller": true, "name": "p", "apiVersion": "v1" } ] }, "spec": {} }),
    );
    let decisions = of_write(RESOURCE_CLAIMS, Verb::Create, None, Some(&View::of(&claim)));
    assert_eq!(
        decisions[0].subject,
        Subject::Generated {
            namespace: "ns".into(),
            pod_uid: "pod-uid".into(),
            entry: "gpu".into()
        }
    );
}
