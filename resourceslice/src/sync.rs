//! What one pool needs, decided from the desired pool and the slices that
//! exist: plain functions, no client.
//!
//! Upstream's rules:
//!
//! - a slice of a generation older than the pool's newest is obsolete, and
//!   so is one whose name carries no index of the pool's width, an index
//!   out of range, or the index of a slice already matched;
//! - each matched slice that differs from its desired content is updated
//!   in place (on the stored copy, so the update carries its
//!   resourceVersion); the pool's generation is kept when no slice is
//!   new and at most one changes (one write, which clients see
//!   atomically), and bumped otherwise, in which case every matched slice
//!   is rewritten with the new generation; a driver-given generation
//!   higher than the stored one wins; a new pool starts at 1;
//! - missing indexes are created with an index-encoded `generateName`
//!   and the owner reference (`controller: true`);
//! - the writes go: deletes, then updates, then creates.

use crate::compare::{copy_taint_times, counters_equal, devices_equal, same};
use crate::names::{GenerateName, decode_index, index_width};
use crate::types::{NodeSelection, Pool, Slice};
use k8s_openapi::api::resource::v1::{ResourcePool, ResourceSlice, ResourceSliceSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Who publishes: what every slice of the publisher carries.
#[derive(Debug, Clone)]
pub(crate) struct Target {
    /// The driver's name (`spec.driver`).
    pub(crate) driver: String,
    /// The owner node's name, for [`NodeSelection::ThisNode`] pools.
    pub(crate) node_name: Option<String>,
    /// The owner's name, part of every `generateName`.
    pub(crate) owner_name: Option<String>,
    /// The owner reference of created slices.
    pub(crate) owner: Option<OwnerReference>,
}

/// The writes one pool needs, in the order they are made.
#[derive(Debug, Default)]
pub(crate) struct Plan {
    /// The pool's generation after the writes.
    pub(crate) generation: i64,
    /// Obsolete slices.
    pub(crate) deletes: Vec<Arc<ResourceSlice>>,
    /// Changed slices: their index and the object to send.
    pub(crate) updates: Vec<(usize, ResourceSlice)>,
    /// Missing slices: their index and the object to send.
    pub(crate) creates: Vec<(usize, ResourceSlice)>,
}

impl Plan {
    /// Whether the pool needs no write.
    pub(crate) fn is_empty(&self) -> bool {
        self.deletes.is_empty() && self.updates.is_empty() && self.creates.is_empty()
    }
}

/// The spec fields of a slice that come from the pool rather than the
/// slice: node selection and the per-slice flag.
struct Selection {
    node_name: Option<String>,
    node_selector: Option<k8s_openapi::api::core::v1::NodeSelector>,
    all_nodes: Option<bool>,
}

fn selection(pool: &Pool, target: &Target) -> Selection {
    let mut s = Selection {
        node_name: None,
        node_selector: None,
        all_nodes: None,
    };
    match &pool.node_selection {
        NodeSelection::ThisNode => s.node_name.clone_from(&target.node_name),
        NodeSelection::NodeSelector(selector) => s.node_selector = Some(selector.clone()),
        NodeSelection::AllNodes => s.all_nodes = Some(true),
        NodeSelection::PerDevice => {}
    }
    s
}

/// `Some(true)` stays, anything else is absent.
fn flag(b: Option<bool>) -> Option<bool> {
    b.filter(|b| *b)
}

fn non_empty<T: Clone>(items: &[T]) -> Option<Vec<T>> {
    (!items.is_empty()).then(|| items.to_vec())
}

/// The writes that make the existing slices of pool `name` what `pool`
/// asks for.
pub(crate) fn plan(
    name: &str,
    pool: &Pool,
    existing: &[Arc<ResourceSlice>],
    target: &Target,
) -> Plan {
    let stored_generation = existing
        .iter()
        .map(|s| s.spec.pool.generation)
        .max()
        .unwrap_or(0);
    let width = index_width(pool.slices.len());
    let mut matched: BTreeMap<usize, &Arc<ResourceSlice>> = BTreeMap::new();
    let mut deletes = Vec::new();
    for slice in existing {
        let index = decode_index(slice.metadata.name.as_deref().unwrap_or_default(), width).ok();
        let fresh = slice.spec.pool.generation >= stored_generation;
        match index.filter(|i| fresh && *i < pool.slices.len() && !matched.contains_key(i)) {
            Some(i) => {
                matched.insert(i, slice);
            }
            None => deletes.push(slice.clone()),
        }
    }
    let count = pool.slices.len();
    let new_slices = count - matched.len();
    let selection = selection(pool, target);
    let mut desired_pool = ResourcePool {
        name: name.to_string(),
        generation: stored_generation,
        resource_slice_count: i64::try_from(count).unwrap_or(i64::MAX),
    };
    let changed: Vec<usize> = matched
        .iter()
        .filter(|(i, current)| differs(current, &pool.slices[**i], &desired_pool, &selection))
        .map(|(i, _)| *i)
        .collect();
    let (generation, bumped) = if pool.generation > stored_generation {
        (pool.generation, true)
    } else if new_slices == 0 && changed.len() <= 1 {
        (stored_generation, false)
    } else {
        (stored_generation + 1, true)
    };
    desired_pool.generation = generation;
    let updates = matched
        .iter()
        .filter(|(i, _)| bumped || changed.contains(i))
        .map(|(i, current)| {
            let mut slice = (***current).clone();
            let desired = &pool.slices[*i];
            slice.spec.pool = desired_pool.clone();
            slice
                .spec
                .node_selector
                .clone_from(&selection.node_selector);
            slice.spec.all_nodes = selection.all_nodes;
            slice.spec.shared_counters = non_empty(&desired.shared_counters);
            slice.spec.per_device_node_selection = flag(desired.per_device_node_selection);
            let current_devices = current.spec.devices.as_deref().unwrap_or_default();
            slice.spec.devices = non_empty(&copy_taint_times(current_devices, &desired.devices));
            (*i, slice)
        })
        .collect();
    let creates = (0..count)
        .filter(|i| !matched.contains_key(i))
        .map(|i| {
            let desired = &pool.slices[i];
            let generate_name = GenerateName {
                index: i,
                width,
                driver: &target.driver,
                owner: target.owner_name.as_deref(),
            };
            let slice = ResourceSlice {
                metadata: ObjectMeta {
                    generate_name: Some(generate_name.to_string()),
                    owner_references: target.owner.clone().map(|o| vec![o]),
                    ..ObjectMeta::default()
                },
                spec: ResourceSliceSpec {
                    driver: target.driver.clone(),
                    pool: desired_pool.clone(),
                    node_name: selection.node_name.clone(),
                    node_selector: selection.node_selector.clone(),
                    all_nodes: selection.all_nodes,
                    devices: non_empty(&desired.devices),
                    shared_counters: non_empty(&desired.shared_counters),
                    per_device_node_selection: flag(desired.per_device_node_selection),
                },
            };
            (i, slice)
        })
        .collect();
    Plan {
        generation,
        deletes,
        updates,
        creates,
    }
}

/// Whether a matched slice differs from what its index asks for.
fn differs(
    current: &ResourceSlice,
    desired: &Slice,
    pool: &ResourcePool,
    selection: &Selection,
) -> bool {
    let spec = &current.spec;
    spec.pool != *pool
        || !same(&spec.node_selector, &selection.node_selector)
        || flag(spec.all_nodes) != selection.all_nodes
        || !devices_equal(
            spec.devices.as_deref().unwrap_or_default(),
            &desired.devices,
        )
        || !counters_equal(
            spec.shared_counters.as_deref().unwrap_or_default(),
            &desired.shared_counters,
        )
        || flag(spec.per_device_node_selection) != flag(desired.per_device_node_selection)
}

/// The feature gates a server that stored `stored` for the `sent` slice
/// probably has off, or `None` when it stored what was sent (its own
/// taint times aside). Guessed as upstream does, from which fields went
/// missing; "unknown" when none of those did.
pub(crate) fn dropped_features(
    sent: &ResourceSliceSpec,
    stored: &ResourceSliceSpec,
) -> Option<Vec<&'static str>> {
    let sent_devices = sent.devices.as_deref().unwrap_or_default();
    let stored_devices = stored.devices.as_deref().unwrap_or_default();
    let sent_counters = sent.shared_counters.as_deref().unwrap_or_default();
    let stored_counters = stored.shared_counters.as_deref().unwrap_or_default();
    if devices_equal(stored_devices, sent_devices)
        && counters_equal(stored_counters, sent_counters)
        && flag(sent.per_device_node_selection) == flag(stored.per_device_node_selection)
    {
        return None;
    }
    let pairs = || sent_devices.iter().zip(stored_devices);
    let mut features = Vec::new();
    if pairs().any(|(a, b)| len(&a.taints) > len(&b.taints)) {
        features.push("DRADeviceTaints");
    }
    let lost_selection = flag(sent.per_device_node_selection).is_some()
        && flag(stored.per_device_node_selection).is_none();
    if lost_selection
        || sent_counters.len() > stored_counters.len()
        || pairs().any(|(a, b)| len(&a.consumes_counters) != len(&b.consumes_counters))
    {
        features.push("DRAPartitionableDevices");
    }
    if pairs().any(|(a, b)| {
        len(&a.binding_conditions) != len(&b.binding_conditions)
            || len(&a.binding_failure_conditions) != len(&b.binding_failure_conditions)
    }) {
        features.push("DRADeviceBindingConditions");
    }
    if pairs().any(|(a, b)| {
        a.allow_multiple_allocations.is_some() && b.allow_multiple_allocations.is_none()
    }) {
        features.push("DRAConsumableCapacity");
    }
    if features.is_empty() {
        features.push("unknown");
    }
    Some(features)
}

/// The length of an optional list.
fn len<T>(v: &Option<Vec<T>>) -> usize {
    v.as_ref().map_or(0, Vec::len)
}

/// What the desired slice becomes after the server dropped fields: what
/// it stored, so the publisher does not rewrite it forever.
pub(crate) fn as_stored(stored: &ResourceSliceSpec) -> Slice {
    Slice {
        devices: stored.devices.clone().unwrap_or_default(),
        shared_counters: stored.shared_counters.clone().unwrap_or_default(),
        per_device_node_selection: flag(stored.per_device_node_selection),
    }
}
