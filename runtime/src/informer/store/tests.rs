use k8s_openapi::api::core::v1::Pod;

use super::*;

fn pod(name: &str, uid: &str, version: &str, claims: &[&str]) -> Arc<Pod> {
    let mut pod = Pod::default();
    pod.metadata.namespace = Some("ns".into());
    pod.metadata.name = Some(name.into());
    pod.metadata.uid = Some(uid.into());
    pod.metadata.resource_version = Some(version.into());
    pod.metadata.annotations = Some(
        claims
            .iter()
            .map(|claim| ((*claim).to_string(), String::new()))
            .collect(),
    );
    Arc::new(pod)
}

/// Files a pod under the claims its annotations name.
fn claims(pod: &Pod) -> Vec<ObjectKey> {
    pod.metadata
        .annotations
        .iter()
        .flatten()
        .map(|(claim, _)| ObjectKey::new("ns", claim.clone()))
        .collect()
}

fn names(pods: &[Arc<Pod>]) -> Vec<(String, String)> {
    pods.iter()
        .map(|pod| {
            (
                pod.metadata.name.clone().unwrap_or_default(),
                pod.metadata.resource_version.clone().unwrap_or_default(),
            )
        })
        .collect()
}

#[test]
fn an_older_version_never_replaces_a_newer_one() {
    let store = MemStore::default();
    store.written(pod("a", "u1", "7", &[])).expect("stored");
    store.watched(&pod("a", "u1", "6", &[]));
    assert_eq!(names(&store.list()), [("a".into(), "7".into())]);
    store.watched(&pod("a", "u1", "7", &[]));
    store.watched(&pod("a", "u2", "9", &[]));
    assert_eq!(
        names(&store.list()),
        [("a".into(), "9".into())],
        "a new incarnation replaces the old one"
    );
    store.watched(&pod("a", "u1", "8", &[]));
    assert_eq!(
        names(&store.list()),
        [("a".into(), "9".into())],
        "a late version of the old incarnation does not replace the new one"
    );
}

#[test]
fn indexes_follow_every_change() {
    let store = MemStore::default();
    store.watched(&pod("a", "u1", "1", &["c1"]));
    store.add_index("claims", claims);
    store.watched(&pod("b", "u2", "1", &["c1", "c2"]));
    let c1 = ObjectKey::new("ns", "c1");
    assert_eq!(store.indexed("claims", &c1).len(), 2);
    store.watched(&pod("a", "u1", "2", &["c2"]));
    assert_eq!(
        names(&store.indexed("claims", &c1)),
        [("b".into(), "1".into())]
    );
    assert!(store.forget(&ObjectKey::new("ns", "b")).is_some());
    assert!(store.indexed("claims", &c1).is_empty());
    assert_eq!(store.indexed("unknown", &c1).len(), 0);
    assert_eq!(store.keys(), [ObjectKey::new("ns", "a")]);
}
