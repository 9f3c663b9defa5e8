//! Short builders for the objects of pv-controller's tests, so that a
//! scenario row reads like `volume("volume1-1", "1Gi").bound_to("uid1-1",
//! "claim1-1")` and a unit test's input fits on a line.
//!
//! One dialect for every test of the workspace: the unit tests inside the
//! controller's `src/`, the integration tests in `tests/it/` and the
//! benchmark all build their objects here, so a name means the same thing
//! and a default is the same default wherever it is read.
//!
//! The defaults follow upstream's binder test framework
//! (`pkg/controller/volume/persistentvolume/framework_test.go`), because the
//! largest body of tests are its scenario tables:
//!
//! - [`volume`]: phase Pending, access modes ReadWriteOnce + ReadOnlyMany,
//!   volume mode Filesystem, reclaim policy Retain, a GCE PD source, no
//!   class, no claimRef.
//! - [`claim`]: namespace `default`, phase Pending, access modes
//!   ReadWriteOnce + ReadOnlyMany, volume mode Filesystem, no class (nil),
//!   no selector, no volume name.
//!
//! A test that needs anything else says so on its row (`.phase("Available")`,
//! `.modes(&[RWO])`, `.namespace("myns")`); an empty string given for an
//! optional field removes that field where the method says so.
//!
//! The crate depends on nothing but the API types: it knows nothing of the
//! controller, and the test support that does (the scenario harness, the
//! mock volume plugin) lives with the integration tests.

mod claim;
mod other;
mod volume;

pub use claim::{ClaimBuilder, claim, claims};
pub use other::{
    default_class, deleting_pod_with_running_init_container, pod, storage_class,
    with_ephemeral_volume,
};
pub use volume::{VolumeBuilder, volume, volumes};

/// The provisioner (and plugin) name of the integration tests' mock volume
/// plugin; the value [`VolumeBuilder::annotations`] gives provisioner keys.
pub const MOCK_PLUGIN: &str = "kubernetes.io/mock-volume";

/// Access mode ReadWriteOnce.
pub const RWO: &str = "ReadWriteOnce";
/// Access mode ReadOnlyMany.
pub const ROX: &str = "ReadOnlyMany";
/// Access mode ReadWriteMany.
pub const RWX: &str = "ReadWriteMany";
/// Access mode ReadWriteOncePod.
pub const RWOP: &str = "ReadWriteOncePod";

/// On a claim: the controller finished binding it.
pub const ANN_BIND_COMPLETED: &str = "pv.kubernetes.io/bind-completed";
/// On a volume or claim: the binding was made by the controller, not
/// pre-bound by a user.
pub const ANN_BOUND_BY_CONTROLLER: &str = "pv.kubernetes.io/bound-by-controller";
/// On a volume: the provisioner (plugin or external) that created it.
pub const ANN_PROVISIONED_BY: &str = "pv.kubernetes.io/provisioned-by";
/// On a claim: the provisioner asked to provision it (GA key).
pub const ANN_STORAGE_PROVISIONER: &str = "volume.kubernetes.io/storage-provisioner";
/// On a claim: the provisioner asked to provision it (beta key, written
/// together with the GA key).
pub const ANN_BETA_STORAGE_PROVISIONER: &str = "volume.beta.kubernetes.io/storage-provisioner";
/// On a claim: the node the scheduler picked for a WaitForFirstConsumer claim.
pub const ANN_SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";
/// On a volume or claim: the storage class, in the beta annotation that
/// takes precedence over `spec.storageClassName`.
pub const ANN_BETA_CLASS: &str = "volume.beta.kubernetes.io/storage-class";
/// On a volume: the capacity its claim had before a resize.
pub const ANN_PRE_RESIZE_CAPACITY: &str = "volume.alpha.kubernetes.io/pre-resize-capacity";
/// On a volume or claim: the CSI driver that took over an in-tree plugin.
pub const ANN_MIGRATED_TO: &str = "pv.kubernetes.io/migrated-to";
/// On a volume: the controller deleted its storage (the volume object
/// lingers for other finalizers).
pub const ANN_STORAGE_DELETED: &str = "pv-controller.k8s.io/storage-deleted";
/// The external provisioner's finalizer on volumes.
pub const FINALIZER_EXTERNAL: &str = "external-provisioner.volume.kubernetes.io/finalizer";

/// A `storage` resource list of one quantity.
fn storage(
    value: &str,
) -> std::collections::BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity> {
    std::collections::BTreeMap::from([(
        "storage".to_string(),
        k8s_openapi::apimachinery::pkg::api::resource::Quantity(value.to_string()),
    )])
}

/// Owned strings of a list of borrowed ones (access modes, finalizers).
fn strings(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| (*s).to_string()).collect()
}

/// `Some(value)`, or `None` for the empty string: how the builders remove an
/// optional field.
fn non_empty(value: &str) -> Option<String> {
    (!value.is_empty()).then(|| value.to_string())
}

/// The value a test annotation gets from `annotations(keys)`: the mock
/// plugin for provisioner keys, `yes` otherwise (as upstream's framework).
fn annotation_value(key: &str) -> String {
    match key {
        ANN_PROVISIONED_BY | ANN_STORAGE_PROVISIONER | ANN_BETA_STORAGE_PROVISIONER => {
            MOCK_PLUGIN.to_string()
        }
        _ => "yes".to_string(),
    }
}
