//! The decisions of the ResourceClaim controller: what one pod or one claim
//! needs, decided from the stores alone into a plan ([`pod`], [`claim`]),
//! which the process's executor carries out. The wiring (handlers, queue,
//! workers) is in [`crate::resourceclaim::controller_base`] and decides
//! one key at a time ([`Known::decide`]).
//!
//! A pod's sync makes sure every `spec.resourceClaims[]` entry has its
//! claim: a `resourceClaimName` is used as it is; a
//! `resourceClaimTemplateName` gets a claim generated from the template,
//! owned by the pod, annotated with the entry's name, and recorded in
//! `pod.status.resourceClaimStatuses` (all of a pod's new claims in one
//! status apply, which names the created claims by the names the server
//! gave them). Before creating, the claims the pod controls are searched
//! by that annotation, in a cache that holds the controller's own creates
//! before the watch delivers them: a failed status write never leads to a
//! second claim. A scheduled pod whose allocated claim is not reserved
//! for it gets the reservation.
//!
//! A claim's sync removes from `status.reservedFor` the pods that are gone
//! (by UID: a pod re-created under the same name is another consumer) or
//! done; other kinds of consumers are left as they are. When the last
//! consumer goes, an allocation made by the scheduler (the claim carries
//! its finalizer) is cleared and the finalizer removed; a claim generated
//! for a pod that is done is deleted, even while the pod object exists.

mod changes;
mod claim;
mod pod;
#[cfg(test)]
mod tests;
pub(crate) mod triage;

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::ResourceClaimTemplate;

use super::claims::ClaimStore;
use super::deleted::DeletedPods;
use super::features::Features;
use super::keys::WorkKey;
use crate::runtime::informer::{MemStore, StoreRef};
use crate::runtime::keys::ObjectKey;
use crate::runtime::plan::{Plan, Reads};

/// A create of a claim, as upstream's create counter counts it (by its
/// outcome and whether the claim asks for admin access).
#[derive(Debug)]
pub(crate) enum Counted {
    /// The claim of a pod's entry was created.
    Created {
        /// Whether it asks for admin access.
        admin_access: bool,
        /// The pod.
        pod: ObjectKey,
        /// The pod's entry.
        entry: String,
    },
    /// Its create failed.
    CreateFailed {
        /// Whether it asks for admin access.
        admin_access: bool,
    },
}

/// The plan of one pod's or one claim's decision.
pub(crate) type ClaimPlan = Plan<Counted>;

/// The plan of one pod's decision.
pub(crate) type PodPlan = Plan<Counted>;

/// What the decisions know: the stores they read, and the cluster's
/// feature gates.
#[derive(Clone)]
pub(crate) struct Known {
    /// Pods, filed by the ResourceClaims they name.
    pub(crate) pods: Arc<MemStore<Pod>>,
    /// Templates.
    pub(crate) templates: StoreRef<ResourceClaimTemplate>,
    /// Claims, with the controller's own creates ahead of the watch.
    pub(crate) claims: Arc<ClaimStore>,
    /// Pods seen deleted.
    pub(crate) deleted: Arc<DeletedPods>,
    /// What the cluster's feature gates allow templates to ask for.
    pub(crate) features: Features,
}

impl Known {
    /// Decides about one pod or claim, with what was read for it so far.
    pub(crate) fn decide(&self, key: &WorkKey, reads: &Reads) -> Plan<Counted> {
        match key {
            WorkKey::Pod(pod) => self.decide_pod(pod),
            WorkKey::ResourceClaim(claim) => self.decide_claim(claim, reads),
        }
    }
}
