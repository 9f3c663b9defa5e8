use super::*;
use k8s_openapi::api::core::v1::PersistentVolumeSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

fn volume(provisioner: Option<&str>, policy: &str, finalizers: &[&str]) -> PersistentVolume {
    PersistentVolume {
        metadata: ObjectMeta {
            name: Some("pv".to_string()),
            annotations: provisioner
                .map(|p| [(ANN_DYNAMICALLY_PROVISIONED.to_string(), p.to_string())].into()),
            finalizers: (!finalizers.is_empty()).then(|| {
                finalizers
                    .iter()
                    .map(std::string::ToString::to_string)
                    .collect()
            }),
            ..Default::default()
        },
        spec: Some(PersistentVolumeSpec {
            persistent_volume_reclaim_policy: Some(policy.to_string()),
            ..Default::default()
        }),
        status: None,
    }
}

/// Upstream's TestModifyDeletionFinalizers (13-1 to 13-15), in this
/// controller's terms: `None` means no write.
#[test]
fn deletion_finalizers_follow_provisioner_policy_and_migration() {
    const EXT: &str = FINALIZER_EXTERNAL_PROVISIONER;
    const OURS: &str = FINALIZER_PV_CONTROLLER;
    const CUSTOM: &str = "test.io/custom";
    const MOCK: &str = "kubernetes.io/mock-volume";
    /// Name, provisioner, policy, finalizers, the finalizers wanted.
    type Case = (
        &'static str,
        Option<&'static str>,
        &'static str,
        &'static [&'static str],
        Option<&'static [&'static str]>,
    );
    let cases: [Case; 15] = [
        (
            "13-1 CSI volume keeps the external finalizer",
            Some("rbd.csi.ceph.com"),
            "Delete",
            &[EXT],
            None,
        ),
        (
            "13-2 CSI volume without finalizer",
            Some("rbd.csi.ceph.com"),
            "Delete",
            &[],
            None,
        ),
        (
            "13-3 in-tree Delete gets ours beside a custom one",
            Some(MOCK),
            "Delete",
            &[CUSTOM],
            Some(&[CUSTOM, OURS]),
        ),
        (
            "13-4 in-tree Delete gets ours",
            Some(MOCK),
            "Delete",
            &[],
            Some(&[OURS]),
        ),
        (
            "13-5 in-tree: the external finalizer is replaced by ours",
            Some(MOCK),
            "Delete",
            &[EXT],
            Some(&[OURS]),
        ),
        (
            "13-6 in-tree with custom and external",
            Some(MOCK),
            "Delete",
            &[CUSTOM, EXT],
            Some(&[CUSTOM, OURS]),
        ),
        (
            "13-7 migrated volume loses ours, keeps external",
            Some("kubernetes.io/gce-pd"),
            "Delete",
            &[EXT, OURS],
            Some(&[EXT]),
        ),
        (
            "13-8 in-tree with both keeps only ours",
            Some(MOCK),
            "Delete",
            &[EXT, OURS],
            Some(&[OURS]),
        ),
        (
            "13-9 in-tree with all three",
            Some(MOCK),
            "Delete",
            &[CUSTOM, EXT, OURS],
            Some(&[CUSTOM, OURS]),
        ),
        (
            "13-10 not provisioned, external finalizer",
            None,
            "Delete",
            &[EXT],
            None,
        ),
        (
            "13-11 not provisioned, no finalizers",
            None,
            "Delete",
            &[],
            None,
        ),
        (
            "13-12 Retain without finalizer",
            Some(MOCK),
            "Retain",
            &[],
            None,
        ),
        (
            "13-13 Recycle without finalizer",
            Some(MOCK),
            "Recycle",
            &[],
            None,
        ),
        (
            "13-14 Retain loses ours",
            Some(MOCK),
            "Retain",
            &[OURS],
            Some(&[]),
        ),
        ("13-15 static volume", None, "Retain", &[], None),
    ];
    for (name, provisioner, policy, finalizers, wanted) in cases {
        let wanted = wanted.map(|list| {
            list.iter()
                .map(std::string::ToString::to_string)
                .collect::<Vec<_>>()
        });
        assert_eq!(
            wanted_finalizers(&volume(provisioner, policy, finalizers)),
            wanted,
            "{name}"
        );
    }
}

#[test]
fn in_tree_delete_gets_the_finalizer() {
    let v = volume(
        Some("kubernetes.io/host-path"),
        "Delete",
        &["kubernetes.io/pv-protection"],
    );
    assert_eq!(
        wanted_finalizers(&v),
        Some(vec![
            "kubernetes.io/pv-protection".to_string(),
            FINALIZER_PV_CONTROLLER.to_string()
        ])
    );
    let done = volume(
        Some("kubernetes.io/host-path"),
        "Delete",
        &[FINALIZER_PV_CONTROLLER],
    );
    assert_eq!(wanted_finalizers(&done), None);
}

#[test]
fn retain_and_recycle_lose_it_and_external_finalizer_goes() {
    for policy in ["Retain", "Recycle"] {
        let v = volume(
            Some("kubernetes.io/host-path"),
            policy,
            &[FINALIZER_PV_CONTROLLER],
        );
        assert_eq!(wanted_finalizers(&v), Some(vec![]));
    }
    let v = volume(
        Some("kubernetes.io/host-path"),
        "Delete",
        &[FINALIZER_EXTERNAL_PROVISIONER, FINALIZER_PV_CONTROLLER],
    );
    assert_eq!(
        wanted_finalizers(&v),
        Some(vec![FINALIZER_PV_CONTROLLER.to_string()])
    );
}

#[test]
fn external_and_unprovisioned_volumes_are_left_alone() {
    assert_eq!(wanted_finalizers(&volume(None, "Delete", &[])), None);
    let external = volume(
        Some("ebs.csi.aws.com"),
        "Delete",
        &[FINALIZER_EXTERNAL_PROVISIONER],
    );
    assert_eq!(wanted_finalizers(&external), None);
}
