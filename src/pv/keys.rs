//! The names the binder deals in, as types of their own: a
//! PersistentVolume's name, never confused with a claim's key (an
//! [`ObjectKey`](crate::runtime::keys::ObjectKey)) or any other string, and
//! the names of its long operations, spelled as upstream's
//! (`recycle-<pv>[<uid>]`, `delete-<pv>[<uid>]`,
//! `provision-<ns>/<claim>[<uid>]`), so the operation tracker runs at most
//! one recycle or delete per volume and one provisioning per claim. The
//! kind of each (`recycle`, `delete`, `provision`) is the `operation_name`
//! label of upstream's `volume_operation_total_*` series.

use std::borrow::Borrow;
use std::fmt;
use std::sync::Arc;

use k8s_openapi::api::core::v1::PersistentVolume;

use crate::runtime::keys::ObjectKey;
use crate::runtime::operations::OperationName;

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

/// The kind of a volume's recycle.
pub(crate) const RECYCLE: &str = "recycle";

/// The kind of a volume's delete.
pub(crate) const DELETE: &str = "delete";

/// The kind of a claim's provisioning.
pub(crate) const PROVISION: &str = "provision";

/// The recycle operation of a volume: `recycle-<pv>[<uid>]`.
pub(crate) fn recycle(pv_name: &str, pv_uid: &str) -> OperationName {
    OperationName::new(RECYCLE, ObjectKey::new("", pv_name), pv_uid)
}

/// The delete operation of a volume: `delete-<pv>[<uid>]`.
pub(crate) fn delete(pv_name: &str, pv_uid: &str) -> OperationName {
    OperationName::new(DELETE, ObjectKey::new("", pv_name), pv_uid)
}

/// The provision operation of a claim: `provision-<ns>/<claim>[<uid>]`.
pub(crate) fn provision(namespace: &str, claim_name: &str, claim_uid: &str) -> OperationName {
    OperationName::new(PROVISION, ObjectKey::new(namespace, claim_name), claim_uid)
}

#[cfg(test)]
mod tests;
