//! Checks of a desired pool before anything is written, so that a
//! driver's mistake is one clear error and no request at all.
//!
//! Upstream's client-side checks come first, with its messages: no device
//! name twice in a pool, no counter set twice, and every counter a device
//! consumes exists in a counter set of the pool. Then the API server's
//! own limits, which upstream leaves to the server (so a bad slice there
//! is a failed write retried forever): device names are DNS labels, a
//! slice has at most 128 devices (64 when one has taints or consumes
//! counters), holds devices or counter sets but not both, a device has at
//! most 32 attributes and capacities, their names are qualified names and
//! an attribute has exactly one value; and the node selection fits the
//! publisher: [`NodeSelection::ThisNode`] exactly when its slices are the
//! owner node's, per-device selection exactly in per-device pools.
//!
//! An invalid pool is reported and left as it is on the server; the
//! driver's other pools go on being published. (Upstream validates all
//! pools together and publishes nothing while one is invalid.)

use crate::types::{NodeSelection, Pool};
use k8s_openapi::api::resource::v1::Device;
use std::collections::{BTreeMap, BTreeSet};

/// The most devices one slice may hold.
pub const MAX_DEVICES_PER_SLICE: usize = 128;
/// The most devices one slice may hold when one of them has taints or
/// consumes counters.
pub const MAX_DEVICES_WITH_TAINTS_OR_COUNTERS: usize = 64;
/// The most attributes and capacities of one device, together.
pub const MAX_ATTRIBUTES_AND_CAPACITIES: usize = 32;
/// The longest identifier part of an attribute or capacity name.
const MAX_IDENTIFIER: usize = 32;

/// Why a desired pool cannot be published.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ValidationError {
    /// Two counter sets of the pool have one name.
    #[error("found duplicate counter set {set:?} in pool {pool:?}")]
    DuplicateCounterSet {
        /// The pool.
        pool: String,
        /// The counter set's name.
        set: String,
    },
    /// Two devices of the pool have one name.
    #[error("found duplicate device {device:?} in pool {pool:?}")]
    DuplicateDevice {
        /// The pool.
        pool: String,
        /// The device's name.
        device: String,
    },
    /// A device consumes from a counter set the pool does not have.
    #[error("counter set {set:?} referenced by device {device:?} not found")]
    UnknownCounterSet {
        /// The counter set's name.
        set: String,
        /// The device.
        device: String,
    },
    /// A device consumes a counter its counter set does not have.
    #[error("counter {counter:?} referenced by device {device:?} not found in counter set {set:?}")]
    UnknownCounter {
        /// The counter's name.
        counter: String,
        /// The device.
        device: String,
        /// The counter set.
        set: String,
    },
    /// The pool name is not DNS subdomains joined by `/`.
    #[error("pool name {pool:?} is not one or more DNS subdomains joined by '/'")]
    PoolName {
        /// The pool.
        pool: String,
    },
    /// A device name is not a DNS label.
    #[error(
        "device name {device:?} in pool {pool:?} is not a DNS label (lower-case letters, digits and '-', at most 63)"
    )]
    DeviceName {
        /// The pool.
        pool: String,
        /// The device's name.
        device: String,
    },
    /// A slice holds more devices than the API allows.
    #[error("slice #{slice} of pool {pool:?} has {count} devices, more than the {max} allowed")]
    TooManyDevices {
        /// The pool.
        pool: String,
        /// The slice's index.
        slice: usize,
        /// How many devices it has.
        count: usize,
        /// The limit (64 when a device has taints or consumes counters).
        max: usize,
    },
    /// A slice holds both devices and counter sets.
    #[error("slice #{slice} of pool {pool:?} has both devices and shared counters")]
    DevicesAndCounters {
        /// The pool.
        pool: String,
        /// The slice's index.
        slice: usize,
    },
    /// A device has more attributes and capacities than the API allows.
    #[error(
        "device {device:?} in pool {pool:?} has {count} attributes and capacities, more than the 32 allowed"
    )]
    TooManyAttributes {
        /// The pool.
        pool: String,
        /// The device.
        device: String,
        /// How many it has.
        count: usize,
    },
    /// An attribute or capacity name is not a qualified name.
    #[error(
        "device {device:?} in pool {pool:?}: {name:?} is not a qualified name (an optional DNS subdomain and '/', then a C identifier of at most 32 characters)"
    )]
    AttributeName {
        /// The pool.
        pool: String,
        /// The device.
        device: String,
        /// The attribute or capacity name.
        name: String,
    },
    /// An attribute sets no value, or more than one.
    #[error("device {device:?} in pool {pool:?}: attribute {name:?} must have exactly one value")]
    AttributeValue {
        /// The pool.
        pool: String,
        /// The device.
        device: String,
        /// The attribute name.
        name: String,
    },
    /// The pool's node selection does not fit the publisher's slices.
    #[error("pool {pool:?}: {reason}")]
    NodeSelection {
        /// The pool.
        pool: String,
        /// What does not fit.
        reason: &'static str,
    },
}

/// Checks one desired pool. `node_local` says whether the publisher's
/// slices are one node's (a Node owner, not limited to one pool), which
/// decides the node selections it can publish and find again.
pub fn validate_pool(name: &str, pool: &Pool, node_local: bool) -> Result<(), ValidationError> {
    counters_and_devices(name, pool)?;
    if name.is_empty() || !name.split('/').all(is_dns_subdomain) {
        return Err(ValidationError::PoolName { pool: name.into() });
    }
    node_selection(name, pool, node_local)?;
    for (index, slice) in pool.slices.iter().enumerate() {
        if !slice.devices.is_empty() && !slice.shared_counters.is_empty() {
            return Err(ValidationError::DevicesAndCounters {
                pool: name.into(),
                slice: index,
            });
        }
        let max = device_limit(&slice.devices);
        if slice.devices.len() > max {
            return Err(ValidationError::TooManyDevices {
                pool: name.into(),
                slice: index,
                count: slice.devices.len(),
                max,
            });
        }
        for device in &slice.devices {
            self::device(name, device)?;
        }
    }
    Ok(())
}

/// The most devices a slice holding `devices` may have.
pub(crate) fn device_limit(devices: &[Device]) -> usize {
    if devices.iter().any(limited) {
        MAX_DEVICES_WITH_TAINTS_OR_COUNTERS
    } else {
        MAX_DEVICES_PER_SLICE
    }
}

/// Whether a device lowers its slice's limit (it has taints or consumes
/// counters).
pub(crate) fn limited(device: &Device) -> bool {
    device.taints.as_ref().is_some_and(|t| !t.is_empty())
        || device
            .consumes_counters
            .as_ref()
            .is_some_and(|c| !c.is_empty())
}

/// Upstream's checks, with its messages.
fn counters_and_devices(name: &str, pool: &Pool) -> Result<(), ValidationError> {
    let mut sets = BTreeMap::new();
    for set in pool.slices.iter().flat_map(|s| &s.shared_counters) {
        if sets.insert(set.name.as_str(), set).is_some() {
            return Err(ValidationError::DuplicateCounterSet {
                pool: name.into(),
                set: set.name.clone(),
            });
        }
    }
    let mut devices = BTreeSet::new();
    for device in pool.slices.iter().flat_map(|s| &s.devices) {
        if !devices.insert(device.name.as_str()) {
            return Err(ValidationError::DuplicateDevice {
                pool: name.into(),
                device: device.name.clone(),
            });
        }
        for consumption in device.consumes_counters.iter().flatten() {
            let Some(set) = sets.get(consumption.counter_set.as_str()) else {
                return Err(ValidationError::UnknownCounterSet {
                    set: consumption.counter_set.clone(),
                    device: device.name.clone(),
                });
            };
            if let Some(counter) = consumption
                .counters
                .keys()
                .find(|c| !set.counters.contains_key(*c))
            {
                return Err(ValidationError::UnknownCounter {
                    counter: counter.clone(),
                    device: device.name.clone(),
                    set: set.name.clone(),
                });
            }
        }
    }
    Ok(())
}

fn node_selection(name: &str, pool: &Pool, node_local: bool) -> Result<(), ValidationError> {
    let fail = |reason| {
        Err(ValidationError::NodeSelection {
            pool: name.into(),
            reason,
        })
    };
    let this_node = pool.node_selection == NodeSelection::ThisNode;
    if this_node && !node_local {
        return fail(
            "the node selection ThisNode needs a Node owner (and no single-pool reconciliation)",
        );
    }
    if !this_node && node_local {
        return fail(
            "a publisher owned by a Node publishes ThisNode pools only (set reconcile_pool_with_name for others)",
        );
    }
    let per_device = pool.node_selection == NodeSelection::PerDevice;
    for slice in &pool.slices {
        if (slice.per_device_node_selection == Some(true)) != per_device {
            return fail(
                "per_device_node_selection is set in every slice of a PerDevice pool and in no other",
            );
        }
        for device in &slice.devices {
            let own = usize::from(device.node_name.as_ref().is_some_and(|n| !n.is_empty()))
                + usize::from(device.node_selector.is_some())
                + usize::from(device.all_nodes == Some(true));
            if (per_device && own != 1) || (!per_device && own != 0) {
                return fail(
                    "each device of a PerDevice pool sets exactly one of nodeName, nodeSelector and allNodes, and devices of other pools none",
                );
            }
        }
    }
    Ok(())
}

fn device(pool: &str, device: &Device) -> Result<(), ValidationError> {
    if !is_dns_label(&device.name) {
        return Err(ValidationError::DeviceName {
            pool: pool.into(),
            device: device.name.clone(),
        });
    }
    let attributes = device.attributes.iter().flatten();
    let capacity = device.capacity.iter().flatten();
    let count = attributes.clone().count() + capacity.clone().count();
    if count > MAX_ATTRIBUTES_AND_CAPACITIES {
        return Err(ValidationError::TooManyAttributes {
            pool: pool.into(),
            device: device.name.clone(),
            count,
        });
    }
    let names = attributes
        .clone()
        .map(|(n, _)| n)
        .chain(capacity.map(|(n, _)| n));
    if let Some(bad) = names.into_iter().find(|n| !is_qualified_name(n)) {
        return Err(ValidationError::AttributeName {
            pool: pool.into(),
            device: device.name.clone(),
            name: bad.clone(),
        });
    }
    for (name, value) in attributes {
        let values = usize::from(value.bool.is_some())
            + usize::from(value.int.is_some())
            + usize::from(value.string.is_some())
            + usize::from(value.version.is_some());
        if values != 1 {
            return Err(ValidationError::AttributeValue {
                pool: pool.into(),
                device: device.name.clone(),
                name: name.clone(),
            });
        }
    }
    Ok(())
}

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?`, at most 63 characters.
pub(crate) fn is_dns_label(s: &str) -> bool {
    let b = s.as_bytes();
    let alnum = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    !b.is_empty()
        && b.len() <= 63
        && b.first().is_some_and(alnum)
        && b.last().is_some_and(alnum)
        && b.iter().all(|c| alnum(c) || *c == b'-')
}

/// DNS labels joined by `.`, at most 253 characters.
pub(crate) fn is_dns_subdomain(s: &str) -> bool {
    s.len() <= 253 && s.split('.').all(is_dns_label)
}

/// An optional DNS subdomain and `/`, then a C identifier of at most 32
/// characters.
fn is_qualified_name(name: &str) -> bool {
    let (domain, id) = match name.split_once('/') {
        Some((d, i)) => (Some(d), i),
        None => (None, name),
    };
    domain.is_none_or(|d| d.len() <= 63 && is_dns_subdomain(d))
        && id.len() <= MAX_IDENTIFIER
        && id
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::Slice;
    use k8s_openapi::api::resource::v1::{DeviceAttribute, DeviceTaint};

    fn device(name: &str) -> Device {
        Device {
            name: name.into(),
            ..Device::default()
        }
    }

    fn pool(slices: Vec<Vec<Device>>) -> Pool {
        Pool {
            slices: slices
                .into_iter()
                .map(|devices| Slice {
                    devices,
                    ..Slice::default()
                })
                .collect(),
            ..Pool::default()
        }
    }

    fn check(p: &Pool) -> String {
        validate_pool("pool", p, true).map_or_else(|e| e.to_string(), |()| "ok".into())
    }

    #[test]
    fn server_limits() {
        assert_eq!(check(&pool(vec![vec![device("gpu-0")]])), "ok");
        assert!(check(&pool(vec![vec![device("GPU_0")]])).contains("not a DNS label"));
        let many: Vec<Device> = (0..129).map(|i| device(&format!("d{i}"))).collect();
        assert!(check(&pool(vec![many.clone()])).contains("129 devices, more than the 128"));
        let mut tainted: Vec<Device> = many[..65].to_vec();
        tainted[3].taints = Some(vec![DeviceTaint {
            key: "k".into(),
            effect: "NoSchedule".into(),
            ..DeviceTaint::default()
        }]);
        assert!(check(&pool(vec![tainted])).contains("65 devices, more than the 64"));
        let mut attrs = device("gpu-0");
        attrs.attributes = Some(
            [("9lives".to_string(), DeviceAttribute::default())]
                .into_iter()
                .collect(),
        );
        assert!(check(&pool(vec![vec![attrs.clone()]])).contains("not a qualified name"));
        attrs.attributes = Some(
            [("example.com/model".to_string(), DeviceAttribute::default())]
                .into_iter()
                .collect(),
        );
        assert!(check(&pool(vec![vec![attrs]])).contains("exactly one value"));
    }

    #[test]
    fn node_selection_fits_the_owner() {
        let p = pool(vec![vec![device("d")]]);
        assert!(validate_pool("pool", &p, false).is_err());
        let all = Pool {
            node_selection: NodeSelection::AllNodes,
            ..p.clone()
        };
        assert!(validate_pool("pool", &all, false).is_ok());
        assert!(validate_pool("pool", &all, true).is_err());
        assert!(validate_pool("a/b.c", &p, true).is_ok());
        assert!(validate_pool("a//b", &p, true).is_err());
    }
}
