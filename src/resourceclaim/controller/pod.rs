//! A pod's decision: each entry of `spec.resourceClaims` gets its claim
//! (found among the claims the pod controls, or created from the entry's
//! template), the new claims are recorded in the pod's status in one
//! apply, and a scheduled pod's allocated claims are reserved for it.
//! Sends nothing, awaits nothing: the plan says it, in that order.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Pod, PodResourceClaim};
use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceClaimConsumerReference};

use super::changes::{self, NewClaim, RecordClaims};
use super::{Counted, Known, PodPlan};
use crate::resourceclaim::constants::{FIELD_MANAGER, REASON_FAILED_CREATION};
use crate::resourceclaim::error::{Result, SyncError};
use crate::resourceclaim::objects::{
    ClaimName, can_be_reserved, claim_from_template, claim_name, is_allocated, is_for_pod,
    is_pod_done, is_reserved_for_pod, node_name, pod_claims, requests_admin_access,
    requests_prioritized_list, uid,
};
use crate::runtime::events::EventType;
use crate::runtime::informer::Store;
use crate::runtime::keys::ObjectKey;
use crate::runtime::plan::{IfFailed, Then, event};
use k8s_names::ANN_POD_CLAIM_NAME;

impl Known {
    /// Decides about the pod of `key`; a pod gone, being deleted or done
    /// needs nothing. An entry that cannot have its claim ends the plan
    /// with a Warning on the pod, and the pod's turn fails with it.
    pub(crate) fn decide_pod(&self, key: &ObjectKey) -> PodPlan {
        let mut plan = PodPlan::default();
        let Some(pod) = self.pods.get(key) else {
            tracing::debug!(pod = %key, "nothing to do for pod, it is gone");
            return plan;
        };
        if pod.metadata.deletion_timestamp.is_some() {
            tracing::debug!(pod = %key, "nothing to do for pod, it is marked for deletion");
            return plan;
        }
        if is_pod_done(&pod) {
            tracing::debug!(pod = %key, "nothing to do for pod, it is done");
            return plan;
        }
        let mut new = BTreeMap::new();
        for pod_claim in pod_claims(&pod) {
            if let Err(error) = self.ensure_claim(&mut plan, &pod, pod_claim, &mut new) {
                plan.event(
                    pod.as_ref(),
                    EventType::Warning,
                    REASON_FAILED_CREATION,
                    format!("PodResourceClaim {}: {error}", pod_claim.name),
                );
                plan.then(Then::Fail(error.failure()));
                return plan;
            }
        }
        if !new.is_empty() {
            plan.apply_status::<Pod>(key.clone(), FIELD_MANAGER, RecordClaims::new(&pod, new));
        }
        if !node_name(&pod).is_empty() {
            // The scheduler reserves the claims of a pod it schedules; a
            // pod scheduled already gets them here.
            self.reserve_for_scheduled(&mut plan, &pod);
        }
        plan
    }

    /// Makes sure the entry `pod_claim` has its claim; a claim found or
    /// created now goes into `new` for the status apply.
    fn ensure_claim(
        &self,
        plan: &mut PodPlan,
        pod: &Pod,
        pod_claim: &PodResourceClaim,
        new: &mut BTreeMap<String, NewClaim>,
    ) -> Result<()> {
        let key = ObjectKey::of(pod);
        match claim_name(pod, pod_claim) {
            ClaimName::Unsupported => {
                return Err(SyncError::Unsupported {
                    pod: key,
                    entry: pod_claim.name.clone(),
                });
            }
            // A user's claim is the user's to create; no claim needed is
            // recorded as such and left alone.
            ClaimName::Named(_) | ClaimName::NotNeeded => return Ok(()),
            ClaimName::Generated(name) => {
                match self.claims.get(&ObjectKey::new(&key.namespace, name)) {
                    Some(claim) if is_for_pod(pod, &claim) => return Ok(()),
                    Some(_) => tracing::warn!(
                        pod = %key, entry = %pod_claim.name, claim = name,
                        "the claim recorded for the pod is not owned by it, creating a new one"
                    ),
                    // Deleted by someone: made again below.
                    None => {}
                }
            }
            ClaimName::NotRecorded => {}
        }
        let claim = match self.find_generated(pod, pod_claim) {
            Some(claim) => NewClaim::Found(claim.metadata.name.clone().unwrap_or_default()),
            None => self.create_from_template(plan, pod, pod_claim)?,
        };
        new.insert(pod_claim.name.clone(), claim);
        Ok(())
    }

    /// A claim the pod controls that was generated for this entry, by its
    /// annotation (a claim without one is not the entry's, whatever its
    /// name). Includes claims just created whose watch event has not come
    /// yet.
    fn find_generated(
        &self,
        pod: &Pod,
        pod_claim: &PodResourceClaim,
    ) -> Option<Arc<ResourceClaim>> {
        self.claims.owned_by(pod).into_iter().find(|claim| {
            claim
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(ANN_POD_CLAIM_NAME))
                .is_some_and(|entry| *entry == pod_claim.name)
        })
    }

    /// Adds the create of the entry's claim from its template, unless the
    /// template is missing or asks for what a feature gate switched off.
    fn create_from_template(
        &self,
        plan: &mut PodPlan,
        pod: &Pod,
        pod_claim: &PodResourceClaim,
    ) -> Result<NewClaim> {
        let key = ObjectKey::of(pod);
        let template_name = pod_claim
            .resource_claim_template_name
            .clone()
            .unwrap_or_default();
        let template = self
            .templates
            .get(&ObjectKey::new(&key.namespace, &template_name))
            .ok_or_else(|| SyncError::MissingTemplate(template_name.clone()))?;
        let features = self.features;
        if !features.admin_access && requests_admin_access(&template.spec.spec) {
            return Err(SyncError::FeatureDisabled(
                "admin access is requested, but the feature is disabled",
            ));
        }
        if !features.prioritized_list && requests_prioritized_list(&template.spec.spec) {
            return Err(SyncError::FeatureDisabled(
                "template includes a prioritized list of subrequests, but the feature is disabled",
            ));
        }
        let claim = claim_from_template(pod, pod_claim, &template);
        let prefix = claim.metadata.generate_name.clone().unwrap_or_default();
        let admin_access = requests_admin_access(&claim.spec);
        let answer = plan.create(claim);
        plan.if_failed(IfFailed::Warn(Box::new(event(
            pod,
            EventType::Warning,
            REASON_FAILED_CREATION,
            format!(
                "PodResourceClaim {}: create ResourceClaim {prefix}",
                pod_claim.name
            ),
        ))));
        plan.if_failed(IfFailed::Local(Counted::CreateFailed { admin_access }));
        plan.local(Counted::Created {
            admin_access,
            pod: key,
            entry: pod_claim.name.clone(),
        });
        Ok(NewClaim::Created { prefix, answer })
    }

    /// Adds, for a scheduled pod, the reservation of each of its allocated
    /// claims that is not reserved for it yet and has room.
    fn reserve_for_scheduled(&self, plan: &mut PodPlan, pod: &Pod) {
        let key = ObjectKey::of(pod);
        for pod_claim in pod_claims(pod) {
            let name = claim_name(pod, pod_claim);
            let Some(claim_name) = name.name() else {
                continue;
            };
            let Some(claim) = self.claims.get(&ObjectKey::new(&key.namespace, claim_name)) else {
                return;
            };
            if name.must_check_owner() && !is_for_pod(pod, &claim) {
                continue;
            }
            if is_allocated(&claim) && !is_reserved_for_pod(pod, &claim) && can_be_reserved(&claim)
            {
                tracing::info!(pod = %key, claim = claim_name, "reserving claim for pod");
                let consumer = ResourceClaimConsumerReference {
                    api_group: None,
                    resource: "pods".to_string(),
                    name: key.name.clone(),
                    uid: uid(&pod.metadata).to_string(),
                };
                changes::reserve(plan, &claim, consumer);
            }
        }
    }
}
