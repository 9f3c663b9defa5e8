use super::*;
use crate::shadow::tests::typed;
use serde_json::json;

#[test]
fn a_view_reads_what_decisions_are_made_of() {
    let claim: ResourceClaim = typed(json!({
        "metadata": { "namespace": "ns", "name": "p-gpu", "uid": "u",
            "deletionTimestamp": "2026-11-25T04:04:11Z",
            "finalizers": ["resource.kubernetes.io/delete-protection"],
            "annotations": { "resource.kubernetes.io/pod-claim-name": "gpu", "other": "x" },
            "ownerReferences": [
                { "apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "pod-uid", "controller": true } ] },
        "spec": {},
        "status": { "allocation": {}, "reservedFor": [ { "resource": "pods", "name": "p", "uid": "pod-uid" } ] },
    }));
    let view = View::of(&claim);
    assert_eq!(
        (view.namespace, view.name, view.uid),
        ("ns", "p-gpu", Some("u"))
    );
    assert!(view.deleting);
    assert!(view.has_finalizer("resource.kubernetes.io/delete-protection"));
    assert_eq!(
        view.annotation("resource.kubernetes.io/pod-claim-name"),
        Some("gpu")
    );
    assert_eq!(view.owner_pod, Some("pod-uid"));
    assert_eq!(view.field(Field::Allocation), Some("allocated"));
    assert_eq!(view.reserved_for(), BTreeSet::from(["pod-uid".to_string()]));

    let pod: Pod = typed(json!({ "metadata": { "namespace": "ns", "name": "p" },
            "status": { "resourceClaimStatuses": [
                { "name": "gpu", "resourceClaimName": "p-gpu" }, { "name": "none" } ] } }));
    assert_eq!(
        View::of(&pod).recorded(),
        BTreeSet::from(["gpu".to_string()])
    );

    let volume: PersistentVolume = typed(json!({ "metadata": { "name": "v1" },
            "spec": { "claimRef": { "namespace": "ns", "name": "c", "uid": "" } },
            "status": { "phase": "Released" } }));
    let view = View::of(&volume);
    assert_eq!(view.claim_ref(), Some(("ns", "c")));
    assert_eq!(view.field(Field::ClaimRefUid), None, "an empty UID is none");
    assert_eq!(view.field(Field::Phase), Some("Released"));
    assert_eq!(view.uid, None);
}
