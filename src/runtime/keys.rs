//! The key of a namespaced object (`namespace/name`), for queues and
//! indexes of any controller.

use std::fmt;

use kube::Resource;
use kube::runtime::reflector::ObjectRef;

/// A namespaced object's key.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey {
    /// The object's namespace.
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

    /// The key of `object` (empty parts when its metadata lacks them).
    pub fn of<K: Resource>(object: &K) -> Self {
        let meta = object.meta();
        Self::new(
            meta.namespace.clone().unwrap_or_default(),
            meta.name.clone().unwrap_or_default(),
        )
    }

    /// The reference a reflector store is looked up with.
    pub fn object_ref<K: Resource<DynamicType = ()>>(&self) -> ObjectRef<K> {
        ObjectRef::new(&self.name).within(&self.namespace)
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}
