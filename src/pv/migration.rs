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
mod tests;
