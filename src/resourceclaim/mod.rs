//! The ResourceClaim controller (kube-controller-manager's
//! `resourceclaim`, resource.k8s.io/v1): it turns each
//! `pod.spec.resourceClaims[]` entry with a template into a claim owned by
//! the pod, recorded in the pod's status; keeps the two in step when writes
//! fail half-way; and cleans up after the pod (reservations of pods gone or
//! done, the allocation nothing uses, the generated claim of a pod that is
//! done).
//!
//! Laid out as every controller of the process: `controller_base` (wiring)
//! and `controller` (decisions) over a claim cache (`claims.rs`) and pure
//! object helpers (`objects.rs`).

/// The controller's name in `--controllers`, as kube-controller-manager's.
pub const NAME: &str = "resourceclaim";

mod claims;
mod constants;
pub(crate) mod controller;
pub(crate) mod controller_base;
mod deleted;
mod error;
mod keys;
mod metrics;
mod objects;

pub use controller::ResourceClaimController;
pub use controller_base::{
    ClaimControllerBase, ClaimControllerConfig, ClaimControllerError, ClaimIdle,
};
pub use error::SyncError;
pub use keys::WorkKey;
