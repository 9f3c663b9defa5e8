//! Carrying the controller's plans out through the process's executor, and
//! what only the answers tell: the create metrics and the Warning of a
//! create the API server refused, the claim cache after a delete, and the
//! pods a claim's decision asked to read.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;

use super::{ClaimDecided, ClaimPlan, Controller, DeletedClaim, PlannedClaim, PodPlan, PodReads};
use crate::resourceclaim::constants::REASON_FAILED_CREATION;
use crate::resourceclaim::error::{Result, SyncError};
use crate::runtime::events::{EventType, reference_of};
use crate::runtime::keys::ObjectKey;

impl Controller {
    /// Syncs the pod of `key`: decides, then carries the plan out.
    pub(super) async fn sync_pod(&self, key: &ObjectKey) -> Result<()> {
        let plan = self.parts.known.decide_pod(key)?;
        self.execute_pod(plan).await
    }

    /// Carries a pod's plan out; counts its creates and, when one failed,
    /// records the Warning naming its entry.
    async fn execute_pod(&self, mut plan: PodPlan) -> Result<()> {
        let creates = std::mem::take(&mut plan.after.creates);
        let pod = plan.after.pod.take();
        let result = self.parts.executor.execute(plan).await;
        self.count(pod.as_deref(), &creates);
        match result {
            Ok(after) => after.failure.map_or(Ok(()), Err),
            Err(error) => {
                let error = SyncError::from(error);
                let failed = creates.iter().find(|create| create.answer.failed());
                if let (Some(failed), Some(pod)) = (failed, &pod) {
                    self.parts.recorder.record(
                        &reference_of(pod.as_ref()),
                        EventType::Warning,
                        REASON_FAILED_CREATION,
                        format!("PodResourceClaim {}: {error}", failed.entry),
                    );
                }
                Err(error)
            }
        }
    }

    /// Counts the creates that were sent, by outcome, and logs those that
    /// went through.
    fn count(&self, pod: Option<&Pod>, creates: &[PlannedClaim]) {
        let pod = pod
            .map(|pod| ObjectKey::of(pod).to_string())
            .unwrap_or_default();
        for create in creates {
            if let Some(created) = create.answer.answered() {
                self.parts
                    .claim_metrics
                    .create_attempted(create.admin_access, false);
                tracing::info!(pod = %pod, entry = %create.entry, claim = %ObjectKey::of(created.as_ref()), "created ResourceClaim");
            } else if create.answer.failed() {
                self.parts
                    .claim_metrics
                    .create_attempted(create.admin_access, true);
            }
        }
    }

    /// Syncs the claim of `key`: decides (reading the pods its decision
    /// asks for), then carries the plan out.
    pub(super) async fn sync_claim(&self, key: &ObjectKey) -> Result<()> {
        let Some(claim) = self.parts.known.claims.get(key) else {
            tracing::debug!(claim = %key, "nothing to do for claim, it is gone");
            return Ok(());
        };
        let mut reads = PodReads::new();
        // Each round reads pods not read before, so the rounds end.
        let plan = loop {
            match self.parts.known.decide_claim(&claim, &reads)? {
                ClaimDecided::Plan(plan) => break plan,
                ClaimDecided::ReadPods(pods) => {
                    for pod in pods {
                        let read = self.get_pod(&pod).await?;
                        reads.insert(pod, read);
                    }
                }
            }
        };
        self.execute_claim(plan).await
    }

    /// Carries a claim's plan out; a claim it deleted leaves the claim
    /// cache at once, unless finalizers hold it (then the cache keeps it as
    /// the answer shows it, marked for deletion, so its sync can release
    /// it).
    async fn execute_claim(&self, mut plan: ClaimPlan) -> Result<()> {
        let deleted = plan.after.deleted.take();
        let result = self.parts.executor.execute(plan).await;
        if let Some(deleted) = deleted {
            self.forget(&deleted);
        }
        result.map(drop).map_err(SyncError::from)
    }

    /// Tells the claim cache of a delete that went through.
    fn forget(&self, deleted: &DeletedClaim) {
        let Some(held) = deleted.answer.answered() else {
            return;
        };
        tracing::info!(claim = %ObjectKey::of(deleted.claim.as_ref()), "deleted unused generated ResourceClaim");
        let cache = &self.parts.known.claims;
        match held {
            Some(held) => {
                cache.offer(Arc::clone(held));
            }
            None => cache.deleted(&deleted.claim),
        }
    }

    /// Reads a pod from the API server; `None` when it does not exist.
    async fn get_pod(&self, key: &ObjectKey) -> Result<Option<Pod>> {
        kube::Api::<Pod>::namespaced(self.parts.client.clone(), &key.namespace)
            .get_opt(&key.name)
            .await
            .map_err(|source| SyncError::api(format!("get pod {key}"), source))
    }
}
