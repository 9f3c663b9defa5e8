//! What one pod's ephemeral volumes need, decided from the stores alone:
//! a plan of the creates of their missing claims, in the order of the
//! pod's volumes, ending with a `FailedBinding` Warning on the pod at the
//! first volume that cannot have its claim (a claim of that name the pod
//! does not control, or no template). Sends nothing, awaits nothing.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};

use crate::ephemeral::claims::{self, EphemeralVolume};
use crate::runtime::events::EventType;
use crate::runtime::informer::{MemStore, StoreRef};
use crate::runtime::keys::ObjectKey;
use crate::runtime::plan::{Answer, Plan};

/// Reason of the Warning a pod gets when one of its ephemeral volumes
/// cannot have its claim (upstream's `events.FailedBinding`).
pub(crate) const FAILED_BINDING: &str = "FailedBinding";

/// The plan of one pod's decision.
pub(crate) type PodPlan = Plan<PodAfter>;

/// What the decision knows: the stores it reads.
#[derive(Clone)]
pub(crate) struct Known {
    /// Pods, filed by the claims they use.
    pub(crate) pods: Arc<MemStore<Pod>>,
    /// The process's one store of claims, which holds the answers to this
    /// controller's creates as soon as the API server gives them.
    pub(crate) claims: StoreRef<PersistentVolumeClaim>,
}

/// What follows a pod's plan, besides its steps.
#[derive(Debug, Default)]
pub(crate) struct PodAfter {
    /// What the sync comes to once every step went through.
    pub(crate) end: PodEnd,
    /// The claims the plan creates, in the order of its creates.
    pub(crate) creates: Vec<PlannedClaim>,
    /// The pod decided on, when it has claims to create: a create the API
    /// server refuses gets a Warning on it.
    pub(crate) pod: Option<Arc<Pod>>,
}

/// What a pod's sync comes to once its plan went through.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) enum PodEnd {
    /// The pod is gone.
    Gone,
    /// The pod is being deleted.
    Deleting,
    /// Every ephemeral volume has its claim (some made by the plan).
    #[default]
    Done,
    /// The volume cannot have its claim: the sync fails with `reason` (the
    /// plan's Warning says it on the pod).
    Refused {
        /// The pod's volume.
        volume: String,
        /// Why, in upstream's words.
        reason: String,
    },
}

/// A claim a plan creates, and what became of its create.
#[derive(Clone, Debug)]
pub(crate) struct PlannedClaim {
    /// The pod's volume the claim is for.
    pub(crate) volume: String,
    /// The claim.
    pub(crate) claim: ObjectKey,
    /// The create's answer.
    pub(crate) answer: Answer<Arc<PersistentVolumeClaim>>,
}

impl Known {
    /// The claim of `key`, as the claim store holds it.
    pub(crate) fn claim(&self, key: &ObjectKey) -> Option<Arc<PersistentVolumeClaim>> {
        self.claims.get(key)
    }

    /// Decides what the pod `key` needs: the creates of its ephemeral
    /// volumes' missing claims, up to the first volume that cannot have
    /// one (then a Warning on the pod, and the sync fails).
    pub(crate) fn decide_pod(&self, key: &ObjectKey) -> PodPlan {
        let mut plan = PodPlan::default();
        let Some(pod) = self.pods.get(key) else {
            tracing::debug!(pod = %key, "pod gone, nothing to do");
            plan.after.end = PodEnd::Gone;
            return plan;
        };
        if pod.metadata.deletion_timestamp.is_some() {
            tracing::debug!(pod = %key, "pod being deleted, nothing to do");
            plan.after.end = PodEnd::Deleting;
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
                plan.after.end = PodEnd::Refused {
                    volume: volume.volume.to_string(),
                    reason,
                };
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
        let answer = plan.create(claims::claim_for(pod.as_ref(), volume.volume, template));
        plan.after.creates.push(PlannedClaim {
            volume: volume.volume.to_string(),
            claim: key,
            answer,
        });
        plan.after.pod.get_or_insert_with(|| Arc::clone(pod));
        Ok(())
    }
}
