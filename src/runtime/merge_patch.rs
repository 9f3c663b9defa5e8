//! The JSON merge patch (RFC 7386) that turns one copy of an object into
//! another: what the write door sends instead of the whole object.
//!
//! The copies an update is decided on are decoded by compiled types, which
//! know only the fields of the API version they were generated for. A
//! newer API server serves fields those types drop; sending the decoded
//! object back whole would erase them on the server. A merge patch of the
//! difference names only what the edit changed: every field the patch does
//! not name, known to the types or not, stays as the server holds it.
//!
//! Merge patches replace lists whole, so a list the edit changed is sent as
//! the compiled types know it (its elements' unknown fields are the one
//! thing a write can still lose: none of the lists the controllers edit,
//! finalizers and a ResourceClaim's reservations, has any today).

use serde_json::{Map, Value};

/// The merge patch that makes `before` into `after`: keys whose values
/// differ, recursively for objects, with `null` for a key `after` lacks.
/// `None` when the two are equal.
pub(crate) fn diff(before: &Value, after: &Value) -> Option<Value> {
    match (before, after) {
        (Value::Object(before), Value::Object(after)) => {
            let mut patch = Map::new();
            for (key, old) in before {
                match after.get(key) {
                    None => {
                        patch.insert(key.clone(), Value::Null);
                    }
                    Some(new) => {
                        if let Some(change) = diff(old, new) {
                            patch.insert(key.clone(), change);
                        }
                    }
                }
            }
            for (key, new) in after {
                if !before.contains_key(key) && !new.is_null() {
                    patch.insert(key.clone(), without_nulls(new));
                }
            }
            (!patch.is_empty()).then_some(Value::Object(patch))
        }
        // Anything else that differs is sent whole: a scalar, a list, or an
        // object that replaces a value of another type.
        (before, after) if before == after => None,
        (_, after) => Some(without_nulls(after)),
    }
}

/// `value` with the `null` members of its objects removed: in a merge
/// patch a `null` deletes, while in the object it stood for it means
/// "absent", so leaving it out says the same thing.
fn without_nulls(value: &Value) -> Value {
    match value {
        Value::Object(members) => Value::Object(
            members
                .iter()
                .filter(|(_, member)| !member.is_null())
                .map(|(key, member)| (key.clone(), without_nulls(member)))
                .collect(),
        ),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::diff;

    /// Applies a merge patch as RFC 7386 does, to check a diff round-trips.
    fn apply(target: &mut serde_json::Value, patch: &serde_json::Value) {
        match (target.as_object_mut(), patch.as_object()) {
            (Some(target), Some(patch)) => {
                for (key, value) in patch {
                    if value.is_null() {
                        target.remove(key);
                    } else {
                        apply(
                            target.entry(key.clone()).or_insert(serde_json::Value::Null),
                            value,
                        );
                    }
                }
            }
            (_, Some(_)) => {
                *target = json!({});
                apply(target, patch);
            }
            _ => *target = patch.clone(),
        }
    }

    #[test]
    fn equal_copies_need_no_patch() {
        let object = json!({"metadata": {"name": "v1"}, "spec": {"capacity": {"storage": "1Gi"}}});
        assert_eq!(diff(&object, &object.clone()), None);
    }

    #[test]
    fn only_what_changed_is_named_and_what_went_is_null() {
        let before = json!({
            "metadata": {"name": "v1", "annotations": {"a": "1", "b": "2"}},
            "spec": {"claimRef": {"name": "c", "uid": "u"}, "capacity": {"storage": "1Gi"}},
            "status": {"phase": "Bound"},
        });
        let after = json!({
            "metadata": {"name": "v1", "annotations": {"a": "1", "c": "3"}},
            "spec": {"capacity": {"storage": "1Gi"}},
            "status": {"phase": "Released", "message": "gone"},
        });
        let patch = diff(&before, &after).expect("a change");
        assert_eq!(
            patch,
            json!({
                "metadata": {"annotations": {"b": null, "c": "3"}},
                "spec": {"claimRef": null},
                "status": {"phase": "Released", "message": "gone"},
            })
        );
        let mut applied = before.clone();
        apply(&mut applied, &patch);
        assert_eq!(applied, after);
    }

    #[test]
    fn a_changed_list_is_sent_whole() {
        let before = json!({"metadata": {"finalizers": ["a", "b"]}});
        let after = json!({"metadata": {"finalizers": ["b"]}});
        assert_eq!(
            diff(&before, &after),
            Some(json!({"metadata": {"finalizers": ["b"]}}))
        );
    }

    #[test]
    fn fields_the_patch_does_not_name_survive_on_the_server() {
        let server = json!({
            "metadata": {"name": "v1", "futureMeta": "kept"},
            "spec": {"futureSpec": {"deep": 1}, "claimRef": {"name": "c"}},
            "status": {"phase": "Bound", "futureStatus": true},
        });
        // What the compiled types decoded: the server's copy without the
        // fields they do not know.
        let known = json!({
            "metadata": {"name": "v1"},
            "spec": {"claimRef": {"name": "c"}},
            "status": {"phase": "Bound"},
        });
        let mut edited = known.clone();
        edited["status"]["phase"] = json!("Released");
        edited["spec"]["claimRef"] = json!({"name": "c", "uid": "u"});
        let patch = diff(&known, &edited).expect("a change");
        let mut on_server = server.clone();
        apply(&mut on_server, &patch);
        assert_eq!(on_server["metadata"]["futureMeta"], "kept");
        assert_eq!(on_server["spec"]["futureSpec"], json!({"deep": 1}));
        assert_eq!(on_server["status"]["futureStatus"], true);
        assert_eq!(on_server["status"]["phase"], "Released");
        assert_eq!(on_server["spec"]["claimRef"]["uid"], "u");
    }

    #[test]
    fn a_new_object_value_is_sent_without_nulls() {
        let before = json!({"spec": {}});
        let after = json!({"spec": {"claimRef": {"name": "c", "uid": null}}});
        assert_eq!(
            diff(&before, &after),
            Some(json!({"spec": {"claimRef": {"name": "c"}}}))
        );
    }
}
