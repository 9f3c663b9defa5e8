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
//! The crate depends on nothing but the API types and the names on objects
//! (`k8s_names`, which tests import from there too): it knows nothing of
//! the controller, and the test support that does (the scenario harness,
//! the mock volume plugin) lives with the integration tests.

use k8s_names::{
    ANN_BETA_STORAGE_PROVISIONER, ANN_DYNAMICALLY_PROVISIONED, ANN_STORAGE_PROVISIONER,
};

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
        ANN_DYNAMICALLY_PROVISIONED | ANN_STORAGE_PROVISIONER | ANN_BETA_STORAGE_PROVISIONER => {
            MOCK_PLUGIN.to_string()
        }
        _ => "yes".to_string(),
    }
}
