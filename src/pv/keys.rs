//! The name of a PersistentVolume as a type of its own, so a volume's name
//! is never confused with a claim's key (an
//! [`ObjectKey`](crate::runtime::keys::ObjectKey)) or any other string.

use std::borrow::Borrow;
use std::fmt;
use std::sync::Arc;

use k8s_openapi::api::core::v1::PersistentVolume;

use crate::runtime::keys::ObjectKey;

/// The name of a PersistentVolume (cluster-scoped). Copies share one
/// string: the queue, the parking and a resync each hold every volume's
/// name at the start of a storm, and a copy costs a count, not a string.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct VolumeName(Arc<str>);

impl VolumeName {
    /// The volume named `name`.
    pub fn new(name: impl AsRef<str>) -> Self {
        Self(Arc::from(name.as_ref()))
    }

    /// The name of a volume object; empty when the object has no name.
    pub fn of(volume: &PersistentVolume) -> Self {
        Self(Arc::from(
            volume.metadata.name.as_deref().unwrap_or_default(),
        ))
    }

    /// The name as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The volume's key in the process's stores.
    pub(crate) fn key(&self) -> ObjectKey {
        ObjectKey::cluster(self.0.to_string())
    }
}

/// A name already shared (the volume index's), without a copy.
impl From<Arc<str>> for VolumeName {
    fn from(name: Arc<str>) -> Self {
        Self(name)
    }
}

impl Borrow<str> for VolumeName {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for VolumeName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}
