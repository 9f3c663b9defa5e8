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

/// A merge patch, borrowing the encoded objects it was taken from until
/// it is made owned ([`MergePatch::into_owned`]).
#[derive(Debug)]
pub enum MergePatch<'a> {
    /// Members to merge into the target's object of the same place.
    Object(Vec<(Cow<'a, str>, MergePatch<'a>)>),
    /// A value that replaces the target's whole.
    Value(Cow<'a, RawValue>),
    /// Removes the member.
    Delete,
}

impl MergePatch<'_> {
    /// The same patch owning its names and values, so it outlives the
    /// encoded objects it was taken from.
    pub fn into_owned(self) -> MergePatch<'static> {
        match self {
            Self::Object(members) => MergePatch::Object(
                members
                    .into_iter()
                    .map(|(name, value)| (Cow::Owned(name.into_owned()), value.into_owned()))
                    .collect(),
            ),
            Self::Value(raw) => MergePatch::Value(Cow::Owned(raw.into_owned())),
            Self::Delete => MergePatch::Delete,
        }
    }

    /// The same patch borrowing this one's names and values.
    pub fn borrowed(&self) -> MergePatch<'_> {
        match self {
            Self::Object(members) => MergePatch::Object(
                members
                    .iter()
                    .map(|(name, value)| (Cow::Borrowed(name.as_ref()), value.borrowed()))
                    .collect(),
            ),
            Self::Value(raw) => MergePatch::Value(Cow::Borrowed(raw.as_ref())),
            Self::Delete => MergePatch::Delete,
        }
    }
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
        return Some(MergePatch::Value(Cow::Borrowed(after)));
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
            changes.push((name.0, MergePatch::Value(Cow::Borrowed(new_value))));
        }
    }
    (!changes.is_empty()).then_some(MergePatch::Object(changes))
}

#[cfg(test)]
mod tests;
