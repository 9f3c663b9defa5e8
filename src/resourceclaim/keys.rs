//! The keys of the controller's one work queue: a pod or a claim, each by
//! namespace and name (upstream's `pod:` and `claim:` prefixed keys).

use std::fmt;

use kube::ResourceExt;

/// A namespaced object by namespace and name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey {
    /// The namespace.
    pub namespace: String,
    /// The name.
    pub name: String,
}

impl ObjectKey {
    /// A key from its parts.
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            namespace: namespace.into(),
            name: name.into(),
        }
    }

    /// The key of a namespaced object.
    pub fn of<K: ResourceExt>(object: &K) -> Self {
        Self::new(object.namespace().unwrap_or_default(), object.name_any())
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// One unit of work: sync a pod (create its claims, record them, reserve)
/// or a claim (clean `reservedFor`, deallocate, delete when done).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum WorkKey {
    /// A pod with resource claims.
    Pod(ObjectKey),
    /// A ResourceClaim.
    Claim(ObjectKey),
}

impl fmt::Display for WorkKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Pod(key) => write!(f, "pod:{key}"),
            Self::Claim(key) => write!(f, "claim:{key}"),
        }
    }
}
