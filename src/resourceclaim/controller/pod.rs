//! A pod's sync: each entry of `spec.resourceClaims` gets its claim, new
//! claims are recorded in the pod's status in one write, and a scheduled
//! pod's allocated claims are reserved for it.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Pod, PodResourceClaim};
use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceClaimConsumerReference};

use super::Controller;
use crate::resourceclaim::constants::{ANN_POD_CLAIM_NAME, REASON_FAILED_CREATION};
use crate::resourceclaim::error::{Result, SyncError};
use crate::resourceclaim::objects::{
    ClaimName, can_be_reserved, claim_from_template, claim_name, is_allocated, is_for_pod,
    is_pod_done, is_reserved_for_pod, node_name, pod_claims, requests_admin_access,
    requests_prioritized_list, uid,
};
use crate::runtime::events::{EventType, reference_of};
use crate::runtime::keys::ObjectKey;

impl Controller {
    /// Syncs the pod of `key`; a pod gone or being deleted needs nothing.
    pub(super) async fn sync_pod(&self, key: &ObjectKey) -> Result<()> {
        let Some(pod) = self.pod(key) else {
            tracing::debug!(pod = %key, "nothing to do for pod, it is gone");
            return Ok(());
        };
        if pod.metadata.deletion_timestamp.is_some() {
            tracing::debug!(pod = %key, "nothing to do for pod, it is marked for deletion");
            return Ok(());
        }
        if is_pod_done(&pod) {
            tracing::debug!(pod = %key, "nothing to do for pod, it is done");
            return Ok(());
        }
        let mut new = BTreeMap::new();
        for pod_claim in pod_claims(&pod) {
            if let Err(error) = self.ensure_claim(&pod, pod_claim, &mut new).await {
                self.parts.recorder.record(
                    &reference_of(pod.as_ref()),
                    EventType::Warning,
                    REASON_FAILED_CREATION,
                    format!("PodResourceClaim {}: {error}", pod_claim.name),
                );
                return Err(error);
            }
        }
        if !new.is_empty() {
            self.parts.writer.record_claims(&pod, &new).await?;
        }
        if node_name(&pod).is_empty() {
            // The scheduler reserves the claims of a pod it schedules.
            return Ok(());
        }
        self.reserve_for_scheduled(&pod).await
    }

    /// Makes sure the entry `pod_claim` has its claim; a claim created or
    /// adopted now goes into `new` for the status write.
    async fn ensure_claim(
        &self,
        pod: &Pod,
        pod_claim: &PodResourceClaim,
        new: &mut BTreeMap<String, String>,
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
                match self.parts.claims.get(&ObjectKey::new(&key.namespace, name)) {
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
            Some(claim) => claim,
            None => self.create_from_template(pod, pod_claim).await?,
        };
        new.insert(
            pod_claim.name.clone(),
            claim.metadata.name.clone().unwrap_or_default(),
        );
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
        self.parts
            .claims
            .owned_by(uid(&pod.metadata))
            .into_iter()
            .find(|claim| {
                claim
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(ANN_POD_CLAIM_NAME))
                    .is_some_and(|entry| *entry == pod_claim.name)
            })
    }

    /// Creates the entry's claim from its template, unless the template
    /// asks for what a feature gate switched off.
    async fn create_from_template(
        &self,
        pod: &Pod,
        pod_claim: &PodResourceClaim,
    ) -> Result<Arc<ResourceClaim>> {
        let key = ObjectKey::of(pod);
        let template_name = pod_claim
            .resource_claim_template_name
            .clone()
            .unwrap_or_default();
        let template = self
            .parts
            .templates
            .get(&ObjectKey::new(&key.namespace, &template_name))
            .ok_or_else(|| SyncError::MissingTemplate(template_name.clone()))?;
        let features = self.parts.features;
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
        self.parts.writer.create_claim(&key, &claim).await
    }

    /// Reserves for a scheduled pod each of its allocated claims that is
    /// not reserved for it yet and has room.
    async fn reserve_for_scheduled(&self, pod: &Pod) -> Result<()> {
        let key = ObjectKey::of(pod);
        for pod_claim in pod_claims(pod) {
            let name = claim_name(pod, pod_claim);
            let Some(claim_name) = name.name() else {
                continue;
            };
            let Some(claim) = self
                .parts
                .claims
                .get(&ObjectKey::new(&key.namespace, claim_name))
            else {
                return Ok(());
            };
            if name.must_check_owner() && !is_for_pod(pod, &claim) {
                continue;
            }
            if is_allocated(&claim) && !is_reserved_for_pod(pod, &claim) && can_be_reserved(&claim)
            {
                let mut reserved = claim.as_ref().clone();
                let basis = Arc::clone(&claim);
                reserved
                    .status
                    .get_or_insert_with(Default::default)
                    .reserved_for
                    .get_or_insert_with(Vec::new)
                    .push(ResourceClaimConsumerReference {
                        api_group: None,
                        resource: "pods".to_string(),
                        name: key.name.clone(),
                        uid: uid(&pod.metadata).to_string(),
                    });
                tracing::info!(pod = %key, claim = claim_name, "reserving claim for pod");
                self.parts.writer.write_status(&basis, reserved).await?;
            }
        }
        Ok(())
    }
}
