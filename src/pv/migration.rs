//! CSI migration: the in-tree volume plugins whose volumes CSI drivers serve
//! now, and the `pv.kubernetes.io/migrated-to` annotation that tells every
//! controller so.
//!
//! Upstream turned migration on for all of these plugins, and the in-tree
//! code behind them is gone. So a claim of a class naming, say,
//! `kubernetes.io/aws-ebs` is handed to the CSI driver `ebs.csi.aws.com` (its
//! external provisioner watches for that name), and a volume that in-tree
//! plugin once provisioned is reclaimed by the driver's external provisioner,
//! never by this controller.

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};

use crate::pv::objects::annotation;
use k8s_names::{
    ANN_BETA_STORAGE_PROVISIONER, ANN_DYNAMICALLY_PROVISIONED, ANN_MIGRATED_TO,
    ANN_STORAGE_PROVISIONER,
};

/// Each migrated in-tree plugin and the CSI driver that took it over
/// (csi-translation-lib's names).
pub(crate) const MIGRATED_PLUGINS: [(&str, &str); 7] = [
    ("kubernetes.io/aws-ebs", "ebs.csi.aws.com"),
    ("kubernetes.io/gce-pd", "pd.csi.storage.gke.io"),
    ("kubernetes.io/azure-disk", "disk.csi.azure.com"),
    ("kubernetes.io/azure-file", "file.csi.azure.com"),
    ("kubernetes.io/cinder", "cinder.csi.openstack.org"),
    ("kubernetes.io/vsphere-volume", "csi.vsphere.vmware.com"),
    ("kubernetes.io/portworx-volume", "pxd.portworx.com"),
];

/// The CSI driver serving a migrated in-tree plugin; `None` for any other name.
pub(crate) fn csi_driver_of(plugin: &str) -> Option<&'static str> {
    MIGRATED_PLUGINS
        .iter()
        .find(|(in_tree, _)| *in_tree == plugin)
        .map(|(_, driver)| *driver)
}

/// How the `migrated-to` annotation of an object must change, if at all:
/// `Some(Some(driver))` to set it, `Some(None)` to remove it.
pub(crate) type MigratedToChange = Option<Option<String>>;

/// The change to a volume's `migrated-to`: set to the driver of the plugin
/// that provisioned it when that plugin migrated, removed when it names a
/// driver the volume's provisioner does not migrate to. A volume no plugin
/// provisioned is left as it is.
pub(crate) fn volume_migrated_to_change(volume: &PersistentVolume) -> MigratedToChange {
    let provisioner = annotation(&volume.metadata, ANN_DYNAMICALLY_PROVISIONED)?;
    let current = annotation(&volume.metadata, ANN_MIGRATED_TO).filter(|v| !v.is_empty());
    change(current, csi_driver_of(provisioner))
}

/// The change to a claim's `migrated-to`, judged from the provisioner it
/// was handed to (the GA storage-provisioner key, else the beta one), as
/// upstream's: set when that is a migrated in-tree plugin, removed
/// otherwise, also when it is the CSI driver itself (the controller hands a
/// claim of a migrated class to the driver directly, so such a claim never
/// carries the annotation). A claim handed to no provisioner is left as it
/// is.
pub(crate) fn claim_migrated_to_change(claim: &PersistentVolumeClaim) -> MigratedToChange {
    let provisioner = annotation(&claim.metadata, ANN_STORAGE_PROVISIONER)
        .or_else(|| annotation(&claim.metadata, ANN_BETA_STORAGE_PROVISIONER))?;
    let current = annotation(&claim.metadata, ANN_MIGRATED_TO).filter(|v| !v.is_empty());
    change(current, csi_driver_of(provisioner))
}

/// Whether a volume is reclaimed by a CSI driver's external provisioner
/// because its in-tree plugin migrated.
pub(crate) fn is_migrated(volume: &PersistentVolume) -> bool {
    annotation(&volume.metadata, ANN_MIGRATED_TO).is_some_and(|v| !v.is_empty())
        || annotation(&volume.metadata, ANN_DYNAMICALLY_PROVISIONED)
            .is_some_and(|p| csi_driver_of(p).is_some())
}

fn change(current: Option<&str>, wanted: Option<&str>) -> MigratedToChange {
    (current != wanted).then(|| wanted.map(str::to_string))
}

#[cfg(test)]
mod tests {
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
}
