use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::ResourceClaim;
use serde_json::json;

use super::ClaimStore;
use crate::runtime::informer::Store;
use crate::runtime::keys::ObjectKey;

fn claim(name: &str, rv: &str, owner_uid: Option<&str>) -> Arc<ResourceClaim> {
    let owners = owner_uid.map(|uid| {
        json!([{ "apiVersion": "v1", "kind": "Pod", "name": "pod", "uid": uid, "controller": true }])
    });
    Arc::new(
        serde_json::from_value(json!({
            "metadata": {
                "name": name, "namespace": "ns", "resourceVersion": rv, "uid": "c1",
                "ownerReferences": owners,
            },
            "spec": {},
        }))
        .unwrap(),
    )
}

/// The pod "pod" the claims name as their controller, as the incarnation
/// `uid`.
fn pod(uid: &str) -> Pod {
    serde_json::from_value(json!({ "metadata": { "name": "pod", "namespace": "ns", "uid": uid } }))
        .unwrap()
}

#[test]
fn an_older_watch_event_does_not_replace_a_created_claim() {
    let store = ClaimStore::default();
    assert!(store.offer(claim("a", "10", Some("pod-uid"))));
    assert!(!store.offer(claim("a", "9", None)));
    assert_eq!(store.owned_by(&pod("pod-uid")).len(), 1);
    assert!(
        store.offer(claim("a", "10", Some("pod-uid"))),
        "equal versions pass"
    );
}

#[test]
fn the_owner_index_follows_updates_and_removals() {
    let store = ClaimStore::default();
    store.offer(claim("a", "1", Some("p1")));
    store.offer(claim("b", "2", Some("p1")));
    assert_eq!(store.owned_by(&pod("p1")).len(), 2);
    store.offer(claim("a", "3", Some("p2")));
    assert_eq!(store.owned_by(&pod("p1")).len(), 1);
    assert_eq!(store.owned_by(&pod("p2")).len(), 1);
    store.forget(&ObjectKey::new("ns", "b"));
    assert!(store.owned_by(&pod("p1")).is_empty());
    assert_eq!(store.keys(), vec![ObjectKey::new("ns", "a")]);
}

#[test]
fn a_claim_without_a_pod_controller_is_not_indexed() {
    let store = ClaimStore::default();
    store.offer(claim("a", "1", None));
    assert!(store.owned_by(&pod("")).is_empty());
    assert_eq!(store.count_by(|_| ()).get(&()), Some(&1));
}

#[test]
fn a_deleted_claims_late_events_do_not_bring_it_back() {
    let store = ClaimStore::default();
    store.offer(claim("a", "1", Some("p1")));
    {
        let deleted = claim("a", "2", Some("p1"));
        store.deleted_by_write(
            &ObjectKey::of(deleted.as_ref()),
            deleted.metadata.uid.as_deref(),
        );
    }
    assert!(!store.offer(claim("a", "2", Some("p1"))), "a late update");
    assert!(store.get(&ObjectKey::new("ns", "a")).is_none());
    store.forget(&ObjectKey::new("ns", "a"));
    assert!(
        store.offer(claim("a", "5", Some("p1"))),
        "seen deleted: a claim of that UID may come again only after a relist"
    );
}

#[test]
fn a_deleted_claim_held_by_a_finalizer_is_taken_in_once_marked() {
    let store = ClaimStore::default();
    store.offer(claim("a", "1", Some("p1")));
    {
        let deleted = claim("a", "1", Some("p1"));
        store.deleted_by_write(
            &ObjectKey::of(deleted.as_ref()),
            deleted.metadata.uid.as_deref(),
        );
    }
    let mut terminating = claim("a", "2", Some("p1")).as_ref().clone();
    terminating.metadata.deletion_timestamp =
        Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
        ));
    assert!(store.offer(Arc::new(terminating)), "marked for deletion");
    assert!(store.get(&ObjectKey::new("ns", "a")).is_some());
    assert!(
        !store.offer(claim("a", "1", Some("p1"))),
        "an older version stays out"
    );
}

#[test]
fn a_deletion_the_watch_showed_first_leaves_nothing_behind() {
    let store = ClaimStore::default();
    store.offer(claim("a", "1", Some("p1")));
    store.forget(&ObjectKey::new("ns", "a"));
    {
        let deleted = claim("a", "1", Some("p1"));
        store.deleted_by_write(
            &ObjectKey::of(deleted.as_ref()),
            deleted.metadata.uid.as_deref(),
        );
    }
    assert!(
        store.offer(claim("a", "1", Some("p1"))),
        "no deletion recorded for a claim the store no longer held"
    );
}
