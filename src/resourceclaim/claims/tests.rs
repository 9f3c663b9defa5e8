use std::sync::Arc;

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

#[test]
fn an_older_watch_event_does_not_replace_a_created_claim() {
    let cache = ClaimStore::default();
    assert!(cache.offer(claim("a", "10", Some("pod-uid"))));
    assert!(!cache.offer(claim("a", "9", None)));
    assert_eq!(cache.owned_by("pod-uid").len(), 1);
    assert!(
        cache.offer(claim("a", "10", Some("pod-uid"))),
        "equal versions pass"
    );
}

#[test]
fn the_owner_index_follows_updates_and_removals() {
    let cache = ClaimStore::default();
    cache.offer(claim("a", "1", Some("p1")));
    cache.offer(claim("b", "2", Some("p1")));
    assert_eq!(cache.owned_by("p1").len(), 2);
    cache.offer(claim("a", "3", Some("p2")));
    assert_eq!(cache.owned_by("p1").len(), 1);
    assert_eq!(cache.owned_by("p2").len(), 1);
    cache.remove(&ObjectKey::new("ns", "b"));
    assert!(cache.owned_by("p1").is_empty());
    assert_eq!(cache.keys(), vec![ObjectKey::new("ns", "a")]);
}

#[test]
fn a_claim_without_a_pod_controller_is_not_indexed() {
    let cache = ClaimStore::default();
    cache.offer(claim("a", "1", None));
    assert!(cache.owned_by("").is_empty());
    assert_eq!(cache.count_by(|_| ()).get(&()), Some(&1));
}

#[test]
fn a_deleted_claims_late_events_do_not_bring_it_back() {
    let cache = ClaimStore::default();
    cache.offer(claim("a", "1", Some("p1")));
    {
        let deleted = claim("a", "2", Some("p1"));
        cache.deleted_by_write(
            &ObjectKey::of(deleted.as_ref()),
            deleted.metadata.uid.as_deref(),
        );
    }
    assert!(!cache.offer(claim("a", "2", Some("p1"))), "a late update");
    assert!(cache.get(&ObjectKey::new("ns", "a")).is_none());
    cache.remove(&ObjectKey::new("ns", "a"));
    assert!(
        cache.offer(claim("a", "5", Some("p1"))),
        "seen deleted: a claim of that UID may come again only after a relist"
    );
}

#[test]
fn a_deleted_claim_held_by_a_finalizer_is_taken_in_once_marked() {
    let cache = ClaimStore::default();
    cache.offer(claim("a", "1", Some("p1")));
    {
        let deleted = claim("a", "1", Some("p1"));
        cache.deleted_by_write(
            &ObjectKey::of(deleted.as_ref()),
            deleted.metadata.uid.as_deref(),
        );
    }
    let mut terminating = claim("a", "2", Some("p1")).as_ref().clone();
    terminating.metadata.deletion_timestamp =
        Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
        ));
    assert!(cache.offer(Arc::new(terminating)), "marked for deletion");
    assert!(cache.get(&ObjectKey::new("ns", "a")).is_some());
    assert!(
        !cache.offer(claim("a", "1", Some("p1"))),
        "an older version stays out"
    );
}

#[test]
fn a_deletion_the_watch_showed_first_leaves_nothing_behind() {
    let cache = ClaimStore::default();
    cache.offer(claim("a", "1", Some("p1")));
    cache.remove(&ObjectKey::new("ns", "a"));
    {
        let deleted = claim("a", "1", Some("p1"));
        cache.deleted_by_write(
            &ObjectKey::of(deleted.as_ref()),
            deleted.metadata.uid.as_deref(),
        );
    }
    assert!(
        cache.offer(claim("a", "1", Some("p1"))),
        "no deletion recorded for a claim the cache no longer held"
    );
}
