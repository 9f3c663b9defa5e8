//! Typed keys for the objects the controller tracks, so that a claim's
//! namespace/name pair is never confused with a volume name.

use std::fmt;

use k8s_openapi::api::core::v1::{ObjectReference, PersistentVolume, PersistentVolumeClaim};

/// The name of a PersistentVolume (cluster-scoped).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct VolumeName(pub String);

impl VolumeName {
    /// The key of a volume object; empty when the object has no name.
    pub fn of(volume: &PersistentVolume) -> Self {
        Self(volume.metadata.name.clone().unwrap_or_default())
    }
}

impl fmt::Display for VolumeName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The namespace and name of a PersistentVolumeClaim.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ClaimKey {
    /// Namespace of the claim.
    pub namespace: String,
    /// Name of the claim.
    pub name: String,
}

impl ClaimKey {
    /// A key from its parts.
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            namespace: namespace.into(),
            name: name.into(),
        }
    }

    /// The key of a claim object; empty parts where the object lacks them.
    pub fn of(claim: &PersistentVolumeClaim) -> Self {
        Self {
            namespace: claim.metadata.namespace.clone().unwrap_or_default(),
            name: claim.metadata.name.clone().unwrap_or_default(),
        }
    }

    /// The key of the claim a reference (a volume's claimRef) names; empty
    /// parts where the reference lacks them.
    pub fn of_reference(reference: &ObjectReference) -> Self {
        Self {
            namespace: reference.namespace.clone().unwrap_or_default(),
            name: reference.name.clone().unwrap_or_default(),
        }
    }
}

impl fmt::Display for ClaimKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}
