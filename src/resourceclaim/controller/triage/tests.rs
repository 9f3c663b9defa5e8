use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::ResourceClaim;
use serde_json::{Value, json};

use super::{claims_to_release, pod_needs_work};
use crate::resourceclaim::claims::ClaimStore;
use crate::runtime::keys::ObjectKey;

fn pod(status: &Value, node: Option<&str>) -> Pod {
    serde_json::from_value(json!({
        "metadata": { "name": "p", "namespace": "ns", "uid": "uid-p" },
        "spec": {
            "containers": [],
            "nodeName": node,
            "resourceClaims": [ { "name": "gpu", "resourceClaimTemplateName": "t" } ],
        },
        "status": status.clone(),
    }))
    .unwrap()
}

fn recorded(phase: &str) -> Value {
    json!({ "phase": phase, "resourceClaimStatuses": [ { "name": "gpu", "resourceClaimName": "c" } ] })
}

fn store_with(owner_uid: &str, status: &Value) -> ClaimStore {
    let store = ClaimStore::default();
    let claim: ResourceClaim = serde_json::from_value(json!({
        "metadata": {
            "name": "c", "namespace": "ns", "resourceVersion": "1",
            "ownerReferences": [ { "apiVersion": "v1", "kind": "Pod", "name": "p", "uid": owner_uid, "controller": true } ],
        },
        "spec": {},
        "status": status.clone(),
    }))
    .unwrap();
    store.offer(Arc::new(claim));
    store
}

#[test]
fn a_template_entry_without_its_claim_needs_work() {
    let empty = ClaimStore::default();
    assert!(pod_needs_work(
        &pod(&json!({ "phase": "Pending" }), None),
        &empty
    ));
    assert!(
        pod_needs_work(&pod(&recorded("Pending"), None), &empty),
        "the recorded claim is gone"
    );
    let owned = store_with("uid-p", &json!({}));
    assert!(!pod_needs_work(&pod(&recorded("Pending"), None), &owned));
}

#[test]
fn done_pods_and_entries_without_claims_need_no_work() {
    let empty = ClaimStore::default();
    assert!(!pod_needs_work(
        &pod(&json!({ "phase": "Succeeded" }), None),
        &empty
    ));
    let not_needed = json!({ "resourceClaimStatuses": [ { "name": "gpu" } ] });
    assert!(!pod_needs_work(&pod(&not_needed, None), &empty));
}

#[test]
fn a_recorded_claim_of_someone_else_needs_work() {
    let foreign = store_with("uid-other", &json!({}));
    assert!(pod_needs_work(&pod(&recorded("Pending"), None), &foreign));
}

#[test]
fn a_scheduled_pod_needs_its_allocated_claim_reserved() {
    let allocated = store_with("uid-p", &json!({ "allocation": {} }));
    assert!(pod_needs_work(
        &pod(&recorded("Pending"), Some("node")),
        &allocated
    ));
    assert!(
        !pod_needs_work(&pod(&recorded("Pending"), None), &allocated),
        "the scheduler reserves"
    );
    let reserved = store_with(
        "uid-p",
        &json!({ "allocation": {}, "reservedFor": [ { "resource": "pods", "name": "p", "uid": "uid-p" } ] }),
    );
    assert!(!pod_needs_work(
        &pod(&recorded("Pending"), Some("node")),
        &reserved
    ));
}

#[test]
fn a_done_or_deleted_pod_releases_its_claims() {
    let empty = ClaimStore::default();
    let key = vec![ObjectKey::new("ns", "c")];
    assert_eq!(
        claims_to_release(&pod(&recorded("Succeeded"), None), false, &empty),
        key
    );
    assert_eq!(
        claims_to_release(&pod(&recorded("Running"), Some("n")), true, &empty),
        key
    );
    assert!(claims_to_release(&pod(&recorded("Running"), Some("n")), false, &empty).is_empty());
}

#[test]
fn a_done_pod_releases_the_claims_it_controls_and_its_extended_claim() {
    let owned = store_with("uid-p", &json!({}));
    let unrecorded = json!({
        "phase": "Failed",
        "extendedResourceClaimStatus": { "resourceClaimName": "ext", "requestMappings": [] },
    });
    assert_eq!(
        claims_to_release(&pod(&unrecorded, Some("n")), false, &owned),
        vec![ObjectKey::new("ns", "c"), ObjectKey::new("ns", "ext")]
    );
}
