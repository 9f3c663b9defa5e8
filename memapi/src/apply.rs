//! Server-side apply with field ownership, as the API server's field
//! manager does it for the fields memapi's clients apply.
//!
//! The applied object's fields become the manager's set (in
//! `metadata.managedFields`, operation `Apply`, `fieldsV1` as the API server
//! writes it, and the subresource applied to); fields the manager applied
//! before and leaves out now are removed unless another applier owns them;
//! the applied values are merged in. Lists are merged by key where
//! Kubernetes declares them maps (`resourceClaimStatuses`, `containers`,
//! `conditions`, ...), and replaced whole otherwise. A field another
//! applier owns with another value is a conflict (409) unless the request
//! forces, which takes the field over.
//!
//! Simplification: only appliers own fields. Updates and the other patch
//! types change the object without entering `managedFields`, so they never
//! conflict with an apply and an apply never removes what they wrote.

use std::collections::BTreeSet;

use serde_json::{Map, Value, json};

use super::object::now_rfc3339;
use super::status::ApiError;

/// A field's path in `fieldsV1` notation: `f:<field>`, `k:<key json>` for
/// an element of a keyed list, `.` for the element itself.
type Path = Vec<String>;

/// The key fields of the lists Kubernetes declares as maps
/// (`+listType=map`), by field name.
fn list_keys(field: &str) -> Option<&'static [&'static str]> {
    Some(match field {
        "resourceClaimStatuses"
        | "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "volumes"
        | "resourceClaims"
        | "env"
        | "containerStatuses"
        | "initContainerStatuses"
        | "ephemeralContainerStatuses"
        | "volumeMounts" => &["name"],
        "conditions" => &["type"],
        _ => return None,
    })
}

/// The `k:` segment of a keyed list's element (its key fields as JSON).
fn element_key(element: &Value, keys: &[&str]) -> Option<String> {
    let mut key = Map::new();
    for field in keys {
        key.insert((*field).to_string(), element.get(*field)?.clone());
    }
    Some(format!("k:{}", Value::Object(key)))
}

/// Fields an apply never owns: identity, which the URL and the server set.
fn ignored(path: &[String]) -> bool {
    matches!(
        path.iter()
            .map(String::as_str)
            .collect::<Vec<_>>()
            .as_slice(),
        ["f:apiVersion"]
            | ["f:kind"]
            | [
                "f:metadata",
                "f:name"
                    | "f:namespace"
                    | "f:uid"
                    | "f:resourceVersion"
                    | "f:managedFields"
                    | "f:creationTimestamp"
                    | "f:generation"
            ]
    )
}

/// The fields (leaf paths) of an applied object.
fn fields_of(value: &Value, prefix: &mut Path, out: &mut BTreeSet<Path>) {
    let Value::Object(map) = value else {
        return;
    };
    for (name, child) in map {
        if child.is_null() {
            continue;
        }
        prefix.push(format!("f:{name}"));
        if ignored(prefix) {
            prefix.pop();
            continue;
        }
        match (child, list_keys(name)) {
            (Value::Object(inner), _) if !inner.is_empty() => fields_of(child, prefix, out),
            (Value::Array(items), Some(keys)) => {
                for item in items {
                    if let Some(key) = element_key(item, keys) {
                        prefix.push(key);
                        prefix.push(".".to_string());
                        out.insert(prefix.clone());
                        prefix.pop();
                        fields_of(item, prefix, out);
                        prefix.pop();
                    }
                }
            }
            _ => {
                out.insert(prefix.clone());
            }
        }
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

/// The element of a keyed list `items` a `k:` segment names.
fn find_element(items: &[Value], segment: &str) -> Option<usize> {
    let key: Map<String, Value> = serde_json::from_str(segment.strip_prefix("k:")?).ok()?;
    items.iter().position(|item| {
        key.iter()
            .all(|(field, value)| item.get(field) == Some(value))
    })
}

/// The value at `path` in `doc` (for `.`: the element itself).
fn value_at<'a>(doc: &'a Value, path: &[String]) -> Option<&'a Value> {
    let mut current = doc;
    for segment in path {
        current = if let Some(field) = segment.strip_prefix("f:") {
            current.get(field)?
        } else if segment.starts_with("k:") {
            let items = current.as_array()?;
            &items[find_element(items, segment)?]
        } else {
            current
        };
    }
    Some(current)
}

/// Removes the field at `path` from `doc` (an element, for a path ending
/// in `.`); a field already gone is fine.
fn remove_at(doc: &mut Value, path: &[String]) {
    let (last, parent_path) = match path.split_last() {
        Some((last, rest)) if last == "." => match rest.split_last() {
            Some((element, list)) => (element, list),
            None => return,
        },
        Some((last, rest)) => (last, rest),
        None => return,
    };
    let mut current = doc;
    for segment in parent_path {
        let next = if let Some(field) = segment.strip_prefix("f:") {
            current.get_mut(field)
        } else {
            let at = current
                .as_array()
                .and_then(|items| find_element(items, segment));
            match (at, current.as_array_mut()) {
                (Some(at), Some(items)) => items.get_mut(at),
                _ => None,
            }
        };
        let Some(next) = next else {
            return;
        };
        current = next;
    }
    if let Some(field) = last.strip_prefix("f:") {
        if let Some(map) = current.as_object_mut() {
            map.remove(field);
        }
    } else if let Some(at) = current
        .as_array()
        .and_then(|items| find_element(items, last))
        && let Some(items) = current.as_array_mut()
    {
        items.remove(at);
    }
}

/// Merges `applied` into `doc`: maps field by field, keyed lists element
/// by element, anything else replaced.
fn merge(doc: &mut Value, applied: &Value, field: Option<&str>) {
    match (doc, applied) {
        (Value::Object(target), Value::Object(source)) => {
            for (name, value) in source {
                if value.is_null() {
                    continue;
                }
                match target.get_mut(name) {
                    Some(existing) => merge(existing, value, Some(name)),
                    None => {
                        target.insert(name.clone(), value.clone());
                    }
                }
            }
        }
        (Value::Array(target), Value::Array(source)) if field.and_then(list_keys).is_some() => {
            let keys = field.and_then(list_keys).unwrap_or_default();
            for item in source {
                let existing = element_key(item, keys)
                    .and_then(|key| find_element(target, &key))
                    .and_then(|at| target.get_mut(at));
                match existing {
                    Some(existing) => merge(existing, item, None),
                    None => target.push(item.clone()),
                }
            }
        }
        (target, source) => *target = source.clone(),
    }
}

/// One entry of `metadata.managedFields` as read: who, how, on what.
struct Entry {
    raw: Value,
    manager: String,
    apply: bool,
    subresource: String,
    fields: BTreeSet<Path>,
}

fn entries(doc: &Value) -> Vec<Entry> {
    doc.pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|raw| {
            let text = |key: &str| {
                raw.get(key)
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string()
            };
            let mut fields = BTreeSet::new();
            if let Some(v1) = raw.get("fieldsV1") {
                from_fields_v1(v1, &mut Vec::new(), &mut fields);
            }
            Entry {
                manager: text("manager"),
                apply: text("operation") == "Apply",
                subresource: text("subresource"),
                fields,
                raw: raw.clone(),
            }
        })
        .collect()
}

/// What one apply request names.
pub(crate) struct Request<'a> {
    /// `fieldManager`.
    pub(crate) manager: &'a str,
    /// `force`.
    pub(crate) force: bool,
    /// The subresource applied to ("" for the object itself).
    pub(crate) subresource: &'a str,
}

/// The object `stored` after `applied` (see the module documentation).
pub(crate) fn apply(
    stored: &Value,
    applied: &Value,
    request: &Request<'_>,
) -> Result<Value, ApiError> {
    let mut new_fields = BTreeSet::new();
    fields_of(applied, &mut Vec::new(), &mut new_fields);
    let mut all = entries(stored);
    let is_mine =
        |e: &Entry| e.apply && e.manager == request.manager && e.subresource == request.subresource;
    let mut conflicts = Vec::new();
    for other in all.iter_mut().filter(|e| e.apply && !is_mine(e)) {
        let contested: Vec<Path> = other
            .fields
            .intersection(&new_fields)
            .filter(|path| path.last().is_some_and(|s| s != "."))
            .filter(|path| value_at(stored, path) != value_at(applied, path))
            .cloned()
            .collect();
        if contested.is_empty() {
            continue;
        }
        if request.force {
            for path in &contested {
                other.fields.remove(path);
            }
        } else {
            conflicts.extend(
                contested
                    .iter()
                    .map(|path| format!("conflict with {:?}: {}", other.manager, path.join("."))),
            );
        }
    }
    if !conflicts.is_empty() {
        return Err(ApiError::from_code(
            409,
            format!(
                "Apply failed with {} conflict{}: {}",
                conflicts.len(),
                if conflicts.len() == 1 { "" } else { "s" },
                conflicts.join("; ")
            ),
        ));
    }
    let previous = all
        .iter()
        .find(|e| is_mine(e))
        .map(|e| e.fields.clone())
        .unwrap_or_default();
    let owned_by_others: BTreeSet<&Path> = all
        .iter()
        .filter(|e| e.apply && !is_mine(e))
        .flat_map(|e| e.fields.iter())
        .collect();
    let mut doc = stored.clone();
    let mut dropped: Vec<&Path> = previous
        .difference(&new_fields)
        .filter(|path| !owned_by_others.contains(path))
        .collect();
    // Deepest first, so an element goes after its fields.
    dropped.sort_by_key(|path| std::cmp::Reverse(path.len()));
    for path in dropped {
        remove_at(&mut doc, path);
    }
    merge(&mut doc, applied, None);
    let api_version = applied.get("apiVersion").cloned().unwrap_or(Value::Null);
    let mut managed: Vec<Value> = all
        .into_iter()
        .filter(|e| !is_mine(e))
        .filter(|e| !e.apply || !e.fields.is_empty())
        .map(|e| {
            let mut raw = e.raw;
            if e.apply {
                raw["fieldsV1"] = to_fields_v1(&e.fields);
            }
            raw
        })
        .collect();
    if !new_fields.is_empty() {
        let mut entry = json!({
            "manager": request.manager,
            "operation": "Apply",
            "apiVersion": api_version,
            "time": now_rfc3339(),
            "fieldsType": "FieldsV1",
            "fieldsV1": to_fields_v1(&new_fields),
        });
        if !request.subresource.is_empty() {
            entry["subresource"] = json!(request.subresource);
        }
        managed.push(entry);
    }
    if let Some(metadata) = doc.get_mut("metadata").and_then(Value::as_object_mut) {
        metadata.insert("managedFields".to_string(), Value::Array(managed));
    }
    Ok(doc)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod_status(entries: &[(&str, &str)]) -> Value {
        let statuses: Vec<Value> = entries
            .iter()
            .map(|(name, claim)| json!({ "name": name, "resourceClaimName": claim }))
            .collect();
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": { "name": "p" },
            "status": { "resourceClaimStatuses": statuses },
        })
    }

    fn mine() -> Request<'static> {
        Request {
            manager: "me",
            force: true,
            subresource: "status",
        }
    }

    fn recorded(doc: &Value) -> Vec<String> {
        doc.pointer("/status/resourceClaimStatuses")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|s| s["name"].as_str().map(str::to_string))
            .collect()
    }

    #[test]
    fn entries_left_out_of_the_next_apply_are_removed() {
        let stored = json!({ "apiVersion": "v1", "kind": "Pod", "metadata": { "name": "p" }, "status": { "phase": "Pending" } });
        let first = apply(&stored, &pod_status(&[("a", "ca")]), &mine()).unwrap();
        assert_eq!(recorded(&first), ["a"]);
        assert_eq!(first["status"]["phase"], "Pending", "other fields stay");
        let both = apply(&first, &pod_status(&[("a", "ca"), ("b", "cb")]), &mine()).unwrap();
        assert_eq!(recorded(&both), ["a", "b"]);
        let only_b = apply(&both, &pod_status(&[("b", "cb")]), &mine()).unwrap();
        assert_eq!(
            recorded(&only_b),
            ["b"],
            "a was this manager's and is left out"
        );
        let managed = only_b["metadata"]["managedFields"].as_array().unwrap();
        assert_eq!(managed.len(), 1);
        assert_eq!(managed[0]["manager"], "me");
        assert_eq!(managed[0]["subresource"], "status");
        assert!(
            managed[0]["fieldsV1"]["f:status"]["f:resourceClaimStatuses"]
                .get("k:{\"name\":\"b\"}")
                .is_some(),
            "{managed:?}"
        );
    }

    #[test]
    fn entries_of_others_stay_and_conflicts_need_force() {
        let stored = json!({ "apiVersion": "v1", "kind": "Pod", "metadata": { "name": "p" } });
        let theirs = Request {
            manager: "them",
            force: false,
            subresource: "status",
        };
        let doc = apply(&stored, &pod_status(&[("a", "ca")]), &theirs).unwrap();
        let doc = apply(&doc, &pod_status(&[("b", "cb")]), &mine()).unwrap();
        assert_eq!(recorded(&doc), ["a", "b"]);
        let refused = Request {
            force: false,
            ..mine()
        };
        let conflict = apply(&doc, &pod_status(&[("a", "other")]), &refused).unwrap_err();
        assert_eq!(conflict.code, 409);
        let forced = apply(&doc, &pod_status(&[("a", "other")]), &mine()).unwrap();
        assert_eq!(
            forced["status"]["resourceClaimStatuses"][0]["resourceClaimName"],
            "other"
        );
    }
}
