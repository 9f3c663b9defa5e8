//! `metadata.managedFields` entries of operation `Update`, as the API
//! server's field manager keeps them for creates, updates and the patches
//! that are not server-side apply: the writer (the request's
//! `fieldManager`, else the first word of its `User-Agent`, as the API
//! server names it) owns the fields its write set or changed, no other
//! writer's `Update` entry keeps them, and its entry's `time` is the
//! write's. So a reader can tell who last changed a field, and when.
//!
//! Simplification (see `apply.rs`): `Update` entries and `Apply` entries
//! do not take fields from each other.

use std::collections::BTreeSet;

use serde_json::{Map, Value, json};

use super::object::now_rfc3339;

/// A field's path in `fieldsV1` notation (`f:<field>`); lists are owned
/// whole.
type Path = Vec<String>;

/// Fields no writer owns: identity and bookkeeping the server keeps.
fn ignored(path: &[String]) -> bool {
    matches!(
        path.iter()
            .map(String::as_str)
            .collect::<Vec<_>>()
            .as_slice(),
        ["f:apiVersion" | "f:kind"]
            | [
                "f:metadata",
                "f:name"
                    | "f:namespace"
                    | "f:uid"
                    | "f:resourceVersion"
                    | "f:managedFields"
                    | "f:creationTimestamp"
                    | "f:generation"
                    | "f:selfLink"
            ]
    )
}

/// The leaf paths where `old` and `new` differ (set, changed or removed),
/// and the leaf paths of `new` among them.
fn changed(old: Option<&Value>, new: Option<&Value>, prefix: &mut Path, out: &mut Vec<Path>) {
    if old == new {
        return;
    }
    match (old, new) {
        (Some(Value::Object(before)), Some(Value::Object(after)))
            if !before.is_empty() || !after.is_empty() =>
        {
            let names: BTreeSet<&String> = before.keys().chain(after.keys()).collect();
            for name in names {
                prefix.push(format!("f:{name}"));
                if !ignored(prefix) {
                    changed(before.get(name), after.get(name), prefix, out);
                }
                prefix.pop();
            }
        }
        (None, Some(Value::Object(after))) if !after.is_empty() => {
            for (name, child) in after {
                prefix.push(format!("f:{name}"));
                if !ignored(prefix) {
                    changed(None, Some(child), prefix, out);
                }
                prefix.pop();
            }
        }
        (_, Some(Value::Null) | None) | (Some(Value::Object(_)), Some(_)) => {
            if !prefix.is_empty() {
                // A removed field (or a map made a value): whatever was
                // owned under it goes.
                out.push(prefix.clone());
            }
        }
        _ => {
            if !prefix.is_empty() {
                out.push(prefix.clone());
            }
        }
    }
}

/// The leaf paths of a `fieldsV1` tree.
fn from_fields_v1(value: &Value, prefix: &mut Path, out: &mut BTreeSet<Path>) {
    let Value::Object(map) = value else {
        return;
    };
    if map.is_empty() && !prefix.is_empty() {
        out.insert(prefix.clone());
    }
    for (segment, child) in map {
        prefix.push(segment.clone());
        from_fields_v1(child, prefix, out);
        prefix.pop();
    }
}

/// A field set as `fieldsV1`.
fn to_fields_v1(set: &BTreeSet<Path>) -> Value {
    let mut root = Map::new();
    for path in set {
        let mut node = &mut root;
        for segment in path {
            let next = node
                .entry(segment.clone())
                .or_insert_with(|| Value::Object(Map::new()));
            let Value::Object(map) = next else {
                break;
            };
            node = map;
        }
    }
    Value::Object(root)
}

/// Whether `path` is `at` or under it.
fn within(path: &[String], at: &[String]) -> bool {
    path.starts_with(at)
}

/// Whether `doc` has a value at `path`.
fn present(doc: &Value, path: &[String]) -> bool {
    let mut current = doc;
    for segment in path {
        let Some(next) = segment
            .strip_prefix("f:")
            .and_then(|field| current.get(field))
        else {
            return false;
        };
        current = next;
    }
    !current.is_null()
}

/// Records that `manager` wrote `new` over `old` (`None`: created it) on
/// `subresource` (`""` for the object itself): the write's `Update`
/// entry in `new`'s managedFields. A write that changes nothing changes
/// no entry; managedFields the writer sent itself are kept as sent.
pub(crate) fn record_update(
    old: Option<&Value>,
    new: &mut Value,
    manager: &str,
    subresource: &str,
) {
    let sent_own = match old {
        Some(old) => {
            new.pointer("/metadata/managedFields") != old.pointer("/metadata/managedFields")
        }
        None => new
            .pointer("/metadata/managedFields")
            .and_then(Value::as_array)
            .is_some_and(|entries| !entries.is_empty()),
    };
    if sent_own {
        return;
    }
    let mut paths = Vec::new();
    changed(old, Some(new), &mut Vec::new(), &mut paths);
    if paths.is_empty() {
        return;
    }
    let api_version = new.get("apiVersion").cloned().unwrap_or(Value::Null);
    let entries: Vec<Value> = new
        .pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let is_mine = |entry: &Value| {
        entry["operation"] == "Update"
            && entry["manager"] == manager
            && entry["subresource"].as_str().unwrap_or("") == subresource
    };
    let mut mine = BTreeSet::new();
    let mut kept = Vec::new();
    for mut entry in entries {
        let mut fields = BTreeSet::new();
        from_fields_v1(&entry["fieldsV1"], &mut Vec::new(), &mut fields);
        if is_mine(&entry) {
            mine = fields;
            continue;
        }
        if entry["operation"] != "Update" {
            kept.push(entry);
            continue;
        }
        let before = fields.len();
        fields.retain(|field| !paths.iter().any(|path| within(field, path)));
        if fields.is_empty() {
            continue;
        }
        if fields.len() != before {
            entry["fieldsV1"] = to_fields_v1(&fields);
        }
        kept.push(entry);
    }
    mine.retain(|field| present(new, field));
    mine.extend(paths.into_iter().filter(|path| present(new, path)));
    if !mine.is_empty() {
        let mut entry = json!({
            "manager": manager,
            "operation": "Update",
            "apiVersion": api_version,
            "time": now_rfc3339(),
            "fieldsType": "FieldsV1",
            "fieldsV1": to_fields_v1(&mine),
        });
        if !subresource.is_empty() {
            entry["subresource"] = json!(subresource);
        }
        kept.push(entry);
    }
    if let Some(metadata) = new.get_mut("metadata").and_then(Value::as_object_mut) {
        if kept.is_empty() {
            metadata.remove("managedFields");
        } else {
            metadata.insert("managedFields".to_string(), Value::Array(kept));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owners(doc: &Value) -> Vec<(String, Vec<String>)> {
        doc["metadata"]["managedFields"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|entry| {
                let mut fields = BTreeSet::new();
                from_fields_v1(&entry["fieldsV1"], &mut Vec::new(), &mut fields);
                (
                    entry["manager"].as_str().unwrap().to_string(),
                    fields.into_iter().map(|path| path.join(".")).collect(),
                )
            })
            .collect()
    }

    #[test]
    fn each_writer_owns_what_it_last_changed() {
        let created = json!({
            "apiVersion": "v1", "kind": "PersistentVolume",
            "metadata": {"name": "pv", "uid": "u", "resourceVersion": "1"},
            "spec": {"capacity": {"storage": "1Gi"}},
            "status": {"phase": "Pending"},
        });
        let mut doc = created.clone();
        record_update(None, &mut doc, "provisioner", "");
        assert_eq!(
            owners(&doc),
            [(
                "provisioner".to_string(),
                vec![
                    "f:spec.f:capacity.f:storage".to_string(),
                    "f:status.f:phase".to_string()
                ]
            )]
        );
        let before = doc.clone();
        doc["status"]["phase"] = json!("Available");
        doc["metadata"]["resourceVersion"] = json!("2");
        record_update(Some(&before), &mut doc, "kube-controller-manager", "status");
        assert_eq!(
            owners(&doc),
            [
                (
                    "provisioner".to_string(),
                    vec!["f:spec.f:capacity.f:storage".to_string()]
                ),
                (
                    "kube-controller-manager".to_string(),
                    vec!["f:status.f:phase".to_string()]
                )
            ]
        );
        let entry = &doc["metadata"]["managedFields"][1];
        assert_eq!(entry["operation"], "Update");
        assert_eq!(entry["subresource"], "status");
        assert!(entry["time"].as_str().unwrap().ends_with('Z'));
        // A write that changes nothing leaves the entries as they are.
        let unchanged = doc.clone();
        record_update(Some(&unchanged), &mut doc, "someone", "");
        assert_eq!(doc, unchanged);
        // A removed field is owned by no one.
        let before = doc.clone();
        doc["spec"].as_object_mut().unwrap().remove("capacity");
        record_update(Some(&before), &mut doc, "editor", "");
        assert_eq!(
            owners(&doc),
            [(
                "kube-controller-manager".to_string(),
                vec!["f:status.f:phase".to_string()]
            )]
        );
    }
}
