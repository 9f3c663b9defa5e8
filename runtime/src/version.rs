//! The one rule for which of two copies of an object is newer, used by
//! every store (a watch's objects and the answers to writes alike) and by
//! the write door (is the store ahead of the copy a write is conditional
//! on?).
//!
//! A resourceVersion is etcd's revision of the object's last change:
//! global and increasing across all objects, so two copies compare by it
//! even when one is a later incarnation under the same name. A version
//! that is not a number (no real API server gives one) cannot be ordered:
//! the copy that arrives last wins.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// How an offered copy of an object stands against the copy held.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Age {
    /// Newer: it replaces the held copy.
    Newer,
    /// The same version: the held copy itself (the API server never gives
    /// two contents one resourceVersion).
    Same,
    /// Older: it is dropped.
    Older,
}

/// A resourceVersion as a number; `None` when it is not one.
pub fn number(version: Option<&str>) -> Option<u64> {
    version?.parse().ok()
}

/// How `offered` stands against `held` (see the module documentation).
pub fn age(held: &ObjectMeta, offered: &ObjectMeta) -> Age {
    age_of_versions(
        held.resource_version.as_deref(),
        offered.resource_version.as_deref(),
    )
}

/// How a copy at version `offered` stands against one at `held`.
pub fn age_of_versions(held: Option<&str>, offered: Option<&str>) -> Age {
    age_of_numbers(number(held), number(offered))
}

/// How a copy at version `offered` stands against one at `held`, both as
/// numbers (`None`: not a number).
pub fn age_of_numbers(held: Option<u64>, offered: Option<u64>) -> Age {
    match (held, offered) {
        (Some(held), Some(offered)) => match offered.cmp(&held) {
            std::cmp::Ordering::Greater => Age::Newer,
            std::cmp::Ordering::Equal => Age::Same,
            std::cmp::Ordering::Less => Age::Older,
        },
        _ => Age::Newer,
    }
}

#[cfg(test)]
mod tests;
