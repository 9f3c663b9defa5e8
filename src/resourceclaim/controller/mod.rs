//! The decisions of the ResourceClaim controller: what one pod or one claim
//! needs, done through [`writes`]. The wiring (handlers, queue, workers)
//! is in [`crate::resourceclaim::controller_base`] and calls
//! [`Controller::sync`] with one key at a time.
//!
//! A pod's sync makes sure every `spec.resourceClaims[]` entry has its
//! claim: a `resourceClaimName` is used as it is; a
//! `resourceClaimTemplateName` gets a claim generated from the template,
//! owned by the pod, annotated with the entry's name, and recorded in
//! `pod.status.resourceClaimStatuses` (all of a pod's new claims in one
//! status write). Before creating, the claims the pod controls are searched
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

mod claim;
mod pod;
pub(crate) mod triage;
pub(crate) mod writes;

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceClaimTemplate};

use super::claims::ClaimCache;
use super::deleted::DeletedPods;
use super::error::Result;
use super::features::Features;
use super::keys::WorkKey;
use crate::runtime::events::EventRecorder;
use crate::runtime::informer::{MemStore, StoreRef};
use crate::runtime::keys::ObjectKey;
use writes::Writes;

/// What the decisions read and write through, built by the wiring.
pub(crate) struct Parts {
    /// Pods, filed by the ResourceClaims they name.
    pub(crate) pods: Arc<MemStore<Pod>>,
    /// Templates.
    pub(crate) templates: StoreRef<ResourceClaimTemplate>,
    /// Claims, with the controller's own creates ahead of the watch.
    pub(crate) claims: Arc<ClaimCache>,
    /// Pods seen deleted.
    pub(crate) deleted: Arc<DeletedPods>,
    /// Events on pods.
    pub(crate) recorder: EventRecorder,
    /// The controller's requests.
    pub(crate) writer: Writes,
    /// What the cluster's feature gates allow templates to ask for.
    pub(crate) features: Features,
}

/// The decision half of the ResourceClaim controller.
pub struct Controller {
    parts: Parts,
}

impl std::fmt::Debug for Controller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Controller")
            .field("recorder", &self.parts.recorder)
            .finish_non_exhaustive()
    }
}

impl Controller {
    /// The controller over the parts the wiring built.
    pub(crate) fn new(parts: Parts) -> Self {
        Self { parts }
    }

    /// Syncs one pod or claim: see the module documentation.
    pub async fn sync(&self, key: &WorkKey) -> Result<()> {
        match key {
            WorkKey::Pod(pod) => self.sync_pod(pod).await,
            WorkKey::ResourceClaim(claim) => self.sync_claim(claim).await,
        }
    }

    /// Waits until every event recorded so far has been written (or given
    /// up on), so a caller can read them.
    pub async fn flush_events(&self) {
        self.parts.recorder.flush().await;
    }

    /// Puts a claim into the controller's claim cache as a create's answer
    /// does, before (or without) its watch event: how a test stages a
    /// create whose watch event has not arrived.
    pub fn cache_created(&self, claim: ResourceClaim) {
        self.parts.claims.offer(Arc::new(claim));
    }

    fn pod(&self, key: &ObjectKey) -> Option<Arc<Pod>> {
        self.parts.pods.get(key)
    }
}
