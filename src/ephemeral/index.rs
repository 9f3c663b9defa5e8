//! The pods by the claims their ephemeral volumes ask for (upstream's pod
//! PVC index, limited to ephemeral volumes): when a claim is deleted, the
//! pods that use it are found here and synced, so the claim is made again
//! while a pod still needs it.

use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::runtime::keys::ObjectKey;

/// Pod keys by claim key, and the reverse, kept in step.
#[derive(Debug, Default)]
pub(crate) struct PodsByClaim(Mutex<Maps>);

#[derive(Debug, Default)]
struct Maps {
    pods: HashMap<ObjectKey, HashSet<ObjectKey>>,
    claims: HashMap<ObjectKey, Vec<ObjectKey>>,
}

impl PodsByClaim {
    fn maps(&self) -> MutexGuard<'_, Maps> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records that `pod` asks for `claims` (none: forgets the pod).
    pub(crate) fn set(&self, pod: &ObjectKey, claims: Vec<ObjectKey>) {
        let mut maps = self.maps();
        maps.remove(pod);
        if claims.is_empty() {
            return;
        }
        for claim in &claims {
            maps.pods
                .entry(claim.clone())
                .or_default()
                .insert(pod.clone());
        }
        maps.claims.insert(pod.clone(), claims);
    }

    /// Forgets `pod`.
    pub(crate) fn remove(&self, pod: &ObjectKey) {
        self.maps().remove(pod);
    }

    /// The pods that ask for `claim`.
    pub(crate) fn pods_of(&self, claim: &ObjectKey) -> Vec<ObjectKey> {
        self.maps()
            .pods
            .get(claim)
            .map(|pods| pods.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Every pod that asks for a claim.
    pub(crate) fn pods(&self) -> Vec<ObjectKey> {
        self.maps().claims.keys().cloned().collect()
    }

    /// Keeps only the pods for which `keep` holds (after a relist: the
    /// pods still listed).
    pub(crate) fn retain(&self, keep: impl Fn(&ObjectKey) -> bool) {
        let gone: Vec<ObjectKey> = self
            .maps()
            .claims
            .keys()
            .filter(|pod| !keep(pod))
            .cloned()
            .collect();
        let mut maps = self.maps();
        for pod in &gone {
            maps.remove(pod);
        }
    }
}

impl Maps {
    fn remove(&mut self, pod: &ObjectKey) {
        for claim in self.claims.remove(pod).unwrap_or_default() {
            if let Some(pods) = self.pods.get_mut(&claim) {
                pods.remove(pod);
                if pods.is_empty() {
                    self.pods.remove(&claim);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str) -> ObjectKey {
        ObjectKey::new("ns", name)
    }

    #[test]
    fn claims_find_their_pods_until_the_pods_go() {
        let index = PodsByClaim::default();
        // "a-b" + volume "c" and "a" + volume "b-c" ask for the same name.
        index.set(&key("a-b"), vec![key("a-b-c")]);
        index.set(&key("a"), vec![key("a-b-c"), key("a-x")]);
        let mut pods = index.pods_of(&key("a-b-c"));
        pods.sort();
        assert_eq!(pods, [key("a"), key("a-b")]);
        index.set(&key("a"), vec![key("a-x")]);
        assert_eq!(index.pods_of(&key("a-b-c")), [key("a-b")]);
        index.retain(|pod| pod != &key("a-b"));
        assert_eq!(index.pods_of(&key("a-b-c")), []);
        index.remove(&key("a"));
        assert!(index.pods().is_empty());
        assert!(index.maps().pods.is_empty(), "no empty sets left behind");
    }
}
