//! The volume index against upstream's matching tables and the cases
//! they miss: access-mode groups, pre-bound volumes, volume modes,
//! attributes classes, selectors, phases and classes, bad input, updates.

use k8s_names::ANN_BETA_STORAGE_CLASS;
use testkit::{ClaimBuilder, ROX, RWO, RWOP, RWX, VolumeBuilder, claim, volume};

use k8s_openapi::api::core::v1::PersistentVolumeClaim;

use super::search::MAX_LABEL_GROUPS;
use super::*;
use crate::pv::objects::{ObjectName, claim_reference};

mod brute_force;

/// A volume the index may offer: testkit's volume, phase Available.
fn available(name: &str, size: &str) -> VolumeBuilder {
    volume(name, size).phase("Available")
}

/// Inserts a volume, which every test volume can be.
fn put(index: &mut VolumeIndex, volume: impl Borrow<PersistentVolume>) -> bool {
    index.insert(volume).expect("packed")
}

fn index_of(volumes: Vec<PersistentVolume>) -> VolumeIndex {
    let mut index = VolumeIndex::default();
    for v in volumes {
        put(&mut index, Arc::new(v));
    }
    index
}

fn best(index: &VolumeIndex, claim: &PersistentVolumeClaim, delay: bool) -> Option<String> {
    match index.find_best_match(claim, delay) {
        Ok(found) => found.and_then(|v| v.metadata.name.clone()),
        Err(e) => panic!("unexpected error: {e}"),
    }
}

/// Upstream's `createTestVolumes` (without the node-affinity volumes,
/// which only the scheduler path uses), named by upstream's UIDs.
fn upstream_volumes() -> Vec<PersistentVolume> {
    vec![
        available("gce-pd-10", "10G").modes(&[RWO, ROX]).build(),
        volume("gce-pd-20", "20G")
            .modes(&[RWO, ROX])
            .claim_ref("", "", "def456")
            .phase("Bound")
            .build(),
        available("nfs-5", "5G").modes(&[RWO, ROX, RWX]).build(),
        volume("gce-pd-1", "1G")
            .modes(&[RWO, ROX])
            .claim_ref("", "", "abc123")
            .phase("Bound")
            .build(),
        available("nfs-10", "10G").modes(&[RWO, ROX, RWX]).build(),
        available("gce-pd-5", "5G").modes(&[RWO, ROX]).build(),
        available("nfs-1", "1G").modes(&[RWO, ROX, RWX]).build(),
        available("gce-pd-2", "20000G")
            .modes(&[RWO])
            .labels(&[("should-exist", "true")])
            .build(),
        available("gce-pd-silver1", "10000G")
            .modes(&[RWO])
            .labels(&[("should-exist", "true")])
            .class("silver")
            .build(),
        available("gce-pd-silver2", "100G")
            .modes(&[RWO])
            .class("silver")
            .build(),
        available("gce-pd-gold", "50G")
            .modes(&[RWO])
            .class("gold")
            .build(),
        available("local-pd-very-large", "200E")
            .modes(&[RWO, ROX, RWX])
            .class("large")
            .build(),
        available("local-pd-extremely-large", "800E")
            .modes(&[RWO, ROX, RWX])
            .class("large")
            .build(),
    ]
}

/// Upstream's `makePVC`: claim01 asking for ROX+RWO, Filesystem.
fn pvc(size: &str) -> ClaimBuilder {
    claim("claim01", "", size)
        .modes(&[ROX, RWO])
        .volume_mode("Filesystem")
}

#[test]
fn match_volume_upstream_table() {
    let index = index_of(upstream_volumes());
    let cases: Vec<(&str, PersistentVolumeClaim, Option<&str>)> = vec![
        (
            "successful-match-gce-10",
            pvc("8G").build(),
            Some("gce-pd-10"),
        ),
        (
            "successful-match-nfs-5",
            pvc("5G").modes(&[ROX, RWO, RWX]).build(),
            Some("nfs-5"),
        ),
        (
            "successful-skip-1g-bound-volume",
            pvc("1G").build(),
            Some("gce-pd-5"),
        ),
        ("successful-no-match", pvc("999G").build(), None),
        (
            "no-match-due-to-label",
            pvc("999G")
                .selector(&[("should-not-exist", "true")])
                .build(),
            None,
        ),
        (
            "no-match-due-to-size-constraint-with-label-selector",
            pvc("20000G")
                .selector(&[("should-exist", "true")])
                .modes(&[ROX, RWO])
                .build(),
            None,
        ),
        (
            "match-due-with-constraint-and-label-selector",
            pvc("20000G")
                .selector(&[("should-exist", "true")])
                .modes(&[RWO])
                .build(),
            Some("gce-pd-2"),
        ),
        (
            "successful-match-with-class",
            pvc("1G")
                .selector(&[("should-exist", "true")])
                .modes(&[RWO])
                .class("silver")
                .build(),
            Some("gce-pd-silver1"),
        ),
        (
            "successful-match-with-class-and-labels",
            pvc("1G").modes(&[RWO]).class("silver").build(),
            Some("gce-pd-silver2"),
        ),
        (
            "successful-match-very-large",
            pvc("1E").modes(&[RWO]).class("large").build(),
            Some("local-pd-very-large"),
        ),
        (
            "successful-match-exact-extremely-large",
            pvc("800E").modes(&[RWO]).class("large").build(),
            Some("local-pd-extremely-large"),
        ),
        (
            "successful-no-match-way-too-large",
            pvc("950E").modes(&[RWO]).class("large").build(),
            None,
        ),
    ];
    assert_eq!(cases.len(), 12);
    for (name, claim, expected) in cases {
        assert_eq!(best(&index, &claim, false).as_deref(), expected, "{name}");
    }
}

#[test]
fn matching_with_bound_volumes() {
    let index = index_of(vec![
        volume("gce001", "1G")
            .modes(&[RWO, ROX])
            .claim_ref("", "", "abc123")
            .phase("Bound")
            .build(),
        available("gce002", "1G").modes(&[RWO, ROX]).build(),
    ]);
    assert_eq!(
        best(&index, &pvc("1G").build(), false).as_deref(),
        Some("gce002")
    );
}

#[test]
fn finding_volume_with_different_access_modes() {
    let gce = || available("gce", "10G").modes(&[RWO, ROX]);
    let ebs = || available("ebs", "10G").modes(&[RWO]);
    let nfs = || available("nfs", "10G").modes(&[RWO, ROX, RWX]);
    let mut index = index_of(vec![gce().build(), ebs().build(), nfs().build()]);
    let ask =
        |index: &VolumeIndex, modes: &[_]| best(index, &pvc("1G").modes(modes).build(), false);

    assert_eq!(ask(&index, &[RWO]).as_deref(), Some("ebs"));
    assert_eq!(ask(&index, &[RWO, ROX]).as_deref(), Some("gce"));
    // The order of the requested modes does not matter.
    assert_eq!(ask(&index, &[RWX, RWO, ROX]).as_deref(), Some("nfs"));
    // Fewer modes requested still match.
    assert_eq!(ask(&index, &[RWX]).as_deref(), Some("nfs"));
    // The exact match is bound elsewhere: the next level of modes.
    put(&mut index, ebs().claim_ref("", "", "").arc());
    assert_eq!(ask(&index, &[RWO]).as_deref(), Some("gce"));
    // And the next.
    put(&mut index, gce().claim_ref("", "", "").arc());
    assert_eq!(ask(&index, &[RWO]).as_deref(), Some("nfs"));
    // Partial mode request.
    put(&mut index, gce().arc());
    assert_eq!(ask(&index, &[ROX]).as_deref(), Some("gce"));
}

#[test]
fn fewer_modes_beat_a_smaller_volume() {
    let index = index_of(vec![
        available("small-many-modes", "1Gi")
            .modes(&[RWO, RWX])
            .build(),
        available("big-one-mode", "100Gi").modes(&[RWO]).build(),
    ]);
    assert_eq!(
        best(&index, &claim("c", "", "1Gi").modes(&[RWO]).build(), false).as_deref(),
        Some("big-one-mode")
    );
}

#[test]
fn equal_size_groups_are_tried_in_canonical_mode_order() {
    let index = index_of(vec![
        available("rwop", "1Gi").modes(&[RWO, RWOP]).build(),
        available("rwx", "1Gi").modes(&[RWO, RWX]).build(),
        available("rox", "5Gi").modes(&[RWO, ROX]).build(),
    ]);
    // {RWO,ROX} comes before {RWO,RWX} and {RWO,RWOP}, even though it is bigger.
    assert_eq!(
        best(&index, &claim("c", "", "1Gi").modes(&[RWO]).build(), false).as_deref(),
        Some("rox")
    );
}

#[test]
fn volume_mode_check() {
    // (claim mode, volume mode, matches); None is an absent field.
    let cases = [
        (Some("Block"), Some("Filesystem"), false),
        (Some("Filesystem"), Some("Block"), false),
        (Some("Block"), Some("Block"), true),
        (Some("Filesystem"), Some("Filesystem"), true),
        (Some("Filesystem"), None, true),
        (None, Some("Filesystem"), true),
        (None, None, true),
        (None, Some("Block"), false),
        (Some("Block"), None, false),
        (Some("Tape"), Some("Tape"), true),
        (Some("Tape"), None, false),
    ];
    for (claim_mode, volume_mode, matches) in cases {
        let v = available("v", "10G").volume_mode(volume_mode.unwrap_or(""));
        let c = claim("c", "", "8G").volume_mode(claim_mode.unwrap_or(""));
        let index = index_of(vec![v.build()]);
        let found = best(&index, &c.build(), false);
        assert_eq!(
            found.is_some(),
            matches,
            "claim {claim_mode:?} volume {volume_mode:?}"
        );
    }
}

#[test]
fn deletion_timestamp_filters_volumes() {
    let c = claim("pvc1", "", "1G").volume_mode("Filesystem").build();
    let live = index_of(vec![
        available("pv1", "1G").volume_mode("Filesystem").build(),
    ]);
    let deleting = index_of(vec![
        available("pv1", "1G")
            .volume_mode("Filesystem")
            .deleting()
            .build(),
    ]);
    assert_eq!(best(&live, &c, false).as_deref(), Some("pv1"));
    assert_eq!(best(&deleting, &c, false), None);
    // Also when the volume is pre-bound to the claim.
    let prebound = index_of(vec![
        available("pv1", "1G")
            .bound_to("", "pvc1")
            .deleting()
            .build(),
    ]);
    assert_eq!(best(&prebound, &c, false), None);
}

#[test]
fn finding_prebound_volumes() {
    let c = claim("claim01", "claim-uid", "1Gi").build();
    let claim_ref = claim_reference(&c);
    let pv = |name: &str, size: &str| available(name, size);
    let prebound = |b: VolumeBuilder| {
        let mut v = b.build();
        v.spec.get_or_insert_default().claim_ref = Some(claim_ref.clone());
        Arc::new(v)
    };
    let mut index = index_of(vec![
        pv("pv1", "1Gi").build(),
        pv("pv5", "5Gi").build(),
        pv("pv8", "8Gi").build(),
        pv("pvBadSize", "1Mi").build(),
        pv("pvBadMode", "1Gi").modes(&[ROX]).build(),
    ]);
    // Exact match on size.
    assert_eq!(best(&index, &c, false).as_deref(), Some("pv1"));
    // The exact match is pre-bound elsewhere: the next size up.
    put(
        &mut index,
        pv("pv1", "1Gi").claim_ref("bar", "foo", "").arc(),
    );
    assert_eq!(best(&index, &c, false).as_deref(), Some("pv5"));
    // The largest volume is pre-bound to the claim: it wins.
    put(&mut index, pv("pv1", "1Gi").arc());
    put(&mut index, prebound(pv("pv8", "8Gi")));
    assert_eq!(best(&index, &c, false).as_deref(), Some("pv8"));
    // A too-small volume pre-bound to the claim is ignored.
    put(&mut index, pv("pv8", "8Gi").arc());
    put(&mut index, prebound(pv("pvBadSize", "1Mi")));
    assert_eq!(best(&index, &c, false).as_deref(), Some("pv1"));
    // A volume without the requested mode pre-bound to the claim is ignored.
    put(&mut index, pv("pvBadSize", "1Mi").arc());
    put(&mut index, prebound(pv("pvBadMode", "1Gi").modes(&[ROX])));
    assert_eq!(best(&index, &c, false).as_deref(), Some("pv1"));
}

#[test]
fn prebound_volume_ignores_phase_class_and_selector_but_not_uid() {
    let c = claim("c", "u1", "1Gi")
        .class("gold")
        .selector(&[("tier", "db")])
        .build();
    let shaped = || volume("pre", "2Gi").phase("Released").class("silver");
    let index = index_of(vec![
        available("free", "1Gi")
            .class("gold")
            .labels(&[("tier", "db")])
            .build(),
    ]);
    assert_eq!(best(&index, &c, false).as_deref(), Some("free"));

    let mut with_pre = index_of(vec![
        available("free", "1Gi")
            .class("gold")
            .labels(&[("tier", "db")])
            .build(),
        shaped().bound_to("u1", "c").build(),
    ]);
    assert_eq!(best(&with_pre, &c, false).as_deref(), Some("pre"));
    // A claimRef UID of another claim with the same name: not this claim's.
    put(&mut with_pre, shaped().bound_to("u0", "c").arc());
    assert_eq!(best(&with_pre, &c, false).as_deref(), Some("free"));
}

#[test]
fn first_group_wins_even_over_a_prebound_volume_with_more_modes() {
    let c = claim("c", "", "1Gi").modes(&[RWO]).build();
    let index = index_of(vec![
        available("exact-modes", "1Gi").modes(&[RWO]).build(),
        available("prebound-more-modes", "1Gi")
            .modes(&[RWO, RWX])
            .bound_to("", "c")
            .build(),
    ]);
    assert_eq!(best(&index, &c, false).as_deref(), Some("exact-modes"));
    // Within one group the pre-bound volume wins over a smaller free one.
    let index = index_of(vec![
        available("free", "1Gi").modes(&[RWO]).build(),
        available("pre", "5Gi")
            .modes(&[RWO])
            .bound_to("", "c")
            .build(),
    ]);
    assert_eq!(best(&index, &c, false).as_deref(), Some("pre"));
}

#[test]
fn best_match_delayed() {
    let index = index_of(upstream_volumes());
    assert_eq!(best(&index, &pvc("8G").build(), true), None);
    assert_eq!(
        best(&index, &pvc("8G").build(), false).as_deref(),
        Some("gce-pd-10")
    );
    // A pre-bound volume is still returned under delayed binding.
    let index = index_of(vec![
        available("free", "1Gi").build(),
        available("pre", "5Gi").bound_to("", "c").build(),
    ]);
    assert_eq!(
        best(&index, &claim("c", "", "1Gi").build(), true).as_deref(),
        Some("pre")
    );
}

#[test]
fn volume_attributes_class_must_be_equal() {
    // (claim VAC, volume VAC, matches); "" is an empty name, None absent.
    let cases = [
        (None, None, true),
        (Some("fast"), Some("fast"), true),
        (Some("fast"), Some("slow"), false),
        (Some("fast"), None, false),
        (None, Some("fast"), false),
        (Some(""), None, true),
        (None, Some(""), true),
    ];
    for (claim_vac, volume_vac, matches) in cases {
        for prebound in [false, true] {
            let mut v = available("v", "1Gi");
            if let Some(vac) = volume_vac {
                v = v.vac(vac);
            }
            if prebound {
                v = v.bound_to("", "c");
            }
            let mut c = claim("c", "", "1Gi");
            if let Some(vac) = claim_vac {
                c = c.vac(vac);
            }
            let found = best(&index_of(vec![v.build()]), &c.build(), false);
            assert_eq!(
                found.is_some(),
                matches,
                "claim {claim_vac:?} volume {volume_vac:?} prebound {prebound}"
            );
        }
    }
}

#[test]
fn offers_new_and_available_volumes_only() {
    let mut no_status = volume("no-status", "1Gi").build();
    no_status.status = None;
    let index = index_of(vec![
        volume("released", "1Gi").phase("Released").build(),
        volume("failed", "1Gi").phase("Failed").build(),
        volume("bound-unclaimed", "1Gi").phase("Bound").build(),
        volume("pending", "2Gi").phase("Pending").build(),
        available("plain", "3Gi").build(),
    ]);
    let one = claim("c", "", "1Gi").build();
    assert_eq!(best(&index, &one, false).as_deref(), Some("pending"));
    let mut index = index;
    put(&mut index, Arc::new(no_status));
    assert_eq!(best(&index, &one, false).as_deref(), Some("no-status"));
    index.remove("no-status");
    index.remove("pending");
    assert_eq!(best(&index, &one, false).as_deref(), Some("plain"));
}

#[test]
fn filters_class() {
    let index = index_of(vec![
        volume("released", "1Gi").phase("Released").build(),
        available("gold", "2Gi").class("gold").build(),
        available("beta-silver", "3Gi")
            .class("gold")
            .annotation(ANN_BETA_STORAGE_CLASS, "silver")
            .build(),
        available("plain", "4Gi").build(),
    ]);
    assert_eq!(
        best(&index, &claim("c", "", "1Gi").build(), false).as_deref(),
        Some("plain")
    );
    assert_eq!(
        best(&index, &claim("c", "", "1Gi").class("").build(), false).as_deref(),
        Some("plain")
    );
    assert_eq!(
        best(&index, &claim("c", "", "1Gi").class("gold").build(), false).as_deref(),
        Some("gold")
    );
    assert_eq!(
        best(
            &index,
            &claim("c", "", "1Gi")
                .annotation(ANN_BETA_STORAGE_CLASS, "silver")
                .build(),
            false
        )
        .as_deref(),
        Some("beta-silver")
    );
    assert_eq!(
        best(
            &index,
            &claim("c", "", "1Gi").class("bronze").build(),
            false
        ),
        None
    );
}

#[test]
fn smallest_fitting_volume_wins_ties_by_name() {
    let index = index_of(vec![
        available("d", "3Gi").build(),
        available("c", "2Gi").build(),
        available("b", "2048Mi").build(),
        available("a", "1Gi").build(),
    ]);
    assert_eq!(
        best(&index, &claim("x", "", "1.5Gi").build(), false).as_deref(),
        Some("b")
    );
    assert_eq!(
        best(&index, &claim("x", "", "1Gi").build(), false).as_deref(),
        Some("a")
    );
    assert_eq!(
        best(&index, &claim("x", "", "3Gi").build(), false).as_deref(),
        Some("d")
    );
    assert_eq!(best(&index, &claim("x", "", "3.1Gi").build(), false), None);
}

#[test]
fn label_selector_expressions() {
    let index = index_of(vec![
        available("a-ssd", "1Gi")
            .labels(&[("disk", "ssd"), ("zone", "a")])
            .build(),
        available("b-hdd", "2Gi")
            .labels(&[("disk", "hdd"), ("zone", "b")])
            .build(),
        available("bare", "3Gi").build(),
    ]);
    let cases: Vec<(ClaimBuilder, Option<&str>)> = vec![
        (claim("c", "", "1").selector(&[]), Some("a-ssd")),
        (
            claim("c", "", "1").selector_expression("disk", "In", &["hdd", "nvme"]),
            Some("b-hdd"),
        ),
        (
            claim("c", "", "1").selector_expression("disk", "NotIn", &["ssd"]),
            Some("b-hdd"),
        ),
        (
            claim("c", "", "1").selector_expression("disk", "NotIn", &["ssd", "hdd"]),
            Some("bare"),
        ),
        (
            claim("c", "", "1")
                .selector_expression("zone", "Exists", &[])
                .selector(&[("disk", "hdd")]),
            Some("b-hdd"),
        ),
        (
            claim("c", "", "1").selector_expression("disk", "DoesNotExist", &[]),
            Some("bare"),
        ),
        (
            claim("c", "", "1").selector_expression("disk", "In", &["tape"]),
            None,
        ),
    ];
    for (i, (c, expected)) in cases.into_iter().enumerate() {
        assert_eq!(
            best(&index, &c.build(), false).as_deref(),
            expected,
            "case {i}"
        );
    }
}

#[test]
fn bad_claims_are_errors_naming_the_claim() {
    let index = index_of(vec![available("v", "1Gi").build()]);
    let key = ObjectKey::new("myns", "bad");
    let bad = |size: &str| claim("bad", "", size).namespace("myns");
    let cases: Vec<(PersistentVolumeClaim, MatchError)> = vec![
        (
            bad("1Gi")
                .selector_expression("disk", "Near", &["x"])
                .build(),
            MatchError::Selector {
                claim: key.clone(),
                source: SelectorError::UnknownOperator {
                    key: "disk".into(),
                    operator: "Near".into(),
                },
            },
        ),
        (
            bad("1Gi").selector_expression("disk", "In", &[]).build(),
            MatchError::Selector {
                claim: key.clone(),
                source: SelectorError::MissingValues {
                    key: "disk".into(),
                    operator: "In".into(),
                },
            },
        ),
        (
            bad("1Gi")
                .selector_expression("disk", "Exists", &["x"])
                .build(),
            MatchError::Selector {
                claim: key.clone(),
                source: SelectorError::UnexpectedValues {
                    key: "disk".into(),
                    operator: "Exists".into(),
                },
            },
        ),
        (
            bad("1Gi").modes(&["ReadWriteOnce", "WriteOnly"]).build(),
            MatchError::Claim(ObjectError::UnknownAccessMode {
                object: ObjectName::Claim(key.clone()),
                mode: "WriteOnly".into(),
            }),
        ),
    ];
    for (c, expected) in cases {
        assert_eq!(index.find_best_match(&c, false), Err(expected));
    }
    let err = index.find_best_match(&bad("huge").build(), false);
    let message = err.err().map(|e| e.to_string()).unwrap_or_default();
    assert!(
        message.contains("claim \"myns/bad\"") && message.contains("huge"),
        "{message}"
    );
}

#[test]
fn unreadable_volumes_are_stored_but_never_offered() {
    let index = index_of(vec![
        available("bad-size", "lots").build(),
        available("bad-mode", "1Gi")
            .modes(&["ReadWriteSometimes"])
            .build(),
        available("bad-prebound", "lots").bound_to("", "c").build(),
    ]);
    assert_eq!(index.len(), 3);
    assert!(index.get("bad-size").is_some());
    assert_eq!(best(&index, &claim("c", "", "0").build(), false), None);
    assert_eq!(
        best(&index, &claim("c", "", "0").modes(&[]).build(), false),
        None
    );
}

#[test]
fn claim_without_modes_matches_any_group() {
    let index = index_of(vec![
        available("rwx", "1Gi").modes(&[RWX]).build(),
        available("no-modes", "5Gi").modes(&[]).build(),
    ]);
    // The empty group comes first: fewest modes.
    assert_eq!(
        best(&index, &claim("c", "", "1Gi").modes(&[]).build(), false).as_deref(),
        Some("no-modes")
    );
    assert_eq!(best(&index, &claim("c", "", "1Gi").build(), false), None);
}

#[test]
fn insert_replaces_and_remove_forgets() {
    let mut index = index_of(vec![
        available("v1", "1Gi").build(),
        available("v2", "2Gi").build(),
    ]);
    let c = claim("c", "", "1Gi").build();
    assert_eq!(best(&index, &c, false).as_deref(), Some("v1"));
    // Replaced by a bigger v1: v1's old slot must be gone, v2 is now smallest.
    put(&mut index, available("v1", "3Gi").arc());
    assert_eq!(index.len(), 2);
    assert_eq!(best(&index, &c, false).as_deref(), Some("v2"));
    // v1 becomes bound to another claim, v2 removed.
    put(
        &mut index,
        volume("v1", "3Gi")
            .bound_to("", "other")
            .phase("Bound")
            .arc(),
    );
    let removed = index.remove("v2");
    assert_eq!(
        removed.and_then(|v| v.metadata.name.clone()).as_deref(),
        Some("v2")
    );
    assert_eq!(index.remove("v2"), None);
    assert_eq!(best(&index, &c, false), None);
    assert_eq!(index.len(), 1);
    assert!(!index.is_empty());
    assert_eq!(index.names().count(), 1);
    index.remove("v1");
    assert!(index.is_empty());
    assert!(index.free.is_empty() && index.claimed.is_empty());
}

#[test]
fn a_reserved_volume_is_passed_by_for_every_other_claim() {
    let mut index = index_of(vec![
        available("v1", "1Gi").build(),
        volume("v2", "1Gi").build(),
        available("v5", "5Gi").build(),
    ]);
    let a = claim("a", "uid-a", "1Gi").build();
    let b = claim("b", "uid-b", "1Gi").build();
    let (key_a, key_b) = (ObjectKey::of(&a), ObjectKey::of(&b));
    assert!(index.reserve("v1", &key_a));
    assert!(index.reserve("v1", &key_a), "again for the same claim");
    assert!(!index.reserve("v1", &key_b), "never for a second claim");
    assert!(index.is_reserved("v1"));
    assert_eq!(
        best(&index, &a, false).as_deref(),
        Some("v1"),
        "its holder still finds it"
    );
    assert_eq!(best(&index, &b, false).as_deref(), Some("v2"));
    assert!(index.reserve("v2", &key_b));
    assert_eq!(
        best(&index, &claim("c", "uid-c", "1Gi").build(), false).as_deref(),
        Some("v5")
    );
    // b's binding failed: v2 is free for anyone again.
    assert!(!index.release("v2", &key_a), "only its holder releases it");
    assert!(index.release("v2", &key_b));
    assert!(!index.is_reserved("v2"));
    // a's binding succeeded: v1 names a, and releasing frees nothing.
    put(
        &mut index,
        volume("v1", "1Gi")
            .bound_to("uid-a", "a")
            .phase("Bound")
            .arc(),
    );
    assert!(!index.release("v1", &key_a));
    assert!(
        index.is_reserved("v1"),
        "held while a's second reservation lives"
    );
    assert!(!index.release("v1", &key_a));
    assert!(!index.is_reserved("v1"));
    assert_eq!(best(&index, &b, false).as_deref(), Some("v2"));
}

#[test]
fn insert_tells_when_a_volume_becomes_free() {
    let mut index = VolumeIndex::default();
    assert!(
        put(&mut index, volume("v", "1Gi").arc()),
        "a new volume is free"
    );
    assert!(
        !put(&mut index, volume("v", "1Gi").phase("Available").arc()),
        "already free"
    );
    assert!(!put(
        &mut index,
        volume("v", "1Gi").bound_to("u", "c").phase("Bound").arc()
    ));
    assert!(
        !put(&mut index, volume("v", "1Gi").phase("Bound").arc()),
        "unbound, not Available yet"
    );
    assert!(put(&mut index, volume("v", "1Gi").phase("Available").arc()));
    assert!(!put(&mut index, volume("v", "1Gi").phase("Released").arc()));
    assert!(!put(&mut index, volume("w", "1Gi").phase("Released").arc()));
    let key = ObjectKey::new("default", "c");
    index.remove("v");
    assert!(index.reserve("v", &key));
    assert!(
        !put(&mut index, volume("v", "1Gi").arc()),
        "free but reserved for a claim"
    );
    assert!(index.release("v", &key), "free for anyone now");
}

#[test]
fn thousands_of_volumes() {
    let mut index = VolumeIndex::default();
    for i in 0..5000u32 {
        let class = if i % 2 == 0 { "even" } else { "odd" };
        put(
            &mut index,
            available(&format!("v{i:05}"), &format!("{}Mi", 5000 - i))
                .class(class)
                .arc(),
        );
    }
    // Volume vN has 5000-N Mi: class "even" holds the even sizes, "odd" the odd ones.
    assert_eq!(
        best(
            &index,
            &claim("c", "", "1001Mi").class("even").build(),
            false
        )
        .as_deref(),
        Some("v03998")
    );
    assert_eq!(
        best(
            &index,
            &claim("c", "", "1001Mi").class("odd").build(),
            false
        )
        .as_deref(),
        Some("v03999")
    );
    assert_eq!(index.len(), 5000);
}

/// A claim with a selector gets the smallest matching free volume (ties by
/// name) whether the bucket has a few label sets (each checked once) or
/// more than [`MAX_LABEL_GROUPS`] (walked in capacity order), passes by a
/// volume reserved for another claim, and stops finding a volume once it is
/// bound.
#[test]
fn selector_claims_get_the_smallest_match_across_label_sets() {
    for extra_groups in [0, MAX_LABEL_GROUPS + 5] {
        let mut volumes = vec![
            available("a-plain-1", "1Gi").build(),
            available("b-gold-3", "3Gi")
                .labels(&[("tier", "gold")])
                .build(),
            available("c-gold-2", "2Gi")
                .labels(&[("tier", "gold"), ("zone", "a")])
                .build(),
            available("d-gold-2", "2Gi")
                .labels(&[("tier", "gold")])
                .build(),
            available("e-plain-2", "2Gi").build(),
        ];
        for i in 0..extra_groups {
            let unique = format!("u{i}");
            volumes.push(
                available(&format!("x-{i:03}"), "1Gi")
                    .labels(&[("id", unique.as_str())])
                    .build(),
            );
        }
        let mut index = index_of(volumes);
        let gold = claim("gold", "uid-gold", "2Gi")
            .selector(&[("tier", "gold")])
            .build();
        assert_eq!(
            best(&index, &gold, false).as_deref(),
            Some("c-gold-2"),
            "{extra_groups}"
        );
        let other = ObjectKey::new("default", "other");
        assert!(index.reserve("c-gold-2", &other));
        assert_eq!(
            best(&index, &gold, false).as_deref(),
            Some("d-gold-2"),
            "reserved for another"
        );
        put(
            &mut index,
            Arc::new(
                available("d-gold-2", "2Gi")
                    .labels(&[("tier", "gold")])
                    .bound_to("uid-x", "x")
                    .build(),
            ),
        );
        assert_eq!(
            best(&index, &gold, false).as_deref(),
            Some("b-gold-3"),
            "bound: gone"
        );
        let plain = claim("plain", "uid-plain", "2Gi").build();
        assert_eq!(best(&index, &plain, false).as_deref(), Some("e-plain-2"));
    }
}

/// A bucket of more label sets than [`MAX_LABEL_GROUPS`] is walked in
/// capacity order on the labels filed beside each free volume: a volume
/// is judged by its labels of now when it is relabelled, passed by once
/// bound, found again by its new labels once freed, and gone once removed.
#[test]
fn a_walked_bucket_judges_each_volume_by_its_labels_of_now() {
    let mut volumes: Vec<PersistentVolume> = (0..MAX_LABEL_GROUPS + 5)
        .map(|i| {
            let id = format!("u{i}");
            available(&format!("x-{i:03}"), "1Gi")
                .labels(&[("id", id.as_str())])
                .build()
        })
        .collect();
    volumes.push(available("a-2", "2Gi").labels(&[("tier", "gold")]).build());
    volumes.push(
        available("b-3", "3Gi")
            .labels(&[("tier", "silver")])
            .build(),
    );
    volumes.push(available("c-4", "4Gi").labels(&[("tier", "gold")]).build());
    let mut index = index_of(volumes);
    assert!(
        index
            .labelled
            .values()
            .all(|groups| !index.checks_label_sets(groups.len())),
        "the bucket is walked"
    );
    let wanted = claim("c", "uid-c", "1Gi")
        .selector_expression("tier", "In", &["gold", "platinum"])
        .build();
    let tier =
        |name: &str, size: &str, tier: &str| available(name, size).labels(&[("tier", tier)]).arc();
    assert_eq!(best(&index, &wanted, false).as_deref(), Some("a-2"));

    put(&mut index, tier("a-2", "2Gi", "silver"));
    assert_eq!(
        best(&index, &wanted, false).as_deref(),
        Some("c-4"),
        "a-2 relabelled out"
    );
    put(&mut index, tier("b-3", "3Gi", "gold"));
    assert_eq!(
        best(&index, &wanted, false).as_deref(),
        Some("b-3"),
        "b-3 relabelled in"
    );
    put(
        &mut index,
        volume("b-3", "3Gi")
            .labels(&[("tier", "gold")])
            .bound_to("uid-x", "x")
            .phase("Bound")
            .arc(),
    );
    assert_eq!(
        best(&index, &wanted, false).as_deref(),
        Some("c-4"),
        "b-3 bound"
    );
    put(&mut index, tier("b-3", "3Gi", "silver"));
    assert_eq!(
        best(&index, &wanted, false).as_deref(),
        Some("c-4"),
        "b-3 freed, with labels that do not fit"
    );
    put(&mut index, tier("b-3", "3Gi", "platinum"));
    assert_eq!(
        best(&index, &wanted, false).as_deref(),
        Some("b-3"),
        "b-3 relabelled in while free"
    );
    index.remove("b-3");
    index.remove("c-4");
    assert_eq!(best(&index, &wanted, false), None, "removed");

    // The many label sets themselves: x-007 relabelled away from u7.
    let by_id = claim("i", "uid-i", "1Gi")
        .selector_expression("id", "In", &["u7", "u68"])
        .build();
    assert_eq!(best(&index, &by_id, false).as_deref(), Some("x-007"));
    put(
        &mut index,
        available("x-007", "1Gi").labels(&[("id", "u999")]).arc(),
    );
    assert_eq!(best(&index, &by_id, false).as_deref(), Some("x-068"));
}
