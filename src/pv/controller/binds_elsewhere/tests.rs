use std::sync::Arc;

use super::*;
use crate::runtime::informer::Store;
use testkit::{claim, volume};

fn store_with(volumes: Vec<PersistentVolume>, claim: PersistentVolumeClaim) -> PvStore {
    let store = PvStore::default();
    for volume in volumes {
        store.watched(&Arc::new(volume));
    }
    store.watched(&Arc::new(claim));
    store
}

fn key() -> ObjectKey {
    ObjectKey::of(&claim("c", "c-uid", "1Gi").build())
}

#[test]
fn twins_are_equivalent_and_a_larger_volume_is_not() {
    let store = store_with(
        vec![
            volume("a", "1Gi").phase("Available").build(),
            volume("b", "1Gi").phase("Available").build(),
            volume("big", "5Gi").phase("Available").build(),
        ],
        claim("c", "c-uid", "1Gi").build(),
    );
    assert!(equivalent(&store, &key(), "a", "b"));
    assert!(!equivalent(&store, &key(), "a", "big"));
    assert!(!equivalent(&store, &key(), "a", "missing"));
    assert!(!equivalent(&store, &ObjectKey::new("ns", "gone"), "a", "b"));
}

#[test]
fn the_volume_taken_first_counts_free_again() {
    let volumes = || {
        vec![
            volume("small", "1Gi").phase("Available").build(),
            volume("taken", "2Gi")
                .bound_to("c-uid", "c")
                .phase("Bound")
                .build(),
        ]
    };
    let store = store_with(
        volumes(),
        claim("c", "c-uid", "1Gi").volume_name("taken").build(),
    );
    assert_eq!(
        would_bind(&store, &key(), "taken"),
        Some(Some("small".into()))
    );
    let store = store_with(
        volumes(),
        claim("c", "c-uid", "2Gi").volume_name("taken").build(),
    );
    assert_eq!(
        would_bind(&store, &key(), "taken"),
        Some(Some("taken".into()))
    );
    let store = store_with(
        volumes(),
        claim("c", "c-uid", "5Gi").volume_name("taken").build(),
    );
    assert_eq!(would_bind(&store, &key(), "taken"), Some(None));
    assert_eq!(
        would_bind(&store, &ObjectKey::new("ns", "gone"), "taken"),
        None,
        "a claim gone is not judged"
    );
}

#[test]
fn a_volume_reclaimed_since_the_bind_counts_as_it_was_chosen() {
    let store = store_with(
        vec![
            volume("taken", "1Gi")
                .bound_to("c-uid", "c")
                .phase("Released")
                .policy("Delete")
                .deleting()
                .build(),
        ],
        claim("c", "c-uid", "1Gi").volume_name("taken").build(),
    );
    assert_eq!(
        would_bind(&store, &key(), "taken"),
        Some(Some("taken".into()))
    );
}
