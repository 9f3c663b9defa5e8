//! The JSON merge patch (RFC 7386) that turns one copy of an object into
//! another: what the write door sends instead of the whole object; and its
//! application, as the server applies it.
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
//! thing a write can still lose: none of the lists the controllers of the
//! process edit has any today).
//!
//! The difference is taken on the encoded text, member by member: equal
//! text is an equal value (the encoding is deterministic), so only the
//! members that differ are parsed further, and nothing is built for the
//! rest.

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde::Deserialize;
use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::value::RawValue;

/// A merge patch, borrowing the encoded objects it was taken from.
#[derive(Debug)]
pub enum MergePatch<'a> {
    /// Members to merge into the target's object of the same place.
    Object(Vec<(Cow<'a, str>, MergePatch<'a>)>),
    /// A value that replaces the target's whole.
    Value(&'a RawValue),
    /// Removes the member.
    Delete,
}

impl Serialize for MergePatch<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Object(members) => {
                let mut map = serializer.serialize_map(Some(members.len()))?;
                for (name, value) in members {
                    map.serialize_entry(name, value)?;
                }
                map.end()
            }
            Self::Value(raw) => raw.serialize(serializer),
            Self::Delete => serializer.serialize_unit(),
        }
    }
}

/// A member's name, borrowed from the encoded text unless it holds an
/// escape.
#[derive(Deserialize, PartialEq, Eq, PartialOrd, Ord)]
struct Name<'a>(#[serde(borrow)] Cow<'a, str>);

/// The members of an encoded object, by name; `None` for anything else.
fn members(raw: &RawValue) -> Option<BTreeMap<Name<'_>, &RawValue>> {
    if !raw.get().starts_with('{') {
        return None;
    }
    serde_json::from_str(raw.get()).ok()
}

/// The merge patch that makes `before` into `after` (both encoded JSON):
/// the members whose values differ, recursively for objects, with a
/// deletion for a member `after` lacks. `None` when the two are equal.
pub fn diff<'a>(before: &'a RawValue, after: &'a RawValue) -> Option<MergePatch<'a>> {
    if before.get() == after.get() {
        return None;
    }
    let (Some(old), Some(new)) = (members(before), members(after)) else {
        // A scalar, a list, or a value of another type: sent whole.
        return Some(MergePatch::Value(after));
    };
    let mut changes = Vec::new();
    for (name, old_value) in &old {
        match new.get(name) {
            None => changes.push((name.0.clone(), MergePatch::Delete)),
            Some(new_value) => {
                if let Some(change) = diff(old_value, new_value) {
                    changes.push((name.0.clone(), change));
                }
            }
        }
    }
    for (name, new_value) in new {
        if !old.contains_key(&name) && new_value.get() != "null" {
            changes.push((name.0, MergePatch::Value(new_value)));
        }
    }
    (!changes.is_empty()).then_some(MergePatch::Object(changes))
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use serde_json::value::{RawValue, to_raw_value};

    use json_patch::merge as apply;

    use super::diff;

    fn raw(value: &serde_json::Value) -> Box<RawValue> {
        to_raw_value(value).unwrap()
    }

    /// The patch from `before` to `after`, as a value.
    fn patch(before: &serde_json::Value, after: &serde_json::Value) -> Option<serde_json::Value> {
        let (before, after) = (raw(before), raw(after));
        diff(&before, &after).map(|patch| serde_json::to_value(&patch).unwrap())
    }

    #[test]
    fn equal_copies_need_no_patch() {
        let object = json!({"metadata": {"name": "v1"}, "spec": {"capacity": {"storage": "1Gi"}}});
        assert_eq!(patch(&object, &object.clone()), None);
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
            "spec": {"claimRef": {"name": "c"}, "capacity": {"storage": "1Gi"}},
            "status": {"phase": "Released", "message": "gone"},
        });
        let change = patch(&before, &after).expect("a change");
        assert_eq!(
            change,
            json!({
                "metadata": {"annotations": {"b": null, "c": "3"}},
                "spec": {"claimRef": {"uid": null}},
                "status": {"phase": "Released", "message": "gone"},
            })
        );
        let mut applied = before.clone();
        apply(&mut applied, &change);
        assert_eq!(applied, after);
    }

    #[test]
    fn a_member_that_went_is_deleted_and_a_changed_list_is_sent_whole() {
        let before =
            json!({"metadata": {"finalizers": ["a", "b"]}, "spec": {"claimRef": {"name": "c"}}});
        let after = json!({"metadata": {"finalizers": ["b"]}, "spec": {}});
        assert_eq!(
            patch(&before, &after),
            Some(json!({"metadata": {"finalizers": ["b"]}, "spec": {"claimRef": null}}))
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
        let change = patch(&known, &edited).expect("a change");
        let mut on_server = server.clone();
        apply(&mut on_server, &change);
        assert_eq!(on_server["metadata"]["futureMeta"], "kept");
        assert_eq!(on_server["spec"]["futureSpec"], json!({"deep": 1}));
        assert_eq!(on_server["status"]["futureStatus"], true);
        assert_eq!(on_server["status"]["phase"], "Released");
        assert_eq!(on_server["spec"]["claimRef"]["uid"], "u");
    }

    #[test]
    fn a_new_member_is_sent_whole_and_a_new_null_not_at_all() {
        let before = json!({"spec": {}});
        let after = json!({"spec": {"claimRef": {"name": "c"}, "gone": null}});
        assert_eq!(
            patch(&before, &after),
            Some(json!({"spec": {"claimRef": {"name": "c"}}}))
        );
    }

    #[test]
    fn keys_that_need_escaping_are_compared_and_sent_as_they_are() {
        let before = json!({"spec": {"csi": {"volumeAttributes": {"a\"b": "1", "c\\d": "2"}}}});
        let after = json!({"spec": {"csi": {"volumeAttributes": {"a\"b": "9", "c\\d": "2"}}}});
        assert_eq!(
            patch(&before, &after),
            Some(json!({"spec": {"csi": {"volumeAttributes": {"a\"b": "9"}}}}))
        );
    }
}
