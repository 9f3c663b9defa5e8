//! The controller's view of ResourceClaims: the newest version of each
//! claim seen on the watch *or* returned by its own create, indexed by the
//! pod that controls it.
//!
//! This is upstream's claim informer store, its mutation cache and its
//! claims-by-pod-owner index in one structure: the process's one store of
//! ResourceClaims. A claim the controller has
//! just created is visible to the next sync before its watch event
//! arrives, so a pod whose status update failed after the create is
//! retried without creating a second claim: the retry finds the claim by
//! its owner and annotation. Versions are ordered by resourceVersion (an
//! older watch event never replaces a newer created object).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::ResourceClaim;

use super::objects::{owning_pod, uid};
use crate::runtime::informer::{MemStore, Store, StoreError};
use crate::runtime::keys::ObjectKey;

/// The name of the claim index by the pod that controls each claim (a
/// pod's claims live in its namespace).
const CLAIMS_BY_OWNER: &str = "claims-by-owner-pod";

/// Claims by key, filed by the pods that control them.
#[derive(Debug)]
pub(crate) struct ClaimStore {
    claims: MemStore<ResourceClaim>,
    /// UIDs (and keys) of claims this controller deleted whose deletion the
    /// watch has not shown yet: their late versions from before the delete
    /// are not taken back in, so a claim is not deleted twice. A version
    /// marked for deletion is taken in: a finalizer holds the claim, and
    /// its sync must remove it. Held across every change of `claims`, so
    /// that a change and a deletion never interleave.
    deleted: Mutex<HashMap<String, ObjectKey>>,
}

impl Default for ClaimStore {
    fn default() -> Self {
        let claims = MemStore::default();
        claims.add_index(CLAIMS_BY_OWNER, |claim: &ResourceClaim| {
            let namespace = claim.metadata.namespace.as_deref().unwrap_or_default();
            owning_pod(claim)
                .map(|(pod, _)| ObjectKey::new(namespace, pod))
                .into_iter()
                .collect()
        });
        Self {
            claims,
            deleted: Mutex::default(),
        }
    }
}

impl ClaimStore {
    fn deleted(&self) -> MutexGuard<'_, HashMap<String, ObjectKey>> {
        // A panic while holding the lock leaves a consistent map behind.
        self.deleted
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Offers a claim seen on the watch or returned by a write; it is kept
    /// unless the store holds a newer version. Returns whether it was kept.
    pub(crate) fn offer(&self, claim: Arc<ResourceClaim>) -> bool {
        let deleted = self.deleted();
        if claim.metadata.deletion_timestamp.is_none()
            && claim
                .metadata
                .uid
                .as_ref()
                .is_some_and(|uid| deleted.contains_key(uid))
        {
            return false;
        }
        self.claims.offer(claim)
    }

    /// The claims `pod` controls.
    pub(crate) fn owned_by(&self, pod: &Pod) -> Vec<Arc<ResourceClaim>> {
        let pod_uid = uid(&pod.metadata);
        let mut claims = self.claims.indexed(CLAIMS_BY_OWNER, &ObjectKey::of(pod));
        claims.retain(|claim| owning_pod(claim).is_some_and(|(_, owner)| owner == pod_uid));
        claims
    }

    /// How many claims there are of each kind `kind_of` tells apart.
    pub(crate) fn count_by<T: Ord>(
        &self,
        kind_of: impl Fn(&ResourceClaim) -> T,
    ) -> BTreeMap<T, usize> {
        let mut counts = BTreeMap::new();
        for claim in self.claims.list() {
            *counts.entry(kind_of(&claim)).or_insert(0) += 1;
        }
        counts
    }
}

impl Store<ResourceClaim> for ClaimStore {
    fn watched(&self, claim: &Arc<ResourceClaim>) {
        self.offer(Arc::clone(claim));
    }

    fn written(&self, claim: Arc<ResourceClaim>) -> Result<(), StoreError> {
        self.offer(claim);
        Ok(())
    }

    /// Forgets a claim the watch shows gone, and the deletions of this
    /// controller under its key (the watch has shown them now).
    fn forget(&self, key: &ObjectKey) -> Option<Arc<ResourceClaim>> {
        let mut deleted = self.deleted();
        deleted.retain(|_, deleted| deleted != key);
        self.claims.forget(key)
    }

    /// Forgets a claim this controller has just deleted (and that is gone
    /// at once: no finalizer held it), and keeps its versions from before
    /// the delete, still on the way, from bringing it back.
    fn deleted_by_write(&self, key: &ObjectKey, uid: Option<&str>) {
        let mut deleted = self.deleted();
        let held = self
            .claims
            .get(key)
            .is_some_and(|held| held.metadata.uid.as_deref() == uid);
        if !held {
            // Gone already (the watch showed the deletion first), or another
            // claim of that name: nothing of this one to keep out.
            return;
        }
        self.claims.forget(key);
        if let Some(uid) = uid {
            deleted.insert(uid.to_string(), key.clone());
        }
    }

    fn get(&self, key: &ObjectKey) -> Option<Arc<ResourceClaim>> {
        self.claims.get(key)
    }

    fn keys(&self) -> Vec<ObjectKey> {
        self.claims.keys()
    }
}

#[cfg(test)]
mod tests;
