//! The typed readings of volume and claim fields: classes, sizes, volume
//! and access modes, claim references, annotations, plugin names.

use testkit::{RWO, RWX, claim, volume};

use super::*;

#[test]
fn volume_class_prefers_beta_annotation() {
    assert_eq!(volume_class(&volume("v", "1Gi").build()), "");
    assert_eq!(
        volume_class(&volume("v", "1Gi").class("gold").build()),
        "gold"
    );
    assert_eq!(
        volume_class(
            &volume("v", "1Gi")
                .class("gold")
                .annotation(ANN_BETA_STORAGE_CLASS, "silver")
                .build()
        ),
        "silver"
    );
    assert_eq!(
        volume_class(
            &volume("v", "1Gi")
                .class("gold")
                .annotation(ANN_BETA_STORAGE_CLASS, "")
                .build()
        ),
        ""
    );
}

#[test]
fn claim_class_and_has_class() {
    let none = claim("c", "", "1Gi").build();
    let empty = claim("c", "", "1Gi").class("").build();
    let gold = claim("c", "", "1Gi").class("gold").build();
    let beta = claim("c", "", "1Gi")
        .class("gold")
        .annotation(ANN_BETA_STORAGE_CLASS, "silver")
        .build();
    let beta_only = claim("c", "", "1Gi")
        .annotation(ANN_BETA_STORAGE_CLASS, "")
        .build();
    assert_eq!(
        [&none, &empty, &gold, &beta, &beta_only].map(claim_class),
        ["", "", "gold", "silver", ""]
    );
    assert_eq!(
        [&none, &empty, &gold, &beta, &beta_only].map(claim_has_class),
        [false, true, true, true, true]
    );
}

#[test]
fn sizes_are_parsed_or_named_errors() {
    assert_eq!(
        volume_capacity(&volume("v", "1Gi").build()).ok(),
        Amount::parse("1Gi").ok()
    );
    assert_eq!(
        claim_request(&claim("c", "", "500Mi").build()).ok(),
        Amount::parse("500Mi").ok()
    );

    let mut no_capacity = volume("v", "1Gi").build();
    no_capacity.spec = None;
    assert_eq!(volume_capacity(&no_capacity), Ok(Amount::ZERO));

    let err = volume_capacity(&volume("v9", "lots").build()).err();
    assert!(matches!(
        &err,
        Some(ObjectError::Quantity { object: ObjectName::Volume(name), field: "spec.capacity[storage]", source })
            if name.as_str() == "v9" && source.input == "lots"
    ));
    let err = claim_request(&claim("c9", "", "1X").namespace("myns").build()).err();
    let message = err.map(|e| e.to_string()).unwrap_or_default();
    assert!(message.contains("claim \"myns/c9\""), "{message}");
    assert!(message.contains("requests[storage]"), "{message}");
}

#[test]
fn volume_modes() {
    assert_eq!(
        volume_mode(&volume("v", "1").volume_mode("").build()),
        VolumeMode::Filesystem
    );
    assert_eq!(
        volume_mode(&volume("v", "1").volume_mode("Block").build()),
        VolumeMode::Block
    );
    assert_eq!(
        claim_volume_mode(&claim("c", "", "1").volume_mode("Filesystem").build()),
        VolumeMode::Filesystem
    );
    assert_eq!(
        claim_volume_mode(&claim("c", "", "1").volume_mode("Tape").build()),
        VolumeMode::Other("Tape".into())
    );
}

#[test]
fn access_mode_sets() {
    use AccessMode::{
        ReadOnlyMany as ROX, ReadWriteMany as RWX, ReadWriteOnce as RWO, ReadWriteOncePod as RWOP,
    };
    let set = AccessModes::of(&[ROX, RWO, RWO]);
    assert_eq!(set.len(), 2);
    assert!(set.contains(RWO) && set.contains(ROX) && !set.contains(RWX));
    assert!(set.is_superset_of(AccessModes::of(&[RWO])));
    assert!(!AccessModes::of(&[RWO]).is_superset_of(set));
    assert_eq!(set.to_string(), "RWO,ROX");
    assert_eq!(
        AccessModes::parse(&["ReadWriteOncePod", "ReadWriteMany"]),
        Ok(AccessModes::of(&[RWX, RWOP]))
    );
    assert_eq!(
        AccessModes::parse(&["ReadWriteOnce", "rwo"]),
        Err("rwo".to_owned())
    );
    assert!(AccessModes::EMPTY.is_empty());
}

#[test]
fn supersets_fewest_modes_first_in_fixed_order() {
    use AccessMode::{
        ReadOnlyMany as ROX, ReadWriteMany as RWX, ReadWriteOnce as RWO, ReadWriteOncePod as RWOP,
    };
    let order: Vec<String> = AccessModes::of(&[RWO])
        .supersets()
        .map(|s| s.to_string())
        .collect();
    assert_eq!(
        order,
        [
            "RWO",
            "RWO,ROX",
            "RWO,RWX",
            "RWO,RWOP",
            "RWO,ROX,RWX",
            "RWO,ROX,RWOP",
            "RWO,RWX,RWOP",
            "RWO,ROX,RWX,RWOP"
        ]
    );
    assert_eq!(AccessModes::EMPTY.supersets().count(), 16);
    assert_eq!(
        AccessModes::of(&[RWO, ROX, RWX, RWOP]).supersets().count(),
        1
    );
}

#[test]
fn unknown_access_modes_are_named_errors() {
    assert_eq!(
        volume_access_modes(&volume("v", "1").modes(&[RWX, RWO]).build()),
        Ok(AccessModes::of(&[
            AccessMode::ReadWriteOnce,
            AccessMode::ReadWriteMany
        ]))
    );
    assert_eq!(
        volume_access_modes(&volume("v", "1").modes(&["ReadWriteSometimes"]).build()),
        Err(ObjectError::UnknownAccessMode {
            object: ObjectName::Volume(VolumeName::new("v")),
            mode: "ReadWriteSometimes".into()
        })
    );
    assert_eq!(
        claim_access_modes(&claim("c", "", "1").namespace("myns").modes(&["X"]).build()),
        Err(ObjectError::UnknownAccessMode {
            object: ObjectName::Claim(ObjectKey::new("myns", "c")),
            mode: "X".into()
        })
    );
    let mut no_spec = claim("c", "", "1").build();
    no_spec.spec = None;
    assert_eq!(claim_access_modes(&no_spec), Ok(AccessModes::EMPTY));
}

#[test]
fn bound_to_claim_needs_name_namespace_and_fitting_uid() {
    let c = claim("claim1", "uid-1", "1Gi").build();
    let cases = [
        (volume("v", "1").build(), false),
        (
            volume("v", "1").claim_ref("default", "claim1", "").build(),
            true,
        ),
        (
            volume("v", "1")
                .claim_ref("default", "claim1", "uid-1")
                .build(),
            true,
        ),
        (
            volume("v", "1")
                .claim_ref("default", "claim1", "uid-2")
                .build(),
            false,
        ),
        (
            volume("v", "1").claim_ref("other", "claim1", "").build(),
            false,
        ),
        (
            volume("v", "1").claim_ref("default", "claim2", "").build(),
            false,
        ),
        (volume("v", "1").claim_ref("", "", "").build(), false),
    ];
    for (i, (v, expected)) in cases.iter().enumerate() {
        assert_eq!(is_volume_bound_to_claim(v, &c), *expected, "case {i}");
    }
}

#[test]
fn claim_reference_carries_identity() {
    let c = claim("claim1", "uid-1", "1Gi")
        .namespace("myns")
        .rv("42")
        .build();
    let r = claim_reference(&c);
    assert_eq!(r.kind.as_deref(), Some("PersistentVolumeClaim"));
    assert_eq!(r.api_version.as_deref(), Some("v1"));
    assert_eq!(r.namespace.as_deref(), Some("myns"));
    assert_eq!(r.name.as_deref(), Some("claim1"));
    assert_eq!(r.uid.as_deref(), Some("uid-1"));
    assert_eq!(r.resource_version.as_deref(), Some("42"));
    let v = volume("v", "1").build();
    let mut bound = v.clone();
    bound.spec.get_or_insert_default().claim_ref = Some(r);
    assert!(is_volume_bound_to_claim(&bound, &c));
}

#[test]
fn annotations_deletion_and_vac() {
    let v = volume("v", "1")
        .annotation(ANN_BETA_STORAGE_CLASS, "gold")
        .deleting()
        .vac("fast")
        .build();
    assert_eq!(
        annotation(&v.metadata, ANN_BETA_STORAGE_CLASS),
        Some("gold")
    );
    assert_eq!(annotation(&v.metadata, "other"), None);
    assert!(has_annotation(&v.metadata, ANN_BETA_STORAGE_CLASS));
    assert!(is_being_deleted(&v.metadata));
    assert!(!is_being_deleted(&volume("v", "1").build().metadata));
    assert_eq!(volume_vac(&v), Some("fast"));
    assert_eq!(volume_vac(&volume("v", "1").vac("").build()), None);
    assert_eq!(
        claim_vac(&claim("c", "", "1").vac("fast").build()),
        Some("fast")
    );
    assert_eq!(claim_vac(&claim("c", "", "1").build()), None);
}

#[test]
fn plugin_names_follow_upstream() {
    assert_eq!(plugin_name(&volume("v", "1Gi").no_source().build()), "N/A");
    let mut nfs = volume("v", "1Gi").no_source().build();
    nfs.spec.as_mut().unwrap().nfs = Some(Default::default());
    assert_eq!(plugin_name(&nfs), "kubernetes.io/nfs");
    assert_eq!(
        plugin_name(&volume("v", "1Gi").csi("ebs.csi.aws.com").build()),
        "kubernetes.io/csi:ebs.csi.aws.com"
    );
}
