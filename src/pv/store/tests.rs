//! The shadow store's promises: the newest version of each object wins
//! (an equal version is the object stored already), versions compare as
//! numbers, objects read back as
//! they were offered, only what a watch has shown counts as listed, the
//! volume index follows every change, a poisoned lock does not stop it, and
//! a binding found completed stays so only while neither object changes.

use testkit::{claim, volume};

use super::*;

fn rv_of_volume(store: &PvStore, name: &str) -> Option<String> {
    store
        .volume(&VolumeName::new(name))
        .and_then(|v| v.metadata.resource_version.clone())
}

#[test]
fn volume_versions_newer_replace_older_and_equal_ones_are_not_stored_again() {
    let store = PvStore::default();
    // (offered resourceVersion, stored?, version held afterwards)
    let steps = [
        ("1", true, "1"),
        ("2", true, "2"),
        ("1", false, "2"),
        ("2", false, "2"),
        ("10", true, "10"),
        ("2", false, "10"),
        ("9", false, "10"),
        ("11", true, "11"),
    ];
    for (offered, stored, held) in steps {
        assert_eq!(
            store.offer_volume(volume("v", "1Gi").rv(offered).arc()),
            Ok(stored),
            "offer {offered}"
        );
        assert_eq!(
            rv_of_volume(&store, "v").as_deref(),
            Some(held),
            "after {offered}"
        );
    }
    assert_eq!(store.volumes_len(), 1);
}

#[test]
fn an_equal_version_is_the_object_stored_already() {
    // The API server never gives two contents one resourceVersion: an
    // offer of the stored version (a watch event of the controller's own
    // write, a relist) stores nothing again, listed or not.
    let store = PvStore::default();
    let first = volume("v", "1Gi").rv("5").build();
    let again = volume("v", "1Gi")
        .rv("5")
        .annotation("seen", "again")
        .build();
    assert_eq!(store.offer_volume(first.clone()), Ok(true));
    assert_eq!(store.offer_volume(again.clone()), Ok(false));
    assert_eq!(store.offer_listed_volume(&again), Ok(false));
    assert_eq!(store.volume(&VolumeName::new("v")).as_deref(), Some(&first));
    assert!(
        store.listed_volume(&VolumeName::new("v")).is_some(),
        "the watch has shown it"
    );
}

#[test]
fn claim_versions_compare_numerically() {
    let store = PvStore::default();
    let key = ObjectKey::new("myns", "c");
    assert_eq!(
        store.offer_claim(claim("c", "", "1Gi").namespace("myns").rv("10").arc()),
        Ok(true)
    );
    assert_eq!(
        store.offer_claim(claim("c", "", "1Gi").namespace("myns").rv("2").arc()),
        Ok(false)
    );
    assert_eq!(
        store
            .claim(&key)
            .and_then(|c| c.metadata.resource_version.clone())
            .as_deref(),
        Some("10")
    );
    assert_eq!(
        store.offer_claim(claim("c", "", "1Gi").namespace("myns").rv("10").arc()),
        Ok(false),
        "the stored version is not stored again"
    );
    assert_eq!(
        store.offer_claim(claim("c", "", "1Gi").namespace("myns").rv("11").arc()),
        Ok(true)
    );
    assert_eq!(store.claims_len(), 1);
}

#[test]
fn a_version_that_is_not_a_number_is_replaced_by_what_comes_last() {
    let store = PvStore::default();
    assert_eq!(
        store.offer_volume(volume("v", "1Gi").rv("xxx").arc()),
        Ok(true)
    );
    assert_eq!(
        store.offer_volume(volume("v", "1Gi").rv("5").arc()),
        Ok(true)
    );
    assert_eq!(rv_of_volume(&store, "v").as_deref(), Some("5"));
    assert_eq!(
        store.offer_claim(claim("c", "", "1Gi").namespace("myns").rv("1").arc()),
        Ok(true)
    );
    assert_eq!(
        store.offer_claim(claim("c", "", "1Gi").namespace("myns").arc()),
        Ok(true),
        "an offer without a version is the newest to arrive"
    );
}

#[test]
fn objects_read_back_as_offered() {
    let store = PvStore::default();
    let v = volume("v", "1Gi")
        .phase("Available")
        .labels(&[("tier", "gold")])
        .rv("1")
        .build();
    let c = claim("c", "", "1Gi").namespace("myns").rv("1").build();
    assert_eq!(store.offer_volume(v.clone()), Ok(true));
    assert_eq!(store.offer_claim(c.clone()), Ok(true));
    assert_eq!(store.volume(&VolumeName::new("v")).as_deref(), Some(&v));
    assert_eq!(
        store.volumes().collect::<Vec<_>>(),
        vec![Arc::new(v.clone())]
    );
    assert_eq!(
        store.claim(&ObjectKey::new("myns", "c")).as_deref(),
        Some(&c)
    );
    assert_eq!(
        store.claims_of(store.claim_keys()).collect::<Vec<_>>(),
        vec![Arc::new(c.clone())]
    );
    let matched = store.best_match(&claim("x", "", "1Gi").build(), false);
    assert_eq!(matched.ok().flatten().as_deref(), Some(&v));
    assert_eq!(
        store.remove_volume(&VolumeName::new("v")).as_deref(),
        Some(&v)
    );
}

#[test]
fn only_what_a_watch_showed_is_listed() {
    let store = PvStore::default();
    let key = ObjectKey::new("myns", "c");
    let c = |rv: &str| claim("c", "", "1Gi").namespace("myns").rv(rv).build();

    // Known from a write's answer alone: stored, not listed.
    assert_eq!(
        store.offer_volume(volume("v", "1Gi").rv("2").build()),
        Ok(true)
    );
    assert_eq!(store.offer_claim(c("2")), Ok(true));
    assert!(
        store.volume(&VolumeName::new("v")).is_some()
            && store.listed_volume(&VolumeName::new("v")).is_none()
    );
    assert!(store.claim(&key).is_some() && !store.is_listed_claim(&key));

    // The watch shows an older version: the newer one is kept, now listed.
    assert_eq!(
        store.offer_listed_volume(volume("v", "1Gi").rv("1").build()),
        Ok(false)
    );
    assert_eq!(store.offer_listed_claim(c("1")), Ok(false));
    assert_eq!(rv_of_volume(&store, "v").as_deref(), Some("2"));
    assert!(store.listed_volume(&VolumeName::new("v")).is_some() && store.is_listed_claim(&key));

    // Newer answers of writes keep it listed.
    assert_eq!(
        store.offer_volume(volume("v", "1Gi").rv("3").build()),
        Ok(true)
    );
    assert_eq!(store.offer_claim(c("3")), Ok(true));
    assert!(store.listed_volume(&VolumeName::new("v")).is_some() && store.is_listed_claim(&key));

    // Once forgotten (deleted), a late answer of a write does not list it.
    store.remove_volume(&VolumeName::new("v"));
    store.remove_claim(&key);
    assert_eq!(
        store.offer_volume(volume("v", "1Gi").rv("4").build()),
        Ok(true)
    );
    assert_eq!(store.offer_claim(c("4")), Ok(true));
    assert!(store.listed_volume(&VolumeName::new("v")).is_none() && !store.is_listed_claim(&key));
}

#[test]
fn index_follows_cache_updates() {
    let store = PvStore::default();
    let other = claim("other", "", "1Gi").build();
    assert_eq!(
        store.offer_volume(volume("v1", "1Gi").phase("Available").rv("1").arc()),
        Ok(true)
    );
    let found = store.best_match(&other, false).ok().flatten();
    assert_eq!(
        found.and_then(|v| v.metadata.name.clone()).as_deref(),
        Some("v1")
    );

    // Our bind write comes back: v1 now belongs to claim1.
    let bound = volume("v1", "1Gi")
        .rv("2")
        .bound_to("", "claim1")
        .phase("Bound")
        .arc();
    assert_eq!(store.offer_volume(bound), Ok(true));
    assert_eq!(store.best_match(&other, false), Ok(None));
    let mine = store
        .best_match(&claim("claim1", "", "1Gi").build(), false)
        .ok()
        .flatten();
    assert_eq!(
        mine.and_then(|v| v.metadata.name.clone()).as_deref(),
        Some("v1")
    );

    // A late watch event of the old, unbound version must not undo that.
    assert_eq!(
        store.offer_volume(volume("v1", "1Gi").phase("Available").rv("1").arc()),
        Ok(false)
    );
    assert_eq!(store.best_match(&other, false), Ok(None));

    // Once removed, the volume is neither stored nor matched.
    assert!(store.remove_volume(&VolumeName::new("v1")).is_some());
    assert_eq!(
        store.best_match(&claim("claim1", "", "1Gi").build(), false),
        Ok(None)
    );
}

#[test]
fn removal_names_and_order() {
    let store = PvStore::default();
    for name in ["b", "a", "c"] {
        assert_eq!(
            store.offer_volume(volume(name, "1Gi").rv("1").arc()),
            Ok(true)
        );
        assert_eq!(
            store.offer_claim(claim(name, "", "1Gi").namespace("myns").rv("1").arc()),
            Ok(true)
        );
    }
    assert_eq!(store.volume_names(), ["a", "b", "c"].map(VolumeName::new));
    assert_eq!(
        store.claim_keys(),
        ["a", "b", "c"].map(|n| ObjectKey::new("myns", n))
    );

    let removed = store.remove_volume(&VolumeName::new("b"));
    assert_eq!(
        removed.and_then(|v| v.metadata.name.clone()).as_deref(),
        Some("b")
    );
    assert!(store.remove_volume(&VolumeName::new("b")).is_none());
    assert!(store.volume(&VolumeName::new("b")).is_none());
    let key = ObjectKey::new("myns", "a");
    assert!(store.remove_claim(&key).is_some());
    assert!(store.claim(&key).is_none());
    assert_eq!(store.volumes_len(), 2);
    assert_eq!(store.claims_len(), 2);
    assert_eq!(store.volumes().count(), 2);
    assert_eq!(store.claims_of(store.claim_keys()).count(), 2);

    // After removal any version is accepted again, even an older one.
    assert_eq!(
        store.offer_volume(volume("b", "1Gi").rv("0").arc()),
        Ok(true)
    );
}

#[test]
fn concurrent_offers_keep_the_newest() {
    let store = PvStore::default();
    std::thread::scope(|s| {
        for t in 0..8u32 {
            let store = &store;
            s.spawn(move || {
                for i in 0..200u32 {
                    let rv = (i * 7 + t * 13) % 200 + 1;
                    let _ = store.offer_volume(volume("v", "1Gi").rv(&rv.to_string()).arc());
                }
            });
        }
    });
    assert_eq!(rv_of_volume(&store, "v").as_deref(), Some("200"));
}

#[test]
fn survives_a_poisoned_lock() {
    let store = Arc::new(PvStore::default());
    assert_eq!(
        store.offer_volume(volume("v", "1Gi").rv("1").arc()),
        Ok(true)
    );
    let poisoner = Arc::clone(&store);
    let result = std::thread::spawn(move || {
        let _guard = poisoner.volumes.write();
        panic!("poison the lock");
    })
    .join();
    assert!(result.is_err());
    assert!(store.volumes.is_poisoned());
    assert_eq!(
        store.offer_volume(volume("v", "1Gi").rv("2").arc()),
        Ok(true)
    );
    assert_eq!(rv_of_volume(&store, "v").as_deref(), Some("2"));
}

#[test]
fn a_reservation_is_exclusive_and_its_end_frees_the_volume() {
    let store = Arc::new(PvStore::default());
    let freed = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    store.on_volume_freed({
        let freed = Arc::clone(&freed);
        move || {
            freed.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    });
    let count = || freed.load(std::sync::atomic::Ordering::SeqCst);
    store
        .offer_volume(volume("v1", "1Gi").rv("1").arc())
        .expect("offer");
    assert_eq!(count(), 1, "a new volume is free at once");
    store
        .offer_volume(volume("v1", "1Gi").phase("Available").rv("2").arc())
        .expect("offer");
    assert_eq!(count(), 1, "Pending to Available frees nothing new");

    let a = claim("a", "uid-a", "1Gi").build();
    let b = claim("b", "uid-b", "1Gi").build();
    let found = store
        .best_match(&a, false)
        .expect("match")
        .expect("v1 for a");
    assert_eq!(found.metadata.name.as_deref(), Some("v1"));
    let held = store
        .reserve("v1", &ObjectKey::of(&a))
        .expect("reserved for a");
    assert!(store.is_reserved(&VolumeName::new("v1")));
    assert!(
        store.best_match(&b, false).expect("match").is_none(),
        "b never gets the volume a holds"
    );
    assert!(
        store.reserve("v1", &ObjectKey::of(&b)).is_none(),
        "nor can b reserve it"
    );
    drop(held);
    assert_eq!(count(), 2, "a's binding failed: v1 is free again");
    assert!(!store.is_reserved(&VolumeName::new("v1")));

    let held = store.reserve("v1", &ObjectKey::of(&b)).expect("v1 for b");
    store
        .offer_volume(
            volume("v1", "1Gi")
                .bound_to("uid-b", "b")
                .phase("Bound")
                .rv("3")
                .arc(),
        )
        .expect("offer");
    drop(held);
    assert_eq!(count(), 2, "b's binding succeeded: nothing was freed");
    assert!(store.best_match(&a, false).expect("match").is_none());
}

#[test]
fn a_reservation_keeps_the_volume_reserved_but_not_its_copy() {
    let store = Arc::new(PvStore::default());
    store
        .offer_volume(volume("v1", "1Gi").phase("Available").rv("1").arc())
        .expect("offer");
    let a = claim("a", "uid-a", "1Gi").build();
    let b = claim("b", "uid-b", "1Gi").build();
    let found = store
        .best_match(&a, false)
        .expect("match")
        .expect("v1 for a");
    let copy = Arc::downgrade(&found);
    drop(found);
    let reserved = store.reserve("v1", &ObjectKey::of(&a)).expect("reserved");
    // Push the found copy out of the store's recently read volumes.
    for i in 0..100 {
        store
            .offer_volume(volume(&format!("w{i}"), "5Gi").rv("1").arc())
            .expect("offer");
        let _ = store.volume(&VolumeName::new(format!("w{i}")));
    }
    assert!(
        copy.upgrade().is_none(),
        "the reservation keeps no copy of the volume"
    );
    assert!(store.is_reserved(&VolumeName::new("v1")));
    let for_b = store.best_match(&b, false).expect("match");
    assert_ne!(
        for_b.as_ref().and_then(|v| v.metadata.name.as_deref()),
        Some("v1"),
        "b never gets the volume a holds"
    );
    drop(reserved);
    assert!(!store.is_reserved(&VolumeName::new("v1")));
}
#[test]
fn reads_see_every_store_whether_kept_unpacked_or_not() {
    let store = PvStore::default();
    let key = ObjectKey::new("myns", "c");
    let c = |rv: &str| claim("c", "", "1Gi").namespace("myns").rv(rv).build();
    let claim_rv = |store: &PvStore| {
        store
            .claim(&key)
            .and_then(|c| c.metadata.resource_version.clone())
    };

    // A write's answer is kept unpacked and read back.
    assert_eq!(
        store.offer_volume(volume("v", "1Gi").rv("1").build()),
        Ok(true)
    );
    assert_eq!(store.offer_claim(c("1")), Ok(true));
    assert_eq!(rv_of_volume(&store, "v").as_deref(), Some("1"));
    assert_eq!(claim_rv(&store).as_deref(), Some("1"));

    // A watch's newer version replaces what was read last.
    assert_eq!(
        store.offer_listed_volume(volume("v", "1Gi").rv("2").build()),
        Ok(true)
    );
    assert_eq!(store.offer_listed_claim(c("2")), Ok(true));
    assert_eq!(rv_of_volume(&store, "v").as_deref(), Some("2"));
    assert_eq!(claim_rv(&store).as_deref(), Some("2"));
    assert_eq!(
        store
            .listed_volume(&VolumeName::new("v"))
            .and_then(|v| v.metadata.resource_version.clone()),
        Some("2".to_owned())
    );

    // So does a newer answer after that read, and a deletion.
    assert_eq!(
        store.offer_volume(volume("v", "1Gi").rv("3").build()),
        Ok(true)
    );
    assert_eq!(store.offer_claim(c("3")), Ok(true));
    assert_eq!(rv_of_volume(&store, "v").as_deref(), Some("3"));
    assert_eq!(claim_rv(&store).as_deref(), Some("3"));
    store.remove_volume(&VolumeName::new("v"));
    store.remove_claim(&key);
    assert_eq!(store.volume(&VolumeName::new("v")), None);
    assert_eq!(store.claim(&key), None);
    assert_eq!(
        store.volumes().count() + store.claims_of(store.claim_keys()).count(),
        0
    );
}

/// Names of what the resync would sync: claims as "ns/name", then volumes.
fn to_resync(store: &PvStore) -> (Vec<String>, Vec<String>) {
    let (claims, volumes) = store.to_resync(|_| true, |_| true);
    (
        claims.iter().map(ToString::to_string).collect(),
        volumes
            .iter()
            .map(|name| name.as_str().to_owned())
            .collect(),
    )
}

#[test]
fn the_resync_walk_passes_by_what_its_caller_does_not_want() {
    let store = PvStore::default();
    for name in ["a", "b"] {
        store
            .offer_listed_claim(claim(name, name, "1Gi").build())
            .expect("offer");
        store
            .offer_listed_volume(volume(name, "1Gi").build())
            .expect("offer");
    }
    let (claims, volumes) = store.to_resync(|key| key.name != "a", |name| name.as_str() != "b");
    assert_eq!(claims, [ObjectKey::new("default", "b")]);
    assert_eq!(volumes, [VolumeName::new("a")]);
}

#[test]
fn a_complete_binding_is_passed_by_only_while_neither_object_changes() {
    let store = PvStore::default();
    let bound_volume = |rv: &str| {
        volume("v", "1Gi")
            .bound_to("uid", "c")
            .phase("Bound")
            .rv(rv)
    };
    let bound_claim = |rv: &str| {
        claim("c", "uid", "1Gi")
            .volume_name("v")
            .phase("Bound")
            .rv(rv)
    };
    store
        .offer_listed_volume(bound_volume("1").build())
        .expect("offer");
    store
        .offer_listed_claim(bound_claim("2").build())
        .expect("offer");
    store
        .offer_listed_volume(volume("free", "1Gi").rv("3").build())
        .expect("offer");
    let all = || {
        (
            vec!["default/c".to_owned()],
            vec!["free".to_owned(), "v".to_owned()],
        )
    };
    assert_eq!(to_resync(&store), all());
    // What the syncs of both record when they find the pair completed, each
    // having read the claim and the volume at these versions.
    let complete_both = |claim_rv: &str, volume_rv: &str| {
        let (c, v) = (
            bound_claim(claim_rv).build(),
            bound_volume(volume_rv).build(),
        );
        store.complete_claim(&c, &v);
        store.complete_volume(&v, &c);
    };

    complete_both("2", "1");
    assert_eq!(to_resync(&store), (vec![], vec!["free".to_owned()]));

    // A newer claim: both are synced again, the volume because what it
    // was completed with is not what is stored any more.
    store
        .offer_listed_claim(bound_claim("4").build())
        .expect("offer");
    assert_eq!(to_resync(&store), all());
    // A record made from an older read than what is stored is ignored.
    complete_both("2", "1");
    assert_eq!(to_resync(&store), all());
    complete_both("4", "1");
    assert_eq!(to_resync(&store), (vec![], vec!["free".to_owned()]));

    // A newer volume, and then a deleted claim, likewise.
    store
        .offer_listed_volume(bound_volume("5").build())
        .expect("offer");
    assert_eq!(to_resync(&store), all());
    complete_both("4", "5");
    assert_eq!(to_resync(&store), (vec![], vec!["free".to_owned()]));
    store.remove_claim(&ObjectKey::new("default", "c"));
    assert_eq!(
        to_resync(&store),
        (vec![], vec!["free".to_owned(), "v".to_owned()])
    );

    // The same version offered again (a relist, the watch event of the
    // controller's own write) is the object the record was made of: the
    // record holds.
    store
        .offer_listed_claim(bound_claim("4").build())
        .expect("offer");
    store.complete_claim(&bound_claim("4").build(), &bound_volume("5").build());
    assert_eq!(to_resync(&store).0, Vec::<String>::new());
    store
        .offer_listed_claim(bound_claim("4").build())
        .expect("offer");
    assert_eq!(to_resync(&store).0, Vec::<String>::new());
}

/// The census the state gauges read follows every store, replacement and
/// removal, without unpacking anything at read time.
#[test]
fn the_census_counts_what_is_stored_under_its_tally() {
    let store = PvStore::default();
    let sorted = |mut counts: Vec<(VolumeTally, u64)>| {
        counts.sort_unstable_by(|a, b| (&a.0.class, a.0.bound).cmp(&(&b.0.class, b.0.bound)));
        counts
            .into_iter()
            .map(|(t, n)| (t.class, t.bound, t.plugin, t.mode, n))
            .collect::<Vec<_>>()
    };
    for (name, class) in [("v1", "gold"), ("v2", "gold"), ("v3", "")] {
        store
            .offer_volume(volume(name, "1Gi").class(class).csi("d").rv("1").arc())
            .expect("offer");
    }
    let csi = "kubernetes.io/csi:d".to_string();
    let fs = "Filesystem".to_string();
    assert_eq!(
        sorted(store.volume_census()),
        [
            (String::new(), false, csi.clone(), fs.clone(), 1),
            ("gold".to_string(), false, csi.clone(), fs.clone(), 2),
        ]
    );
    store
        .offer_volume(
            volume("v1", "1Gi")
                .class("gold")
                .csi("d")
                .phase("Bound")
                .rv("2")
                .arc(),
        )
        .expect("offer");
    // An older version changes nothing.
    store
        .offer_volume(
            volume("v2", "1Gi")
                .class("gold")
                .csi("d")
                .phase("Bound")
                .rv("1")
                .arc(),
        )
        .expect("offer");
    store.remove_volume(&VolumeName::new("v3"));
    assert_eq!(
        sorted(store.volume_census()),
        [
            ("gold".to_string(), false, csi.clone(), fs.clone(), 1),
            ("gold".to_string(), true, csi, fs, 1),
        ]
    );

    store
        .offer_claim(
            claim("c1", "u1", "1Gi")
                .namespace("a")
                .class("gold")
                .rv("1")
                .arc(),
        )
        .expect("offer");
    store
        .offer_claim(claim("c2", "u2", "1Gi").namespace("b").rv("1").arc())
        .expect("offer");
    store
        .offer_listed_claim(
            claim("c1", "u1", "1Gi")
                .namespace("a")
                .class("gold")
                .phase("Bound")
                .rv("2")
                .build(),
        )
        .expect("offer");
    store.remove_claim(&ObjectKey::new("b", "c2"));
    let claims: Vec<_> = store
        .claim_census()
        .into_iter()
        .map(|(t, n)| (t.bound, t.namespace, t.class, t.attributes_class, n))
        .collect();
    assert_eq!(
        claims,
        [(true, "a".to_string(), "gold".to_string(), String::new(), 1)]
    );
}
