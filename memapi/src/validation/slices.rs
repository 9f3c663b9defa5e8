//! ResourceSlice validation of resource.k8s.io/v1 (Kubernetes 1.34,
//! `ValidateResourceSlice` and `ValidateResourceSliceUpdate`), for the
//! rules a DRA driver's publisher runs into:
//!
//! - `spec.driver` (a DNS subdomain of at most 63 characters) and
//!   `spec.pool.name` are required; the pool's generation is not negative
//!   and its `resourceSliceCount` is positive;
//! - exactly one of `nodeName`, `nodeSelector`, `allNodes: true` and
//!   `perDeviceNodeSelection: true` is set; with per-device node
//!   selection every device sets exactly one of its own, without it none;
//! - at most 128 devices, or 64 when a device has taints or consumes
//!   counters; `devices` and `sharedCounters` are never both set;
//! - device names are DNS labels, unique in the slice; a device has at
//!   most 32 attributes and capacities together, their names are
//!   qualified names (an optional DNS-subdomain domain and `/`, then a C
//!   identifier of at most 32 characters) and an attribute has exactly one
//!   value; a taint's effect is `NoSchedule`, `NoExecute` or `None`;
//! - on update, `spec.driver`, `spec.pool.name` and `spec.nodeName` are
//!   immutable.

use super::super::object::{str_at, value_at};
use super::FieldError;
use super::names;
use serde_json::{Map, Value};
use std::collections::BTreeSet;

/// The most devices one slice may hold.
const MAX_DEVICES: usize = 128;
/// The most devices one slice may hold when one of them has taints or
/// consumes counters.
const MAX_DEVICES_WITH_TAINTS_OR_COUNTERS: usize = 64;
/// The most attributes and capacities of one device, together.
const MAX_ATTRIBUTES_AND_CAPACITIES: usize = 32;
/// The longest C identifier of an attribute or capacity name.
const MAX_IDENTIFIER: usize = 32;
/// The longest driver name.
const MAX_DRIVER: usize = 63;

/// `ValidateResourceSlice`: the rules of the module documentation.
pub(crate) fn validate(obj: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let driver = str_at(obj, "spec.driver").unwrap_or_default();
    if driver.is_empty() {
        errs.push(FieldError::required("spec.driver", ""));
    } else {
        for msg in names::dns1123_subdomain(driver) {
            errs.push(FieldError::invalid("spec.driver", driver, &msg));
        }
        if driver.len() > MAX_DRIVER {
            errs.push(FieldError::too_long("spec.driver", MAX_DRIVER));
        }
    }
    errs.extend(pool(obj));
    errs.extend(node_selection(obj));
    let devices = array(obj, "spec.devices");
    let counters = array(obj, "spec.sharedCounters");
    if !devices.is_empty() && !counters.is_empty() {
        errs.push(FieldError::forbidden(
            "spec.sharedCounters",
            "may not be set together with devices",
        ));
    }
    let limited = devices
        .iter()
        .any(|d| !array(d, "taints").is_empty() || !array(d, "consumesCounters").is_empty());
    let max = if limited {
        MAX_DEVICES_WITH_TAINTS_OR_COUNTERS
    } else {
        MAX_DEVICES
    };
    if devices.len() > max {
        errs.push(FieldError::too_many("spec.devices", devices.len(), max));
    }
    let per_device =
        value_at(obj, "spec.perDeviceNodeSelection").and_then(Value::as_bool) == Some(true);
    let mut seen = BTreeSet::new();
    for (i, device) in devices.iter().enumerate() {
        let path = format!("spec.devices[{i}]");
        let name = str_at(device, "name").unwrap_or_default();
        if !seen.insert(name) {
            errs.push(FieldError::duplicate(&format!("{path}.name"), name));
        }
        errs.extend(self::device(device, &path, per_device));
    }
    errs
}

/// `ValidateResourceSliceUpdate`: the object rules, and the immutable fields.
pub(crate) fn validate_update(new: &Value, old: &Value) -> Vec<FieldError> {
    let mut errs = validate(new);
    for path in ["spec.driver", "spec.pool.name", "spec.nodeName"] {
        if value_at(new, path) != value_at(old, path) {
            let value = value_at(new, path).cloned().unwrap_or(Value::Null);
            errs.push(FieldError::invalid(path, value, "field is immutable"));
        }
    }
    errs
}

/// The array at `path`, or none.
fn array<'a>(obj: &'a Value, path: &str) -> &'a [Value] {
    value_at(obj, path)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// The object at `path`, if any.
fn map<'a>(obj: &'a Value, path: &str) -> Option<&'a Map<String, Value>> {
    value_at(obj, path).and_then(Value::as_object)
}

fn pool(obj: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let name = str_at(obj, "spec.pool.name").unwrap_or_default();
    if name.is_empty() {
        errs.push(FieldError::required("spec.pool.name", ""));
    } else {
        for part in name.split('/') {
            for msg in names::dns1123_subdomain(part) {
                errs.push(FieldError::invalid("spec.pool.name", name, &msg));
            }
        }
    }
    let generation = value_at(obj, "spec.pool.generation")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    if generation < 0 {
        errs.push(FieldError::invalid(
            "spec.pool.generation",
            generation,
            "must be greater than or equal to 0",
        ));
    }
    let count = value_at(obj, "spec.pool.resourceSliceCount")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    if count <= 0 {
        errs.push(FieldError::invalid(
            "spec.pool.resourceSliceCount",
            count,
            "must be greater than zero",
        ));
    }
    errs
}

/// How many of the node-selection fields of `obj` (a slice's spec or a
/// device) are set, among `fields` (each a path and whether it holds a flag).
fn selections(obj: &Value, fields: &[(&str, bool)]) -> usize {
    fields
        .iter()
        .filter(|(path, flag)| match value_at(obj, path) {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => *b || !flag,
            Some(Value::String(s)) => !s.is_empty(),
            Some(_) => true,
        })
        .count()
}

fn node_selection(obj: &Value) -> Vec<FieldError> {
    let set = selections(
        obj,
        &[
            ("spec.nodeName", false),
            ("spec.nodeSelector", false),
            ("spec.allNodes", true),
            ("spec.perDeviceNodeSelection", true),
        ],
    );
    let mut errs = Vec::new();
    if set != 1 {
        errs.push(FieldError::invalid(
            "spec",
            Value::Null,
            "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required",
        ));
    }
    if let Some(node) = str_at(obj, "spec.nodeName").filter(|n| !n.is_empty()) {
        for msg in names::dns1123_subdomain(node) {
            errs.push(FieldError::invalid("spec.nodeName", node, &msg));
        }
    }
    errs
}

fn device(device: &Value, path: &str, per_device: bool) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let name = str_at(device, "name").unwrap_or_default();
    if name.is_empty() {
        errs.push(FieldError::required(&format!("{path}.name"), ""));
    } else {
        for msg in names::dns1123_label(name) {
            errs.push(FieldError::invalid(&format!("{path}.name"), name, &msg));
        }
    }
    let attributes = map(device, "attributes");
    let capacity = map(device, "capacity");
    let total = attributes.map_or(0, Map::len) + capacity.map_or(0, Map::len);
    if total > MAX_ATTRIBUTES_AND_CAPACITIES {
        errs.push(FieldError::too_many(
            path,
            total,
            MAX_ATTRIBUTES_AND_CAPACITIES,
        ));
    }
    for (key, value) in attributes.into_iter().flatten() {
        let field = format!("{path}.attributes[{key}]");
        errs.extend(qualified_name(&field, key));
        let values = ["bool", "int", "string", "version"]
            .iter()
            .filter(|k| value.get(**k).is_some_and(|v| !v.is_null()))
            .count();
        if values != 1 {
            errs.push(FieldError::invalid(
                &field,
                Value::Null,
                "exactly one value must be specified",
            ));
        }
    }
    for key in capacity.into_iter().flatten().map(|(k, _)| k) {
        errs.extend(qualified_name(&format!("{path}.capacity[{key}]"), key));
    }
    for (t, taint) in array(device, "taints").iter().enumerate() {
        let effect = str_at(taint, "effect").unwrap_or_default();
        if !matches!(effect, "NoSchedule" | "NoExecute" | "None") {
            errs.push(FieldError::invalid(
                &format!("{path}.taints[{t}].effect"),
                effect,
                "supported values: \"NoExecute\", \"NoSchedule\", \"None\"",
            ));
        }
    }
    let own = selections(
        device,
        &[
            ("nodeName", false),
            ("nodeSelector", false),
            ("allNodes", true),
        ],
    );
    match (per_device, own) {
        (true, 1) | (false, 0) => {}
        (true, _) => errs.push(FieldError::invalid(
            path,
            Value::Null,
            "exactly one of `nodeName`, `nodeSelector`, `allNodes` is required when `perDeviceNodeSelection` is set",
        )),
        (false, _) => errs.push(FieldError::forbidden(
            path,
            "`nodeName`, `nodeSelector` and `allNodes` may only be set when `perDeviceNodeSelection` is set",
        )),
    }
    errs
}

/// A qualified attribute or capacity name: an optional DNS-subdomain
/// domain and `/`, then a C identifier of at most 32 characters.
fn qualified_name(field: &str, name: &str) -> Vec<FieldError> {
    let (domain, id) = match name.split_once('/') {
        Some((d, i)) => (Some(d), i),
        None => (None, name),
    };
    let mut errs = Vec::new();
    if let Some(domain) = domain {
        for msg in names::dns1123_subdomain(domain) {
            errs.push(FieldError::invalid(field, name, &msg));
        }
    }
    let c_identifier = id
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !c_identifier {
        errs.push(FieldError::invalid(
            field,
            name,
            "a valid C identifier must start with alphabetic character or '_', followed by a string of alphanumeric characters or '_'",
        ));
    }
    if id.len() > MAX_IDENTIFIER {
        errs.push(FieldError::too_long(field, MAX_IDENTIFIER));
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn slice(spec: Value) -> Value {
        let mut obj = json!({ "metadata": { "name": "s" } });
        obj["spec"] = spec;
        obj
    }

    fn fields(errs: &[FieldError]) -> Vec<String> {
        errs.iter().map(|e| e.field.clone()).collect()
    }

    fn base() -> Value {
        json!({
            "driver": "gpu.example.com", "nodeName": "node-1",
            "pool": { "name": "node-1", "generation": 1, "resourceSliceCount": 1 },
            "devices": [{ "name": "gpu-0",
                "attributes": { "model": { "string": "a100" }, "example.com/index": { "int": 0 } },
                "capacity": { "memory": { "value": "40Gi" } } }],
        })
    }

    #[test]
    fn a_valid_slice_passes() {
        assert!(validate(&slice(base())).is_empty());
    }

    #[test]
    fn node_selection_is_exactly_one() {
        let mut none = base();
        none["nodeName"] = Value::Null;
        assert_eq!(fields(&validate(&slice(none))), ["spec"]);
        let mut two = base();
        two["allNodes"] = json!(true);
        assert_eq!(fields(&validate(&slice(two))), ["spec"]);
        let mut off = base();
        off["allNodes"] = json!(false);
        assert!(validate(&slice(off)).is_empty(), "allNodes: false is unset");
    }

    #[test]
    fn device_limits() {
        let device = |i: usize| json!({ "name": format!("d-{i}") });
        let mut many = base();
        many["devices"] = Value::Array((0..129).map(device).collect());
        assert_eq!(fields(&validate(&slice(many.clone()))), ["spec.devices"]);
        many["devices"] = Value::Array((0..128).map(device).collect());
        assert!(validate(&slice(many.clone())).is_empty());
        many["devices"][0]["taints"] = json!([{ "key": "k", "effect": "NoSchedule" }]);
        assert_eq!(fields(&validate(&slice(many))), ["spec.devices"]);

        let mut attrs = base();
        let names: Map<String, Value> = (0..33)
            .map(|i| (format!("a{i}"), json!({ "bool": true })))
            .collect();
        attrs["devices"][0]["attributes"] = Value::Object(names);
        attrs["devices"][0]["capacity"] = json!({});
        assert_eq!(fields(&validate(&slice(attrs))), ["spec.devices[0]"]);
    }

    #[test]
    fn names_and_values() {
        let mut bad = base();
        bad["devices"] = json!([
            { "name": "GPU_0", "attributes": { "9lives": { "int": 1 }, "x": {} } },
            { "name": "gpu-1" }, { "name": "gpu-1" },
        ]);
        assert_eq!(
            fields(&validate(&slice(bad))),
            [
                "spec.devices[0].name",
                "spec.devices[0].attributes[9lives]",
                "spec.devices[0].attributes[x]",
                "spec.devices[2].name",
            ]
        );
    }

    #[test]
    fn devices_and_counters_apart() {
        let mut both = base();
        both["sharedCounters"] = json!([{ "name": "c", "counters": { "mem": { "value": "1" } } }]);
        assert_eq!(fields(&validate(&slice(both))), ["spec.sharedCounters"]);
    }

    #[test]
    fn per_device_node_selection() {
        let mut per = base();
        per["nodeName"] = Value::Null;
        per["perDeviceNodeSelection"] = json!(true);
        assert_eq!(fields(&validate(&slice(per.clone()))), ["spec.devices[0]"]);
        per["devices"][0]["nodeName"] = json!("node-1");
        assert!(validate(&slice(per)).is_empty());
        let mut own = base();
        own["devices"][0]["allNodes"] = json!(true);
        assert_eq!(fields(&validate(&slice(own))), ["spec.devices[0]"]);
    }

    #[test]
    fn identity_is_immutable() {
        let old = slice(base());
        let mut spec = base();
        spec["driver"] = json!("other.example.com");
        spec["pool"]["name"] = json!("p2");
        spec["pool"]["generation"] = json!(2);
        assert_eq!(
            fields(&validate_update(&slice(spec), &old)),
            ["spec.driver", "spec.pool.name"]
        );
    }
}
