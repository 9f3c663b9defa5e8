//! The keys of the controller's one work queue: a pod or a claim, each by
//! its [`ObjectKey`] (upstream's `pod:` and `claim:` prefixed keys).

use std::fmt;

use crate::runtime::keys::ObjectKey;

/// One unit of work: sync a pod (create its claims, record them, reserve)
/// or a claim (clean `reservedFor`, deallocate, delete when done).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum WorkKey {
    /// A pod with resource claims.
    Pod(ObjectKey),
    /// A ResourceClaim.
    ResourceClaim(ObjectKey),
}

impl fmt::Display for WorkKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Pod(key) => write!(f, "pod:{key}"),
            Self::ResourceClaim(key) => write!(f, "claim:{key}"),
        }
    }
}
