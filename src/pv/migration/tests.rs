use super::*;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

fn meta(annotations: &[(&str, &str)]) -> ObjectMeta {
    ObjectMeta {
        annotations: (!annotations.is_empty()).then(|| {
            annotations
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        }),
        ..Default::default()
    }
}

fn pv(annotations: &[(&str, &str)]) -> PersistentVolume {
    PersistentVolume {
        metadata: meta(annotations),
        ..Default::default()
    }
}

fn pvc(annotations: &[(&str, &str)]) -> PersistentVolumeClaim {
    PersistentVolumeClaim {
        metadata: meta(annotations),
        ..Default::default()
    }
}

type Annotations = Vec<(&'static str, &'static str)>;

const GCE: &str = "kubernetes.io/gce-pd";
const GCE_CSI: &str = "pd.csi.storage.gke.io";

#[test]
fn every_migrated_plugin_has_its_driver() {
    assert_eq!(
        csi_driver_of("kubernetes.io/aws-ebs"),
        Some("ebs.csi.aws.com")
    );
    assert_eq!(
        csi_driver_of("kubernetes.io/portworx-volume"),
        Some("pxd.portworx.com")
    );
    assert_eq!(csi_driver_of("kubernetes.io/host-path"), None);
    assert_eq!(csi_driver_of("ebs.csi.aws.com"), None);
}

/// Upstream's TestAnnealMigrationAnnotations, for volumes and claims.
#[test]
fn migrated_to_is_annealed_as_upstream() {
    let cases: [(&str, MigratedToChange, MigratedToChange); 8] = [
        // (provisioner of the object, change for a PV, change for a PVC)
        (
            "migration on",
            Some(Some(GCE_CSI.into())),
            Some(Some(GCE_CSI.into())),
        ),
        ("not migrated plugin", None, None),
        ("rollback", Some(None), Some(None)),
        ("other plugin not affected", None, None),
        ("not dynamically provisioned", None, None),
        ("already annotated", None, None),
        // Handed to the driver itself: upstream finds no migration for
        // a provisioner that is no in-tree plugin.
        ("handed to the driver", None, None),
        ("handed to the driver, annotated", None, Some(None)),
    ];
    for (name, for_volume, for_claim) in cases {
        let (pv_annotations, pvc_annotations): (Annotations, Annotations) = match name {
            "migration on" => (
                vec![(ANN_DYNAMICALLY_PROVISIONED, GCE)],
                vec![(ANN_BETA_STORAGE_PROVISIONER, GCE)],
            ),
            "not migrated plugin" => (
                vec![(ANN_DYNAMICALLY_PROVISIONED, "kubernetes.io/rbd")],
                vec![(ANN_STORAGE_PROVISIONER, "kubernetes.io/rbd")],
            ),
            "rollback" => (
                vec![
                    (ANN_DYNAMICALLY_PROVISIONED, "kubernetes.io/rbd"),
                    (ANN_MIGRATED_TO, GCE_CSI),
                ],
                vec![
                    (ANN_STORAGE_PROVISIONER, "kubernetes.io/rbd"),
                    (ANN_MIGRATED_TO, GCE_CSI),
                ],
            ),
            "other plugin not affected" => (
                vec![(ANN_DYNAMICALLY_PROVISIONED, "example.com/other")],
                vec![(ANN_STORAGE_PROVISIONER, "example.com/other")],
            ),
            "not dynamically provisioned" => (
                vec![(ANN_MIGRATED_TO, GCE_CSI)],
                vec![(ANN_MIGRATED_TO, GCE_CSI)],
            ),
            "handed to the driver" => (
                vec![(ANN_DYNAMICALLY_PROVISIONED, GCE_CSI)],
                vec![(ANN_STORAGE_PROVISIONER, GCE_CSI)],
            ),
            "handed to the driver, annotated" => (
                vec![(ANN_DYNAMICALLY_PROVISIONED, GCE_CSI)],
                vec![
                    (ANN_STORAGE_PROVISIONER, GCE_CSI),
                    (ANN_MIGRATED_TO, GCE_CSI),
                ],
            ),
            _ => (
                vec![
                    (ANN_DYNAMICALLY_PROVISIONED, GCE),
                    (ANN_MIGRATED_TO, GCE_CSI),
                ],
                vec![(ANN_STORAGE_PROVISIONER, GCE), (ANN_MIGRATED_TO, GCE_CSI)],
            ),
        };
        assert_eq!(
            volume_migrated_to_change(&pv(&pv_annotations)),
            for_volume,
            "{name}: volume"
        );
        assert_eq!(
            claim_migrated_to_change(&pvc(&pvc_annotations)),
            for_claim,
            "{name}: claim"
        );
    }
    assert_eq!(volume_migrated_to_change(&pv(&[])), None, "no annotations");
    assert_eq!(claim_migrated_to_change(&pvc(&[])), None, "no annotations");
}

#[test]
fn migrated_volumes_are_recognised_by_either_annotation() {
    assert!(is_migrated(&pv(&[(ANN_MIGRATED_TO, GCE_CSI)])));
    assert!(is_migrated(&pv(&[(ANN_DYNAMICALLY_PROVISIONED, GCE)])));
    assert!(!is_migrated(&pv(&[(
        ANN_DYNAMICALLY_PROVISIONED,
        "kubernetes.io/host-path"
    )])));
    assert!(!is_migrated(&pv(&[])));
}
