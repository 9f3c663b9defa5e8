//! The handlers of pod, claim and template changes: they queue only the
//! pods and claims that have work (upstream's `enqueuePod`,
//! `enqueueResourceClaim` and `enqueueResourceClaimTemplate`). The process's informers have already put each
//! change into its store (pods, filed by the claims they name; claims, in
//! the claim store), and tell an object gone during a relist as deleted.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceClaimTemplate};

use super::{PODS_BY_RESOURCE_CLAIM, PODS_BY_TEMPLATE};
use crate::resourceclaim::claims::ClaimStore;
use crate::resourceclaim::controller::triage::{claims_to_release, pod_needs_work};
use crate::resourceclaim::deleted::DeletedPods;
use crate::resourceclaim::keys::WorkKey;
use crate::resourceclaim::objects::{uid, uses_claims};
use crate::runtime::informer::{Change, MemStore, Store};
use crate::runtime::keys::ObjectKey;
use crate::runtime::queue::WorkQueue;
use crate::runtime::runner::Leading;

/// What the handlers act on. Keys are queued only while the process
/// leads; a follower keeps its stores warm and queues nothing.
#[derive(Clone)]
pub(super) struct Handlers {
    pub(super) pods: Arc<MemStore<Pod>>,
    pub(super) claims: Arc<ClaimStore>,
    pub(super) deleted: Arc<DeletedPods>,
    pub(super) queue: WorkQueue<WorkKey>,
    pub(super) leading: Leading,
}

impl Handlers {
    /// A pod changed, or is gone.
    pub(super) fn on_pod(&self, change: &Change<'_, Pod>) {
        match change {
            Change::Applied { object, .. } => self.enqueue_pod(object, false),
            Change::Deleted { key, last } => {
                if let Some(pod) = last {
                    self.pod_deleted(key, pod);
                }
            }
            Change::Listed => {}
        }
    }

    /// A pod with resource claims was deleted (seen as such, or missing
    /// from a relist): its UID is remembered so its reservations are
    /// dropped without a lookup, and its claims are queued.
    fn pod_deleted(&self, key: &ObjectKey, pod: &Pod) {
        if !uses_claims(pod) {
            return;
        }
        tracing::debug!(pod = %key, "pod with resource claims deleted");
        self.deleted.add(uid(&pod.metadata));
        self.enqueue_pod(pod, true);
    }

    /// Queues the claims a pod that will not run releases, and the pod when
    /// it needs a sync.
    pub(super) fn enqueue_pod(&self, pod: &Pod, deleted: bool) {
        if !self.leading.get() || !uses_claims(pod) {
            return;
        }
        for claim in claims_to_release(pod, deleted, &self.claims) {
            self.queue.add(WorkKey::ResourceClaim(claim));
        }
        if !deleted && pod_needs_work(pod, &self.claims) {
            self.queue.add(WorkKey::Pod(ObjectKey::of(pod)));
        }
    }

    /// A claim changed, or is gone.
    pub(super) fn on_claim(&self, change: &Change<'_, ResourceClaim>) {
        match change {
            Change::Applied { object, .. } => {
                self.claim_changed(&ObjectKey::of(object.as_ref()), false);
            }
            Change::Deleted { key, .. } => self.claim_changed(key, true),
            Change::Listed => {}
        }
    }

    /// A claim changed or was deleted: a live one is queued (its
    /// reservations may name pods gone meanwhile), and the pods that name
    /// it are checked for work (a deleted claim of theirs is made again).
    fn claim_changed(&self, key: &ObjectKey, deleted: bool) {
        if !deleted && self.leading.get() {
            self.queue.add(WorkKey::ResourceClaim(key.clone()));
        }
        for pod in self.pods.indexed(PODS_BY_RESOURCE_CLAIM, key) {
            self.enqueue_pod(&pod, false);
        }
    }

    /// A template was created or changed: the pods of its namespace whose
    /// entries name it are checked for work at once (a pod that waited for
    /// its template need not wait for its retry). A deleted template
    /// changes nothing.
    pub(super) fn on_template(&self, change: &Change<'_, ResourceClaimTemplate>) {
        if let Change::Applied { object, .. } = change {
            let key = ObjectKey::of(object.as_ref());
            for pod in self.pods.indexed(PODS_BY_TEMPLATE, &key) {
                self.enqueue_pod(&pod, false);
            }
        }
    }

    /// Queues every pod and claim with work: what a replica does when it
    /// starts leading.
    pub(super) fn enqueue_all(&self) {
        for pod in self.pods.list() {
            self.enqueue_pod(&pod, false);
        }
        for key in self.claims.keys() {
            self.queue.add(WorkKey::ResourceClaim(key));
        }
    }
}

#[cfg(test)]
mod tests;
