//! The one door for the controller's API requests: creating claims (kept
//! in the claim cache at once, counted in upstream's create metrics),
//! recording claims in a pod's status, writing a claim's status or
//! finalizers, deleting a claim, and reading a pod the watch has not shown.
//! Every write is counted in `pv_controller_api_writes_total`.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Pod, PodResourceClaimStatus};
use k8s_openapi::api::resource::v1::ResourceClaim;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::{Api, Client};
use serde_json::json;

use crate::resourceclaim::claims::ClaimCache;
use crate::resourceclaim::error::{Result, SyncError};
use crate::resourceclaim::keys::ObjectKey;
use crate::resourceclaim::metrics::ClaimMetrics;
use crate::runtime::metrics::{Metrics, WriteOutcome};

/// Sends the controller's requests and keeps the claim cache up to date
/// with their answers.
#[derive(Clone)]
pub(crate) struct Writer {
    pub(crate) client: Client,
    pub(crate) claims: Arc<ClaimCache>,
    pub(crate) metrics: Arc<Metrics>,
    pub(crate) claim_metrics: ClaimMetrics,
}

fn outcome<T>(result: &std::result::Result<T, kube::Error>) -> WriteOutcome {
    match result {
        Ok(_) => WriteOutcome::Ok,
        Err(kube::Error::Api(status)) if status.code == 409 => WriteOutcome::Conflict,
        Err(_) => WriteOutcome::Error,
    }
}

impl Writer {
    fn claims_api(&self, namespace: &str) -> Api<ResourceClaim> {
        Api::namespaced(self.client.clone(), namespace)
    }

    fn count<T>(
        &self,
        resource: &str,
        verb: &str,
        sub: &str,
        r: &std::result::Result<T, kube::Error>,
    ) {
        self.metrics.api_write(resource, verb, sub, outcome(r));
    }

    /// Creates `claim` for `pod` and puts the answer into the claim cache,
    /// so the next sync sees it even before its watch event.
    pub(crate) async fn create_claim(
        &self,
        pod: &ObjectKey,
        claim: &ResourceClaim,
    ) -> Result<Arc<ResourceClaim>> {
        let result = self
            .claims_api(&pod.namespace)
            .create(&PostParams::default(), claim)
            .await;
        self.count("resourceclaims", "create", "", &result);
        self.claim_metrics.create_attempted(result.is_err());
        let created = Arc::new(result.map_err(|source| {
            let prefix = claim.metadata.generate_name.as_deref().unwrap_or_default();
            SyncError::api(format!("create ResourceClaim {prefix}"), source)
        })?);
        tracing::info!(pod = %pod, claim = ?created.metadata.name, "created ResourceClaim");
        self.claims.offer(Arc::clone(&created));
        Ok(created)
    }

    /// Records generated claims in `pod.status.resourceClaimStatuses`: the
    /// entries already there and the new ones (`entry name → claim name`),
    /// in one merge patch of the status subresource.
    pub(crate) async fn record_claims(
        &self,
        pod: &Pod,
        new: &BTreeMap<String, String>,
    ) -> Result<()> {
        let key = ObjectKey::of(pod);
        // Entries without a claim ("no claim needed") keep their missing
        // name: k8s-openapi leaves `None` fields out.
        let mut entries: Vec<PodResourceClaimStatus> = pod
            .status
            .as_ref()
            .and_then(|status| status.resource_claim_statuses.as_deref())
            .unwrap_or_default()
            .iter()
            .filter(|status| !new.contains_key(&status.name))
            .cloned()
            .collect();
        entries.extend(new.iter().map(|(entry, claim)| PodResourceClaimStatus {
            name: entry.clone(),
            resource_claim_name: Some(claim.clone()),
        }));
        let patch = json!({ "status": { "resourceClaimStatuses": entries } });
        let result = Api::<Pod>::namespaced(self.client.clone(), &key.namespace)
            .patch_status(&key.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await;
        self.count("pods", "patch", "status", &result);
        result.map_err(|source| {
            SyncError::api(format!("update pod {key} ResourceClaimStatuses"), source)
        })?;
        Ok(())
    }

    /// Writes the claim's status (carrying its resourceVersion, so a claim
    /// changed meanwhile is a 409 and the sync is retried from fresh data).
    pub(crate) async fn write_status(&self, claim: &ResourceClaim) -> Result<Arc<ResourceClaim>> {
        let key = ObjectKey::of(claim);
        let result = self
            .claims_api(&key.namespace)
            .replace_status(&key.name, &PostParams::default(), claim)
            .await;
        self.count("resourceclaims", "update", "status", &result);
        let written = Arc::new(result.map_err(|source| {
            SyncError::api(format!("update status of ResourceClaim {key}"), source)
        })?);
        self.claims.offer(Arc::clone(&written));
        Ok(written)
    }

    /// Writes the claim itself (its finalizers), as [`Writer::write_status`].
    pub(crate) async fn write_claim(&self, claim: &ResourceClaim) -> Result<Arc<ResourceClaim>> {
        let key = ObjectKey::of(claim);
        let result = self
            .claims_api(&key.namespace)
            .replace(&key.name, &PostParams::default(), claim)
            .await;
        self.count("resourceclaims", "update", "", &result);
        let written = Arc::new(
            result
                .map_err(|source| SyncError::api(format!("update ResourceClaim {key}"), source))?,
        );
        self.claims.offer(Arc::clone(&written));
        Ok(written)
    }

    /// Deletes the claim with its UID as precondition, so a claim
    /// re-created under the same name is never deleted in its place. A
    /// claim already gone is no error.
    pub(crate) async fn delete_claim(&self, claim: &ResourceClaim) -> Result<()> {
        let key = ObjectKey::of(claim);
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid: claim.metadata.uid.clone(),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        let result = self
            .claims_api(&key.namespace)
            .delete(&key.name, &params)
            .await;
        self.count("resourceclaims", "delete", "", &result);
        match result {
            Ok(_) => {
                tracing::info!(claim = %key, "deleted unused generated ResourceClaim");
                self.claims.deleted(claim);
                Ok(())
            }
            Err(kube::Error::Api(status)) if status.code == 404 => {
                self.claims.deleted(claim);
                Ok(())
            }
            Err(source) => Err(SyncError::api(
                format!("delete ResourceClaim {key}"),
                source,
            )),
        }
    }

    /// Reads a pod from the API server; `None` when it does not exist.
    pub(crate) async fn get_pod(&self, key: &ObjectKey) -> Result<Option<Pod>> {
        Api::<Pod>::namespaced(self.client.clone(), &key.namespace)
            .get_opt(&key.name)
            .await
            .map_err(|source| SyncError::api(format!("get pod {key}"), source))
    }
}
