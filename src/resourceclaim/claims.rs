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

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};

use k8s_openapi::api::resource::v1::ResourceClaim;

use super::objects::owner_pod_uids;
use crate::runtime::informer::{Store, StoreError};
use crate::runtime::keys::ObjectKey;
use crate::runtime::version::{Age, age};

/// Claims by key, and the keys of the claims each pod controls.
#[derive(Debug, Default)]
pub(crate) struct ClaimStore {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    claims: BTreeMap<ObjectKey, Arc<ResourceClaim>>,
    by_owner: HashMap<String, BTreeSet<ObjectKey>>,
    /// UIDs (and keys) of claims this controller deleted whose deletion the
    /// watch has not shown yet: their late versions from before the delete
    /// are not taken back in, so a claim is not deleted twice. A version
    /// marked for deletion is taken in: a finalizer holds the claim, and
    /// its sync must remove it.
    deleted: HashMap<String, ObjectKey>,
}

impl ClaimStore {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock leaves consistent maps behind:
        // every update is a few inserts and removes.
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Offers a claim seen on the watch or returned by a write; it is kept
    /// unless the store holds a newer version. Returns whether it was kept.
    pub(crate) fn offer(&self, claim: Arc<ResourceClaim>) -> bool {
        let key = ObjectKey::of(claim.as_ref());
        let mut inner = self.lock();
        if claim.metadata.deletion_timestamp.is_none()
            && claim
                .metadata
                .uid
                .as_ref()
                .is_some_and(|uid| inner.deleted.contains_key(uid))
        {
            return false;
        }
        if let Some(held) = inner.claims.get(&key)
            && age(&held.metadata, &claim.metadata) == Age::Older
        {
            return false;
        }
        inner.unindex(&key);
        for owner in owner_pod_uids(&claim) {
            inner
                .by_owner
                .entry(owner.to_string())
                .or_default()
                .insert(key.clone());
        }
        inner.claims.insert(key, claim);
        true
    }

    /// Forgets a claim the watch shows gone, and the deletions of this
    /// controller under its key (the watch has shown them now); returns its
    /// last known version.
    pub(crate) fn remove(&self, key: &ObjectKey) -> Option<Arc<ResourceClaim>> {
        let mut inner = self.lock();
        inner.deleted.retain(|_, deleted| deleted != key);
        inner.unindex(key);
        inner.claims.remove(key)
    }

    /// The newest known version of a claim.
    pub(crate) fn get(&self, key: &ObjectKey) -> Option<Arc<ResourceClaim>> {
        self.lock().claims.get(key).cloned()
    }

    /// The claims the pod with this UID controls.
    pub(crate) fn owned_by(&self, pod_uid: &str) -> Vec<Arc<ResourceClaim>> {
        let inner = self.lock();
        inner
            .by_owner
            .get(pod_uid)
            .into_iter()
            .flatten()
            .filter_map(|key| inner.claims.get(key).cloned())
            .collect()
    }

    /// Every stored claim's key, in order.
    pub(crate) fn keys(&self) -> Vec<ObjectKey> {
        self.lock().claims.keys().cloned().collect()
    }

    /// How many claims there are of each kind `kind_of` tells apart.
    pub(crate) fn count_by<T: Ord>(
        &self,
        kind_of: impl Fn(&ResourceClaim) -> T,
    ) -> BTreeMap<T, usize> {
        let inner = self.lock();
        let mut counts = BTreeMap::new();
        for claim in inner.claims.values() {
            *counts.entry(kind_of(claim)).or_insert(0) += 1;
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

    fn forget(&self, key: &ObjectKey) -> Option<Arc<ResourceClaim>> {
        self.remove(key)
    }

    /// Forgets a claim this controller has just deleted (and that is gone
    /// at once: no finalizer held it), and keeps its versions from before
    /// the delete, still on the way, from bringing it back.
    fn deleted_by_write(&self, key: &ObjectKey, uid: Option<&str>) {
        let mut inner = self.lock();
        let held = inner
            .claims
            .get(key)
            .is_some_and(|held| held.metadata.uid.as_deref() == uid);
        if !held {
            // Gone already (the watch showed the deletion first), or another
            // claim of that name: nothing of this one to keep out.
            return;
        }
        inner.unindex(key);
        inner.claims.remove(key);
        if let Some(uid) = uid {
            inner.deleted.insert(uid.to_string(), key.clone());
        }
    }

    fn get(&self, key: &ObjectKey) -> Option<Arc<ResourceClaim>> {
        ClaimStore::get(self, key)
    }

    fn keys(&self) -> Vec<ObjectKey> {
        ClaimStore::keys(self)
    }
}

impl Inner {
    fn unindex(&mut self, key: &ObjectKey) {
        let Some(old) = self.claims.get(key) else {
            return;
        };
        let owners: Vec<String> = owner_pod_uids(old).map(str::to_string).collect();
        for owner in owners {
            if let Some(keys) = self.by_owner.get_mut(&owner) {
                keys.remove(key);
                if keys.is_empty() {
                    self.by_owner.remove(&owner);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
