//! The key of an object (`namespace/name`; a cluster-scoped object has an
//! empty namespace), for stores, queues and indexes of any controller.

use std::fmt;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::Resource;

/// An object's key: its namespace (empty for a cluster-scoped object) and
/// name.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey {
    /// The object's namespace; empty for a cluster-scoped object.
    pub namespace: String,
    /// The object's name.
    pub name: String,
}

impl ObjectKey {
    /// The key of `namespace/name`.
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            namespace: namespace.into(),
            name: name.into(),
        }
    }

    /// The key of a cluster-scoped object named `name`.
    pub fn cluster(name: impl Into<String>) -> Self {
        Self::new(String::new(), name)
    }

    /// The key of `object` (empty parts when its metadata lacks them).
    pub fn of<K: Resource>(object: &K) -> Self {
        let meta = object.meta();
        Self::new(
            meta.namespace.clone().unwrap_or_default(),
            meta.name.clone().unwrap_or_default(),
        )
    }

    /// The key of the object a reference names;
    /// empty parts where the reference lacks them.
    pub fn of_reference(reference: &ObjectReference) -> Self {
        Self::new(
            reference.namespace.clone().unwrap_or_default(),
            reference.name.clone().unwrap_or_default(),
        )
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.namespace.is_empty() {
            f.write_str(&self.name)
        } else {
            write!(f, "{}/{}", self.namespace, self.name)
        }
    }
}

#[cfg(test)]
mod tests;
