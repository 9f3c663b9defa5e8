//! A claim's decision: reservations of pods that are gone or done are
//! removed, an allocation nothing uses any more is cleared (with the
//! scheduler's finalizer), and a claim generated for a pod that is done is
//! deleted. Sends nothing, awaits nothing: a reservation whose pod the
//! watch has not shown asks for the pod to be read first (one may be too
//! new for the watch, and dropping the reservation of a pod being
//! scheduled would be wrong), and the claim is decided again with the
//! answers.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceClaimConsumerReference};

use super::changes::{self, has_finalizer};
use super::{ClaimPlan, Known};
use crate::resourceclaim::objects::{is_allocated, is_pod_done, owning_pod, uid};
use crate::runtime::informer::Store;
use crate::runtime::keys::ObjectKey;
use crate::runtime::plan::Reads;

/// Whether the pod of a reservation may still use the claim.
enum PodUse {
    /// It may: the reservation stays.
    Keeps,
    /// It was seen deleted: the reservation goes.
    Gone,
    /// It is gone, replaced by another of its name, or done: the
    /// reservation goes.
    GoneOrDone(ObjectKey),
    /// Not known without reading the pod.
    Read(ObjectKey),
}

/// Whether a consumer is a pod (the only kind of consumer the controller
/// checks; any other is kept as it is).
fn is_pod_consumer(consumer: &ResourceClaimConsumerReference) -> bool {
    consumer.api_group.as_deref().unwrap_or_default().is_empty() && consumer.resource == "pods"
}

impl Known {
    /// Decides about the claim `key` as the claim store holds it (nothing
    /// to do for a claim gone), with the pods read so far for it in
    /// `reads`.
    pub(crate) fn decide_claim(&self, key: &ObjectKey, reads: &Reads) -> ClaimPlan {
        let Some(claim) = self.claims.get(key) else {
            tracing::debug!(claim = %key, "nothing to do for claim, it is gone");
            return ClaimPlan::default();
        };
        let claim = &claim;
        let key = ObjectKey::of(claim.as_ref());
        let consumers = claim
            .status
            .as_ref()
            .and_then(|status| status.reserved_for.clone())
            .unwrap_or_default();
        let mut valid = Vec::with_capacity(consumers.len());
        let mut gone = Vec::new();
        let mut to_read = Vec::new();
        for consumer in &consumers {
            if !is_pod_consumer(consumer) {
                valid.push(consumer.clone());
                continue;
            }
            match self.pod_use(&key, consumer, reads) {
                PodUse::Keeps => valid.push(consumer.clone()),
                PodUse::Gone => {}
                PodUse::GoneOrDone(pod) => gone.push((pod, &consumer.uid)),
                PodUse::Read(pod) => {
                    if !to_read.contains(&pod) {
                        to_read.push(pod);
                    }
                }
            }
        }
        if !to_read.is_empty() {
            let mut plan = ClaimPlan::default();
            for pod in to_read {
                plan.read::<Pod>(pod);
            }
            return plan;
        }
        for (pod, pod_uid) in gone {
            tracing::info!(claim = %key, pod = %pod, uid = %pod_uid, "removing the reservation of a pod that is gone or done");
        }
        let mut plan = ClaimPlan::default();
        if valid.len() < consumers.len() {
            release(&mut plan, claim, valid.clone());
        } else if has_finalizer(claim)
            && claim.metadata.deletion_timestamp.is_some()
            && valid.is_empty()
        {
            unblock_deletion(&mut plan, claim);
        }
        if valid.is_empty() {
            self.delete_if_owner_done(&mut plan, claim);
        }
        plan
    }

    /// Whether the pod of a reservation may still use the claim. A pod
    /// seen deleted does not; one not in the watch's view is read (its
    /// answer in `reads`); a pod of the same name with another UID is
    /// another pod; a pod that is done does not.
    fn pod_use(
        &self,
        claim: &ObjectKey,
        consumer: &ResourceClaimConsumerReference,
        reads: &Reads,
    ) -> PodUse {
        if self.deleted.contains(&consumer.uid) {
            return PodUse::Gone;
        }
        let pod_key = ObjectKey::new(&claim.namespace, &consumer.name);
        let keeps = match self.pods.get(&pod_key) {
            Some(pod) => uid(&pod.metadata) == consumer.uid && !is_pod_done(&pod),
            None => match reads.get::<Pod>(&pod_key) {
                Some(read) => read
                    .as_ref()
                    .is_some_and(|pod| uid(&pod.metadata) == consumer.uid),
                None => return PodUse::Read(pod_key),
            },
        };
        if keeps {
            PodUse::Keeps
        } else {
            PodUse::GoneOrDone(pod_key)
        }
    }

    /// Adds the delete of a claim generated for a pod that will not need
    /// it: the pod is done, or was replaced by another of the same name. A
    /// pod the watch does not show is left to the garbage collector, and a
    /// claim already being deleted needs no second delete.
    fn delete_if_owner_done(&self, plan: &mut ClaimPlan, claim: &Arc<ResourceClaim>) {
        if claim.metadata.deletion_timestamp.is_some() {
            return;
        }
        let key = ObjectKey::of(claim.as_ref());
        let Some((pod_name, pod_uid)) = owning_pod(claim) else {
            return;
        };
        let Some(pod) = self.pods.get(&ObjectKey::new(&key.namespace, pod_name)) else {
            tracing::debug!(claim = %key, pod = pod_name, "owning pod not known, left to the garbage collector");
            return;
        };
        if uid(&pod.metadata) != pod_uid || is_pod_done(&pod) {
            tracing::info!(claim = %key, "deleting unused generated ResourceClaim");
            plan.delete::<ResourceClaim>(key, claim.metadata.uid.clone());
        }
    }
}

/// Adds the write of the remaining reservations. When none remain and the
/// scheduler allocated the claim (its finalizer is there), the allocation
/// is cleared in the same write, so the devices can be allocated again,
/// and the finalizer is then removed.
fn release(
    plan: &mut ClaimPlan,
    claim: &Arc<ResourceClaim>,
    keep: Vec<ResourceClaimConsumerReference>,
) {
    let deallocate = keep.is_empty() && has_finalizer(claim);
    let released = changes::release(plan, claim, keep, deallocate);
    if has_finalizer(&released) && !is_allocated(&released) {
        changes::remove_finalizer(plan, &released);
    }
}

/// Adds, for a claim being deleted that nothing uses, the clearing of its
/// allocation (an immediate allocation that outlived its users) and the
/// removal of the finalizer, so the deletion can finish.
fn unblock_deletion(plan: &mut ClaimPlan, claim: &Arc<ResourceClaim>) {
    let current = changes::deallocate(plan, claim);
    changes::remove_finalizer(plan, &current);
}
