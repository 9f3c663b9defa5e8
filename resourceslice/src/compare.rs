//! Semantic comparison of slice contents, as upstream's
//! `apiequality.Semantic.DeepEqual` with its device-taint rule:
//! quantities compare as numbers (`1Gi` equals `1073741824`), an absent
//! list or map equals an empty one, and a taint the driver gave without
//! `timeAdded` equals the same taint with the time the server stamped on
//! it (the time is then kept, see [`copy_taint_times`]); taint times
//! compare to the second.

use k8s_openapi::api::resource::v1::{CounterSet, Device, DeviceTaint};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::{RoundMode, TimestampRound, Unit};
use quantity::Amount;
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;

/// Whether two device lists say the same, once the taint times of
/// `current` are copied into `desired` where it has none.
pub(crate) fn devices_equal(current: &[Device], desired: &[Device]) -> bool {
    let desired = copy_taint_times(current, desired);
    canonical_devices(current) == canonical_devices(&desired)
}

/// Whether two lists of counter sets say the same.
pub(crate) fn counters_equal(a: &[CounterSet], b: &[CounterSet]) -> bool {
    canonical_counters(a) == canonical_counters(b)
}

/// Whether two values say the same once empty lists and maps are dropped.
pub(crate) fn same<T: Serialize>(a: &T, b: &T) -> bool {
    canonical(a) == canonical(b)
}

/// `to`, with the `timeAdded` of every taint that has none taken from the
/// same taint (key, value, effect) of the device of the same name in
/// `from`: the server stamps the time on create, and an update must keep
/// it rather than have the server stamp a new one.
pub(crate) fn copy_taint_times(from: &[Device], to: &[Device]) -> Vec<Device> {
    let mut out = to.to_vec();
    for device in &mut out {
        let Some(old) = from.iter().find(|d| d.name == device.name) else {
            continue;
        };
        let old_taints = old.taints.as_deref().unwrap_or_default();
        for taint in device.taints.iter_mut().flatten() {
            if taint.time_added.is_some() {
                continue;
            }
            taint.time_added = old_taints
                .iter()
                .find(|t| same_taint(t, taint))
                .and_then(|t| t.time_added.clone());
        }
    }
    out
}

fn same_taint(a: &DeviceTaint, b: &DeviceTaint) -> bool {
    a.key == b.key && a.value == b.value && a.effect == b.effect
}

/// Rounds taint times to the second: all the API stores.
pub(crate) fn round_taint_times(devices: &mut [Device]) {
    for taint in devices
        .iter_mut()
        .flat_map(|d| d.taints.iter_mut().flatten())
    {
        if let Some(time) = &mut taint.time_added {
            *time = round_time(time);
        }
    }
}

fn round_time(time: &Time) -> Time {
    let rounding = TimestampRound::new()
        .smallest(Unit::Second)
        .mode(RoundMode::HalfExpand);
    Time(time.0.round(rounding).unwrap_or(time.0))
}

/// A quantity in canonical form: its exact amount in nano-units, or the
/// string as given when it does not parse.
fn canonical_quantity(q: &mut Quantity) {
    if let Ok(amount) = Amount::from_quantity(q) {
        q.0 = amount.nanos().to_string();
    }
}

fn canonical_counter_map(counters: &mut BTreeMap<String, k8s_openapi::api::resource::v1::Counter>) {
    for counter in counters.values_mut() {
        canonical_quantity(&mut counter.value);
    }
}

fn canonical_devices(devices: &[Device]) -> Value {
    let mut devices = devices.to_vec();
    round_taint_times(&mut devices);
    for device in &mut devices {
        for capacity in device.capacity.iter_mut().flat_map(BTreeMap::values_mut) {
            canonical_quantity(&mut capacity.value);
            if let Some(policy) = &mut capacity.request_policy {
                policy.default.iter_mut().for_each(canonical_quantity);
                policy
                    .valid_values
                    .iter_mut()
                    .flatten()
                    .for_each(canonical_quantity);
                if let Some(range) = &mut policy.valid_range {
                    canonical_quantity(&mut range.min);
                    range.max.iter_mut().for_each(canonical_quantity);
                    range.step.iter_mut().for_each(canonical_quantity);
                }
            }
        }
        for consumption in device.consumes_counters.iter_mut().flatten() {
            canonical_counter_map(&mut consumption.counters);
        }
    }
    canonical(&devices)
}

fn canonical_counters(sets: &[CounterSet]) -> Value {
    let mut sets = sets.to_vec();
    for set in &mut sets {
        canonical_counter_map(&mut set.counters);
    }
    canonical(&sets)
}

/// The JSON form without nulls, empty lists and empty maps.
fn canonical<T: Serialize>(value: &T) -> Value {
    let mut v = serde_json::to_value(value).unwrap_or(Value::Null);
    strip_empty(&mut v);
    v
}

fn strip_empty(v: &mut Value) {
    match v {
        Value::Object(map) => {
            map.values_mut().for_each(strip_empty);
            map.retain(|_, v| !is_empty(v));
        }
        Value::Array(items) => items.iter_mut().for_each(strip_empty),
        _ => {}
    }
}

fn is_empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::resource::v1::DeviceCapacity;
    use k8s_openapi::jiff::Timestamp;

    fn device(name: &str, memory: &str) -> Device {
        Device {
            name: name.into(),
            capacity: Some(
                [(
                    "memory".to_string(),
                    DeviceCapacity {
                        value: Quantity(memory.into()),
                        request_policy: None,
                    },
                )]
                .into(),
            ),
            attributes: Some(BTreeMap::new()),
            ..Device::default()
        }
    }

    fn taint(key: &str, time: Option<&str>) -> DeviceTaint {
        DeviceTaint {
            key: key.into(),
            effect: "NoSchedule".into(),
            time_added: time.map(|t| Time(t.parse::<Timestamp>().unwrap())),
            value: None,
        }
    }

    #[test]
    fn quantities_compare_as_numbers_and_empty_is_absent() {
        let mut plain = device("d", "1073741824");
        plain.attributes = None;
        assert!(devices_equal(&[device("d", "1Gi")], &[plain]));
        assert!(!devices_equal(&[device("d", "1Gi")], &[device("d", "1G")]));
    }

    #[test]
    fn a_taint_without_time_takes_the_stored_time() {
        let mut stored = device("d", "1");
        stored.taints = Some(vec![taint("a", Some("2025-01-01T00:00:00Z"))]);
        let mut desired = device("d", "1");
        desired.taints = Some(vec![taint("a", None)]);
        assert!(devices_equal(&[stored.clone()], &[desired.clone()]));
        let copied = copy_taint_times(&[stored.clone()], &[desired.clone()]);
        assert_eq!(copied[0].taints, stored.taints);
        desired.taints = Some(vec![taint("a", Some("2025-01-01T00:00:00.400Z"))]);
        assert!(devices_equal(&[stored.clone()], &[desired.clone()]));
        desired.taints = Some(vec![taint("a", Some("2025-01-01T00:01:00Z"))]);
        assert!(!devices_equal(&[stored.clone()], &[desired]));
        let mut other = device("d", "1");
        other.taints = Some(vec![taint("b", None)]);
        assert!(!devices_equal(&[stored], &[other]));
    }
}
