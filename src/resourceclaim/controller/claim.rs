//! A claim's sync: reservations of pods that are gone or done are removed,
//! an allocation nothing uses any more is cleared, and a claim generated
//! for a pod that is done is deleted.

use std::sync::Arc;

use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceClaimConsumerReference};

use super::Controller;
use crate::resourceclaim::constants::FINALIZER;
use crate::resourceclaim::error::Result;
use crate::resourceclaim::objects::{is_allocated, is_pod_done, owning_pod, uid};
use crate::runtime::keys::ObjectKey;

/// Whether a consumer is a pod (the only kind of consumer the controller
/// checks; any other is kept as it is).
fn is_pod_consumer(consumer: &ResourceClaimConsumerReference) -> bool {
    consumer.api_group.as_deref().unwrap_or_default().is_empty() && consumer.resource == "pods"
}

fn has_finalizer(claim: &ResourceClaim) -> bool {
    claim
        .metadata
        .finalizers
        .iter()
        .flatten()
        .any(|f| f == FINALIZER)
}

fn without_finalizer(claim: &ResourceClaim) -> ResourceClaim {
    let mut claim = claim.clone();
    if let Some(finalizers) = claim.metadata.finalizers.as_mut() {
        finalizers.retain(|f| f != FINALIZER);
    }
    claim
}

impl Controller {
    /// Syncs the claim of `key`; see the module documentation.
    pub(super) async fn sync_claim(&self, key: &ObjectKey) -> Result<()> {
        let Some(claim) = self.parts.claims.get(key) else {
            tracing::debug!(claim = %key, "nothing to do for claim, it is gone");
            return Ok(());
        };
        let consumers = claim
            .status
            .as_ref()
            .and_then(|status| status.reserved_for.clone())
            .unwrap_or_default();
        let mut valid = Vec::with_capacity(consumers.len());
        for consumer in consumers.iter() {
            if !is_pod_consumer(consumer) || self.pod_may_use(key, consumer).await? {
                valid.push(consumer.clone());
            }
        }
        if valid.len() < consumers.len() {
            self.release(&claim, valid.clone()).await?;
        } else if has_finalizer(&claim)
            && claim.metadata.deletion_timestamp.is_some()
            && valid.is_empty()
        {
            self.unblock_deletion(&claim).await?;
        }
        if valid.is_empty() {
            self.delete_if_owner_done(key, &claim).await?;
        }
        Ok(())
    }

    /// Whether the pod of a reservation may still use the claim. A pod
    /// seen deleted does not; one not in the watch's view is looked up
    /// (it may be too new for the watch, and dropping the reservation of a
    /// pod being scheduled would be wrong); a pod of the same name with
    /// another UID is another pod; a pod that is done does not.
    async fn pod_may_use(
        &self,
        claim: &ObjectKey,
        consumer: &ResourceClaimConsumerReference,
    ) -> Result<bool> {
        if self.parts.deleted.contains(&consumer.uid) {
            return Ok(false);
        }
        let pod_key = ObjectKey::new(&claim.namespace, &consumer.name);
        let keep = match self.pod(&pod_key) {
            Some(pod) => uid(&pod.metadata) == consumer.uid && !is_pod_done(&pod),
            None => self
                .parts
                .writer
                .get_pod(&pod_key)
                .await?
                .is_some_and(|pod| uid(&pod.metadata) == consumer.uid),
        };
        if !keep {
            tracing::info!(claim = %claim, pod = %pod_key, uid = %consumer.uid, "removing the reservation of a pod that is gone or done");
        }
        Ok(keep)
    }

    /// Writes the remaining reservations. When none remain and the
    /// scheduler allocated the claim (its finalizer is there), the
    /// allocation is cleared in the same write, so the devices can be
    /// allocated again, and the finalizer is then removed.
    async fn release(
        &self,
        claim: &Arc<ResourceClaim>,
        valid: Vec<ResourceClaimConsumerReference>,
    ) -> Result<()> {
        let mut updated = claim.as_ref().clone();
        let deallocate = valid.is_empty() && has_finalizer(claim);
        let status = updated.status.get_or_insert_with(Default::default);
        status.reserved_for = (!valid.is_empty()).then_some(valid);
        if deallocate {
            status.allocation = None;
        }
        let written = self.parts.writer.write_status(claim, updated).await?;
        if has_finalizer(&written) && !is_allocated(&written) {
            self.parts
                .writer
                .write_claim(&written, without_finalizer(&written))
                .await?;
        }
        Ok(())
    }

    /// A claim being deleted that nothing uses: its allocation (an
    /// immediate allocation that outlived its users) is cleared and the
    /// finalizer removed, so the deletion can finish.
    async fn unblock_deletion(&self, claim: &Arc<ResourceClaim>) -> Result<()> {
        let mut current = Arc::clone(claim);
        if is_allocated(&current) {
            let mut cleared = current.as_ref().clone();
            if let Some(status) = cleared.status.as_mut() {
                status.allocation = None;
            }
            current = self.parts.writer.write_status(&current, cleared).await?;
        }
        self.parts
            .writer
            .write_claim(&current, without_finalizer(&current))
            .await?;
        Ok(())
    }

    /// Deletes a claim generated for a pod that will not need it: the pod
    /// is done, or was replaced by another of the same name. A pod the
    /// watch does not show is left to the garbage collector, and a claim
    /// already being deleted needs no second delete.
    async fn delete_if_owner_done(&self, key: &ObjectKey, claim: &ResourceClaim) -> Result<()> {
        if claim.metadata.deletion_timestamp.is_some() {
            return Ok(());
        }
        let Some((pod_name, pod_uid)) = owning_pod(claim) else {
            return Ok(());
        };
        let Some(pod) = self.pod(&ObjectKey::new(&key.namespace, pod_name)) else {
            tracing::debug!(claim = %key, pod = pod_name, "owning pod not known, left to the garbage collector");
            return Ok(());
        };
        if uid(&pod.metadata) != pod_uid || is_pod_done(&pod) {
            self.parts.writer.delete_claim(claim).await?;
        }
        Ok(())
    }
}
