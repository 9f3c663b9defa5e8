//! Who wrote a watched object: its `metadata.managedFields` entries, kept
//! to what a reader needs to tell who last changed which field and when
//! (the manager, the operation, the subresource, the time, and the fields
//! owned two levels deep, such as `status.phase`), not the full field
//! tree, which the stores never keep ([`crate::lean`]).
//!
//! A controller that reads them subscribes with
//! [`crate::informer::Informers::on_managers`]; only the watches of the
//! kinds someone reads them of decode them.

use std::fmt;

use serde::Deserialize;
use serde::de::{Deserializer, IgnoredAny, MapAccess, Visitor};

/// One entry of an object's managedFields.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FieldManager {
    /// The writer: the request's `fieldManager`, else the first word of
    /// its `User-Agent` (`kube-controller-manager`, `pv-controller`).
    #[serde(default)]
    pub manager: String,
    /// `Update` or `Apply`.
    #[serde(default)]
    pub operation: String,
    /// The subresource written (`status`), or empty (the object itself,
    /// or a server older than 1.22, which does not say).
    #[serde(default)]
    pub subresource: String,
    /// When the writer last changed its fields (RFC 3339, seconds).
    #[serde(default)]
    pub time: Option<String>,
    /// The fields it owns, two levels deep, in order: `status.phase`,
    /// `spec.claimRef`, `metadata.annotations`.
    #[serde(default, rename = "fieldsV1", deserialize_with = "two_levels")]
    pub fields: Vec<String>,
}

impl FieldManager {
    /// Whether the writer owns `field` (two levels deep: `status.phase`).
    pub fn owns(&self, field: &str) -> bool {
        self.fields.iter().any(|owned| owned == field)
    }
}

/// What a subscriber to a kind's field managers is handed, for each
/// version a watch shows, before the store takes it in.
#[derive(Debug)]
pub struct Managed<'a, K> {
    /// The object as decoded (not yet trimmed).
    pub object: &'a K,
    /// Its field managers.
    pub managers: &'a [FieldManager],
    /// Whether it came in a (re)list rather than as a change.
    pub listing: bool,
}

/// A subscriber to the field managers of one kind's watched versions.
pub type ManagersHandler<K> = Box<dyn Fn(&Managed<'_, K>) + Send + Sync>;

/// Reads a `fieldsV1` tree as its fields two levels deep
/// (`{"f:status": {"f:phase": {}}}` as `status.phase`), skipping the rest.
fn two_levels<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<String>, D::Error> {
    deserializer.deserialize_option(TopLevel)
}

/// The top level of a `fieldsV1` tree.
struct TopLevel;

impl<'de> Visitor<'de> for TopLevel {
    type Value = Vec<String>;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("a fieldsV1 tree")
    }

    fn visit_none<E: serde::de::Error>(self) -> Result<Vec<String>, E> {
        Ok(Vec::new())
    }

    fn visit_unit<E: serde::de::Error>(self) -> Result<Vec<String>, E> {
        Ok(Vec::new())
    }

    fn visit_some<D: Deserializer<'de>>(self, inner: D) -> Result<Vec<String>, D::Error> {
        inner.deserialize_map(TopLevel)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Vec<String>, A::Error> {
        let mut fields = Vec::new();
        while let Some(key) = map.next_key::<String>()? {
            match key.strip_prefix("f:") {
                Some(top) => {
                    let seconds = map.next_value_seed(SecondLevel)?;
                    fields.extend(seconds.into_iter().map(|second| format!("{top}.{second}")));
                }
                None => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        fields.sort_unstable();
        Ok(fields)
    }
}

/// The second level of a `fieldsV1` tree: the names of its `f:` keys.
struct SecondLevel;

impl<'de> serde::de::DeserializeSeed<'de> for SecondLevel {
    type Value = Vec<String>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Vec<String>, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for SecondLevel {
    type Value = Vec<String>;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("a fieldsV1 tree")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Vec<String>, A::Error> {
        let mut names = Vec::new();
        while let Some(key) = map.next_key::<String>()? {
            if let Some(name) = key.strip_prefix("f:") {
                names.push(name.to_string());
            }
            map.next_value::<IgnoredAny>()?;
        }
        Ok(names)
    }
}

#[cfg(test)]
mod tests;
