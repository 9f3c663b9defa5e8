//! resourceslice: publishes a DRA driver's devices as resource.k8s.io/v1
//! ResourceSlices, with the algorithm of upstream's Go publisher
//! (`k8s.io/dynamic-resource-allocation/resourceslice`), and does the
//! kubelet's clean-up of them.
//!
//! A driver describes what it has as [`DriverResources`]: pools by name,
//! each a list of [`Slice`]s of k8s-openapi [`Device`]s (or
//! [`Pool::from_devices`] to have a long list cut to the API's limits),
//! and hands it to a [`Publisher`] started with [`Options`]. The
//! publisher creates, updates and deletes slices until the cluster holds
//! exactly that, and again whenever [`Publisher::update`] is called or
//! someone else changes its slices. Its slices are named after their
//! index in the pool, so a publisher started again finds them and, with
//! the same desired state, writes nothing.
//!
//! Pools are checked before anything is sent ([`validate_pool`]): an
//! invalid pool is reported as an [`Error`] and left alone, while the
//! driver's other pools are published. When the server stores a slice
//! without fields the driver set (a feature gate off), the publisher
//! reports a [`DroppedFieldsError`] naming the probable gate and keeps
//! what the server stored.
//!
//! For the kubelet, [`wipe_node`] deletes every slice of a node, and
//! [`DriverPresence`] deletes one driver's slices 30 s after its last
//! instance disconnected.
//!
//! [`Device`]: k8s_openapi::api::resource::v1::Device

mod cache;
mod compare;
mod controller;
mod devices_file;
mod error;
mod kubelet;
mod names;
mod options;
mod queue;
mod split;
mod sync;
mod types;
mod validate;

pub use controller::Publisher;
pub use devices_file::{DevicesFileError, parse_devices_file};
pub use error::{DroppedFieldsError, Error, Write};
pub use kubelet::{DEFAULT_GRACE_PERIOD, DriverPresence, wipe_node};
pub use options::{DEFAULT_MUTATION_CACHE_TTL, DEFAULT_SYNC_DELAY, ErrorHandler, Options};
pub use types::{DriverResources, NodeSelection, Owner, Pool, Slice, Stats};
pub use validate::{
    MAX_ATTRIBUTES_AND_CAPACITIES, MAX_DEVICES_PER_SLICE, MAX_DEVICES_WITH_TAINTS_OR_COUNTERS,
    ValidationError, validate_pool,
};
