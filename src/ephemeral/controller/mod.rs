//! The decisions of the ephemeral volume controller: what one pod's
//! ephemeral volumes need, decided from the stores alone: a plan of the
//! creates of their missing claims, in the order of the pod's volumes,
//! ending at the first volume that cannot have its claim (a claim of that
//! name the pod does not control, or no template) with a `FailedBinding`
//! Warning on the pod, and the pod's turn failing (retried with backoff),
//! as upstream's. A create the API server refuses ends the plan too, with
//! the same Warning carrying the server's words.
//!
//! A claim this controller has just created is in the claim store as soon
//! as the API server answers the create (the write door puts it there), so
//! a pod decided again before the claim's watch event does not create it
//! twice and meet `AlreadyExists`.

#[cfg(test)]
mod tests;

use std::sync::Arc;

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};

use crate::ephemeral::claims::{self, EphemeralVolume};
use crate::runtime::events::EventType;
use crate::runtime::informer::{MemStore, StoreRef};
use crate::runtime::keys::ObjectKey;
use crate::runtime::plan::{Failure, IfFailed, Plan, Then, event};

/// Reason of the Warning a pod gets when one of its ephemeral volumes
/// cannot have its claim (upstream's `events.FailedBinding`).
pub(crate) const FAILED_BINDING: &str = "FailedBinding";

/// A create of a claim, as upstream's two counters count it.
#[derive(Debug)]
pub(crate) enum Counted {
    /// The claim was created.
    Created(ObjectKey),
    /// Its create failed.
    CreateFailed,
}

/// The plan of one pod's decision.
pub(crate) type PodPlan = Plan<Counted>;

/// What the decisions read: the stores.
#[derive(Clone)]
pub(crate) struct Known {
    /// Pods, filed by the claims they use.
    pub(crate) pods: Arc<MemStore<Pod>>,
    /// The process's one store of claims, which holds the answers to this
    /// controller's creates as soon as the API server gives them.
    pub(crate) claims: StoreRef<PersistentVolumeClaim>,
}

impl Known {
    /// The claim of `key`, as the claim store holds it.
    pub(crate) fn claim(&self, key: &ObjectKey) -> Option<Arc<PersistentVolumeClaim>> {
        self.claims.get(key)
    }

    /// Whether `pod` has a claim to create or a foreign claim in its way.
    pub(crate) fn needs_work(&self, pod: &Pod) -> bool {
        claims::needs_work(pod, |key| self.claim(key))
    }

    /// Decides what the pod `key` needs: the creates of its ephemeral
    /// volumes' missing claims, up to the first volume that cannot have
    /// one (then a Warning on the pod, and the turn fails). A pod gone or
    /// being deleted needs nothing (its claims go with it, by the garbage
    /// collector).
    pub(crate) fn decide_pod(&self, key: &ObjectKey) -> PodPlan {
        let mut plan = PodPlan::default();
        let Some(pod) = self.pods.get(key) else {
            tracing::debug!(pod = %key, "pod gone, nothing to do");
            return plan;
        };
        if pod.metadata.deletion_timestamp.is_some() {
            tracing::debug!(pod = %key, "pod being deleted, nothing to do");
            return plan;
        }
        for volume in claims::ephemeral_volumes(&pod) {
            if let Err(reason) = self.decide_volume(&mut plan, &pod, key, volume) {
                plan.event(
                    pod.as_ref(),
                    EventType::Warning,
                    FAILED_BINDING,
                    format!("ephemeral volume {}: {reason}", volume.volume),
                );
                plan.then(Then::Fail(Failure {
                    reason: format!("pod {key}, ephemeral volume {}: {reason}", volume.volume),
                    label: "failed",
                    expected: false,
                }));
                return plan;
            }
        }
        plan
    }

    /// Adds the create of `volume`'s claim when it is missing; why the
    /// volume cannot have its claim otherwise.
    fn decide_volume(
        &self,
        plan: &mut PodPlan,
        pod: &Arc<Pod>,
        pod_key: &ObjectKey,
        volume: EphemeralVolume<'_>,
    ) -> Result<(), String> {
        let key = ObjectKey::new(
            pod_key.namespace.clone(),
            claims::claim_name(pod, volume.volume),
        );
        if let Some(existing) = self.claim(&key) {
            return match claims::not_for_pod(pod, &existing) {
                Some(reason) => Err(reason),
                None => Ok(()),
            };
        }
        let Some(template) = volume.template else {
            return Err("no volumeClaimTemplate".to_string());
        };
        plan.create(claims::claim_for(pod.as_ref(), volume.volume, template));
        plan.if_failed(IfFailed::Warn(Box::new(event(
            pod.as_ref(),
            EventType::Warning,
            FAILED_BINDING,
            format!(
                "ephemeral volume {}: create PVC {}",
                volume.volume, key.name
            ),
        ))));
        plan.if_failed(IfFailed::Local(Counted::CreateFailed));
        plan.local(Counted::Created(key));
        Ok(())
    }
}
