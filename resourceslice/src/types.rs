//! What a driver wants published: its pools, each a list of slices of
//! devices, and who owns the slices. The meaning is upstream's
//! (`k8s.io/dynamic-resource-allocation/resourceslice`); devices and
//! counter sets are k8s-openapi's resource.k8s.io/v1 types as they are.

use k8s_openapi::api::core::v1::NodeSelector;
use k8s_openapi::api::resource::v1::{CounterSet, Device};
use std::collections::BTreeMap;

/// Everything one driver publishes: its pools by name. Replacing it with
/// [`Publisher::update`](crate::Publisher::update) is how a driver says
/// what changed; pools no longer listed get their slices deleted.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DriverResources {
    /// The pools, by pool name. A pool name is one or more DNS subdomains
    /// joined by `/`; a node-local driver usually names its pool after
    /// the node.
    pub pools: BTreeMap<String, Pool>,
}

/// Which nodes a pool's devices are reachable from.
#[derive(Debug, Clone, Default, PartialEq)]
pub enum NodeSelection {
    /// The node the publisher's [`Owner::Node`] names: its slices carry
    /// `spec.nodeName`. The only choice for a node-local driver, and only
    /// valid with a Node owner.
    #[default]
    ThisNode,
    /// The nodes this selector matches (`spec.nodeSelector`): a
    /// network-attached pool reachable from some nodes.
    NodeSelector(NodeSelector),
    /// Every node (`spec.allNodes`).
    AllNodes,
    /// Each device says (`spec.perDeviceNodeSelection`): every slice of
    /// the pool sets [`Slice::per_device_node_selection`], and every device
    /// one of its own `nodeName`, `nodeSelector` or `allNodes`.
    PerDevice,
}

/// One pool: devices published together, as one or more slices sharing a
/// generation.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Pool {
    /// Which nodes the devices are reachable from.
    pub node_selection: NodeSelection,
    /// A generation to start from or jump to. Zero is fine: the
    /// publisher bumps the generation whenever more than one slice
    /// changes, and a new pool starts at 1.
    pub generation: i64,
    /// The slices, in order. A slice's position is its index, encoded at
    /// the start of its name: the allocator takes slices in name order
    /// and devices in list order, so earlier means preferred. Publish at
    /// least one (maybe empty) slice for a pool the driver manages: an
    /// empty pool says the driver is up and has no devices.
    pub slices: Vec<Slice>,
}

/// The content of one ResourceSlice.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Slice {
    /// The devices, preferred first.
    pub devices: Vec<Device>,
    /// Counter sets the pool's devices consume from (partitionable
    /// devices). A slice holds either devices or counter sets, never both.
    pub shared_counters: Vec<CounterSet>,
    /// `spec.perDeviceNodeSelection`: set in every slice of a
    /// [`NodeSelection::PerDevice`] pool, and only there.
    pub per_device_node_selection: Option<bool>,
}

/// The object the published slices belong to: their owner reference
/// (with `controller: true`), so the garbage collector deletes them with
/// it, and part of their names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Owner {
    /// A Node: the slices of a node-local driver. Without a UID, the
    /// publisher reads the Node once, before its first create.
    Node {
        /// The node's name.
        name: String,
        /// The node's UID, if known.
        uid: Option<String>,
    },
    /// Any cluster-scoped object, for network-attached pools (a driver's
    /// Deployment, say).
    Object {
        /// `apiVersion`, e.g. "apps/v1".
        api_version: String,
        /// `kind`, e.g. "Deployment".
        kind: String,
        /// The object's name.
        name: String,
        /// The object's UID.
        uid: String,
    },
}

impl Owner {
    /// A Node owner whose UID the publisher looks up.
    pub fn node(name: impl Into<String>) -> Self {
        Self::Node {
            name: name.into(),
            uid: None,
        }
    }

    /// The owner's name.
    pub fn name(&self) -> &str {
        match self {
            Self::Node { name, .. } | Self::Object { name, .. } => name,
        }
    }

    /// The node's name, for a Node owner.
    pub fn node_name(&self) -> Option<&str> {
        match self {
            Self::Node { name, .. } => Some(name),
            Self::Object { .. } => None,
        }
    }
}

/// How many slices the publisher created, updated and deleted since it
/// started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// ResourceSlices created.
    pub creates: u64,
    /// ResourceSlices updated.
    pub updates: u64,
    /// ResourceSlices deleted.
    pub deletes: u64,
}
