//! The decisions of the ResourceClaim controller: what one pod or one claim
//! needs, decided from the stores alone into a plan ([`pod`], [`claim`]),
//! then carried out through the process's executor ([`execute`]). The
//! wiring (handlers, queue, workers) is in
//! [`crate::resourceclaim::controller_base`] and calls [`Controller::sync`]
//! with one key at a time.
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
mod execute;
mod pod;
#[cfg(test)]
mod tests;
pub(crate) mod triage;

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceClaimTemplate};
use kube::Client;

use super::claims::ClaimCache;
use super::deleted::DeletedPods;
use super::error::{Result, SyncError};
use super::features::Features;
use super::keys::WorkKey;
use super::metrics::ClaimMetrics;
use crate::runtime::events::EventRecorder;
use crate::runtime::executor::Executor;
use crate::runtime::informer::{MemStore, StoreRef};
use crate::runtime::journal::Journal;
use crate::runtime::operations::OperationTracker;
use crate::runtime::plan::{Answer, Plan};
use crate::runtime::write::{Writer, WriterSet};
pub(crate) use claim::{ClaimDecided, PodReads};

/// The plan of one pod's decision.
pub(crate) type PodPlan = Plan<PodAfter>;

/// The plan of one claim's decision.
pub(crate) type ClaimPlan = Plan<ClaimAfter>;

/// What follows a pod's plan, besides its steps.
#[derive(Debug, Default)]
pub(crate) struct PodAfter {
    /// The pod decided on (for the Warning of a create that fails).
    pub(crate) pod: Option<Arc<Pod>>,
    /// The claims the plan creates, in the order of its creates.
    pub(crate) creates: Vec<PlannedClaim>,
    /// The entry that could not have its claim: once the steps before it
    /// (and its Warning) went through, the sync fails with this.
    pub(crate) failure: Option<SyncError>,
}

/// A claim a pod's plan creates, and what became of its create.
#[derive(Clone, Debug)]
pub(crate) struct PlannedClaim {
    /// The pod's entry the claim is for.
    pub(crate) entry: String,
    /// Whether the claim asks for admin access (a label of the create
    /// metric).
    pub(crate) admin_access: bool,
    /// The create's answer.
    pub(crate) answer: Answer<Arc<ResourceClaim>>,
}

/// What follows a claim's plan, besides its steps.
#[derive(Debug, Default)]
pub(crate) struct ClaimAfter {
    /// The claim the plan deletes, if it does.
    pub(crate) deleted: Option<DeletedClaim>,
}

/// A claim a plan deletes, and what became of the delete.
#[derive(Debug)]
pub(crate) struct DeletedClaim {
    /// The claim as decided on.
    pub(crate) claim: Arc<ResourceClaim>,
    /// The delete's answer: the claim when finalizers hold it.
    pub(crate) answer: Answer<Option<Arc<ResourceClaim>>>,
}

/// What the decisions know: the stores they read, and the cluster's
/// feature gates.
#[derive(Clone)]
pub(crate) struct Known {
    /// Pods, filed by the ResourceClaims they name.
    pub(crate) pods: Arc<MemStore<Pod>>,
    /// Templates.
    pub(crate) templates: StoreRef<ResourceClaimTemplate>,
    /// Claims, with the controller's own creates ahead of the watch.
    pub(crate) claims: Arc<ClaimCache>,
    /// Pods seen deleted.
    pub(crate) deleted: Arc<DeletedPods>,
    /// What the cluster's feature gates allow templates to ask for.
    pub(crate) features: Features,
}

/// What the controller is built from (handed in by the wiring).
pub(crate) struct Parts {
    /// What the decisions read.
    pub(crate) known: Known,
    /// Carries the plans out.
    pub(crate) executor: Executor,
    /// Events on pods (the executor's recorder, for a failed create's
    /// Warning and for flushing).
    pub(crate) recorder: EventRecorder,
    /// For reads of pods the watch has not shown.
    pub(crate) client: Client,
    /// Upstream's create counters.
    pub(crate) claim_metrics: ClaimMetrics,
}

impl Parts {
    /// The parts of a controller that decides from `known`, writes claims
    /// and pod statuses through `claims` and `pods` (the process's write
    /// door), reads pods through `client`, records events on `recorder`
    /// and counts its creates in `claim_metrics`; with a `journal`, its
    /// plans go there instead of being carried out.
    pub(crate) fn new(
        known: Known,
        claims: Writer<ResourceClaim>,
        pods: Writer<Pod>,
        client: Client,
        recorder: EventRecorder,
        claim_metrics: ClaimMetrics,
        journal: Option<Arc<dyn Journal>>,
    ) -> Self {
        let executor = Executor::new(
            claims.controller(),
            WriterSet::default().with(claims).with(pods),
            recorder.clone(),
            // The controller starts no long operation.
            OperationTracker::new(),
            journal,
        );
        Self {
            known,
            executor,
            recorder,
            client,
            claim_metrics,
        }
    }
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

    /// Syncs one pod or claim: decides, then carries the plan out (see the
    /// module documentation).
    pub async fn sync(&self, key: &WorkKey) -> Result<()> {
        match key {
            WorkKey::Pod(pod) => self.sync_pod(pod).await,
            WorkKey::ResourceClaim(claim) => self.sync_claim(claim).await,
        }
    }

    /// Waits until every event recorded so far has been written (or given
    /// up on), so a caller can read them.
    #[cfg(feature = "testing")]
    pub async fn flush_events(&self) {
        self.parts.recorder.flush().await;
    }

    /// Puts a claim into the controller's claim cache as a create's answer
    /// does, before (or without) its watch event: how a test stages a
    /// create whose watch event has not arrived.
    #[cfg(feature = "testing")]
    pub fn cache_created(&self, claim: ResourceClaim) {
        self.parts.known.claims.offer(Arc::new(claim));
    }
}
