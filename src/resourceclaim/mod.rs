//! The ResourceClaim controller (kube-controller-manager's
//! `resourceclaim-controller`, resource.k8s.io/v1): it turns each
//! `pod.spec.resourceClaims[]` entry with a template into a claim owned by
//! the pod, recorded in the pod's status; keeps the two in step when writes
//! fail half-way; and cleans up after the pod (reservations of pods gone or
//! done, the allocation nothing uses, the generated claim of a pod that is
//! done).
//!
//! Laid out as every controller of the process: `controller_base` (its
//! handlers and workload on the process's informers) and `controller`
//! (decisions) over a claim cache (`claims.rs`, the process's one store of
//! ResourceClaims) and pure object helpers (`objects.rs`).

mod claims;
mod constants;
mod controller;
mod controller_base;
mod deleted;
mod error;
mod features;
mod keys;
mod metrics;
mod objects;

pub(crate) use constants::NAME;
pub use controller_base::Config;
pub use features::Features;

// Only for the crate's tests and benchmarks.
#[cfg(not(feature = "testing"))]
pub(crate) use controller_base::Controller;
#[cfg(feature = "testing")]
pub use controller_base::Controller;
pub(crate) use controller_base::build;
#[cfg(feature = "testing")]
pub use error::SyncError;
#[cfg(feature = "testing")]
pub use keys::WorkKey;

/// The API the controller needs: on an API server that does not serve it
/// (Kubernetes before 1.34), the process runs without this controller.
pub(crate) const REQUIRED_API: (&str, &str) = ("resource.k8s.io/v1", "resourceclaims");
