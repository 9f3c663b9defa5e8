//! The controller's requests, through the process's one write door:
//! creating claims (kept in the claim cache at once, counted in upstream's
//! create metrics), recording claims in a pod's status, writing a claim's
//! status or finalizers, deleting a claim, and reading a pod the watch has
//! not shown.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::ResourceClaim;
use kube::Client;
use serde_json::json;

use crate::resourceclaim::claims::ClaimCache;
use crate::resourceclaim::constants::FIELD_MANAGER;
use crate::resourceclaim::error::{Result, SyncError};
use crate::resourceclaim::metrics::ClaimMetrics;
use crate::resourceclaim::objects::requests_admin_access;
use crate::runtime::keys::ObjectKey;
use crate::runtime::write::{Edit, Part, Writer};

/// Sends the controller's requests and keeps the claim cache up to date
/// with their answers.
#[derive(Clone)]
pub(crate) struct Writes {
    /// For reads of pods the watch has not shown.
    pub(crate) client: Client,
    /// Claims, through the door.
    pub(crate) claims: Writer<ResourceClaim>,
    /// Pod statuses, through the door.
    pub(crate) pods: Writer<Pod>,
    /// The claim cache (which the door stores answers into), for deletes.
    pub(crate) cache: Arc<ClaimCache>,
    /// Upstream's create counters.
    pub(crate) claim_metrics: ClaimMetrics,
}

impl Writes {
    /// Creates `claim` for `pod`; the answer goes into the claim cache, so
    /// the next sync sees it even before its watch event.
    pub(crate) async fn create_claim(
        &self,
        pod: &ObjectKey,
        claim: &ResourceClaim,
    ) -> Result<Arc<ResourceClaim>> {
        let result = self.claims.create(claim).await;
        self.claim_metrics
            .create_attempted(requests_admin_access(&claim.spec), result.is_err());
        let created = result?;
        tracing::info!(pod = %pod, claim = ?created.metadata.name, "created ResourceClaim");
        Ok(created)
    }

    /// Records generated claims in `pod.status.resourceClaimStatuses` by
    /// server-side apply as `ResourceClaimController` (upstream's field
    /// manager): the entries already there that name a claim, and the new
    /// ones (`entry name → claim name`), by name. Applying all of them, not
    /// just the new ones, keeps an entry this manager applied earlier from
    /// being dropped by the next apply.
    pub(crate) async fn record_claims(
        &self,
        pod: &Pod,
        new: &BTreeMap<String, String>,
    ) -> Result<()> {
        let key = ObjectKey::of(pod);
        let mut entries: BTreeMap<&str, &str> = pod
            .status
            .as_ref()
            .and_then(|status| status.resource_claim_statuses.as_deref())
            .unwrap_or_default()
            .iter()
            .filter_map(|status| {
                Some((status.name.as_str(), status.resource_claim_name.as_deref()?))
            })
            .collect();
        entries.extend(
            new.iter()
                .map(|(entry, claim)| (entry.as_str(), claim.as_str())),
        );
        let statuses: Vec<serde_json::Value> = entries
            .into_iter()
            .map(|(entry, claim)| json!({ "name": entry, "resourceClaimName": claim }))
            .collect();
        let applied = json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": { "name": key.name, "namespace": key.namespace },
            "status": { "resourceClaimStatuses": statuses },
        });
        self.pods
            .apply_status(&key, FIELD_MANAGER, &applied)
            .await?;
        Ok(())
    }

    /// Writes `part` of `changed`, a changed copy of the claim `basis`,
    /// unless the claim changed since the sync read it (then the sync is
    /// retried from fresh data, as a 409 would make it).
    async fn replace(
        &self,
        basis: &Arc<ResourceClaim>,
        part: Part,
        changed: ResourceClaim,
    ) -> Result<Arc<ResourceClaim>> {
        let read = basis.metadata.resource_version.clone();
        let written = self
            .claims
            .update(basis, part, move |newest| {
                if newest.metadata.resource_version != read {
                    return Edit::Refused("changed since the sync read it".to_string());
                }
                *newest = changed;
                Edit::Changed
            })
            .await?;
        Ok(written)
    }

    /// Writes the claim's status from `changed`, a copy of `basis`.
    pub(crate) async fn write_status(
        &self,
        basis: &Arc<ResourceClaim>,
        changed: ResourceClaim,
    ) -> Result<Arc<ResourceClaim>> {
        self.replace(basis, Part::Status, changed).await
    }

    /// Writes the claim itself (its finalizers) from `changed`, a copy of
    /// `basis`.
    pub(crate) async fn write_claim(
        &self,
        basis: &Arc<ResourceClaim>,
        changed: ResourceClaim,
    ) -> Result<Arc<ResourceClaim>> {
        self.replace(basis, Part::Spec, changed).await
    }

    /// Deletes the claim with its UID as precondition, so a claim
    /// re-created under the same name is never deleted in its place. A
    /// claim already gone is no error. A claim a finalizer holds stays in
    /// the cache as the answer shows it, marked for deletion, so its sync
    /// can release it; any other leaves the cache at once.
    pub(crate) async fn delete_claim(&self, claim: &ResourceClaim) -> Result<()> {
        let key = ObjectKey::of(claim);
        let held = self
            .claims
            .delete(&key, claim.metadata.uid.as_deref())
            .await?;
        tracing::info!(claim = %key, "deleted unused generated ResourceClaim");
        match held {
            Some(held) => {
                self.cache.offer(Arc::new(held));
            }
            None => self.cache.deleted(claim),
        }
        Ok(())
    }

    /// Reads a pod from the API server; `None` when it does not exist.
    pub(crate) async fn get_pod(&self, key: &ObjectKey) -> Result<Option<Pod>> {
        kube::Api::<Pod>::namespaced(self.client.clone(), &key.namespace)
            .get_opt(&key.name)
            .await
            .map_err(|source| SyncError::api(format!("get pod {key}"), source))
    }
}
