//! The claims that found no volume and wait for one to become free, and
//! what the wiring does with a decision's [`Next`].
//!
//! A claim that finds no match is remembered, and synced again as soon as a
//! volume becomes free (the shadow cache reports it, whoever freed it),
//! instead of at the next resync. Each time, the waiting set is emptied into
//! the claim queue, in binding order, and an epoch advances; a claim whose
//! sync began before that and ends waiting is queued again at once, so a
//! volume freed while the claim's search runs is never missed.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crate::pv::cache::ShadowCache;
use crate::pv::controller::{Next, binding_order};
use crate::runtime::keys::ObjectKey;
use crate::runtime::queue::WorkQueue;

/// The waiting claims and the epoch of volumes becoming free.
#[derive(Debug, Default)]
struct State {
    claims: HashSet<ObjectKey>,
    epoch: u64,
}

/// Acts on what the decisions say should follow. Cheap to clone.
#[derive(Clone)]
pub(super) struct FollowUp {
    state: Arc<Mutex<State>>,
    claim_queue: WorkQueue<ObjectKey>,
    cache: Arc<ShadowCache>,
}

impl FollowUp {
    pub(super) fn new(claim_queue: WorkQueue<ObjectKey>, cache: Arc<ShadowCache>) -> Self {
        Self {
            state: Arc::default(),
            claim_queue,
            cache,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The epoch to note when a claim's sync begins.
    pub(super) fn epoch(&self) -> u64 {
        self.lock().epoch
    }

    /// Queues the claims `next` names.
    pub(super) fn apply(&self, next: Next) {
        for key in next.sync_claims {
            self.claim_queue.add(key);
        }
    }

    /// A volume became free for every claim: every waiting claim is queued,
    /// the pickiest and largest first ([`binding_order`]).
    pub(super) fn volume_freed(&self) {
        let waiting = {
            let mut state = self.lock();
            state.epoch += 1;
            std::mem::take(&mut state.claims)
        };
        if waiting.is_empty() {
            return;
        }
        tracing::debug!(
            claims = waiting.len(),
            "a volume became free, retrying the claims that wait for one"
        );
        let claims = waiting.iter().filter_map(|key| self.cache.claim(key));
        for key in binding_order(claims) {
            self.claim_queue.add(key);
        }
    }

    /// After the sync of `key` that began at `began`: a claim that waits
    /// joins the waiting set, or is queued again at once when a volume
    /// became free meanwhile; a claim that does not wait leaves it.
    pub(super) fn claim_synced(&self, key: &ObjectKey, waits: bool, began: u64) {
        let requeue = {
            let mut state = self.lock();
            if !waits {
                state.claims.remove(key);
                false
            } else if state.epoch != began {
                true
            } else {
                state.claims.insert(key.clone());
                false
            }
        };
        if requeue {
            self.claim_queue.add(key.clone());
        }
    }

    /// A claim was deleted: it waits no more.
    pub(super) fn forget(&self, key: &ObjectKey) {
        self.lock().claims.remove(key);
    }

    /// How many claims wait for a volume.
    pub(super) fn waiting(&self) -> usize {
        self.lock().claims.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str) -> ObjectKey {
        ObjectKey::new("ns", name)
    }

    /// A cache holding 1Gi claims of these names in "ns".
    fn cache_with(names: &[&str]) -> Arc<ShadowCache> {
        let cache = Arc::new(ShadowCache::default());
        for name in names {
            let claim = testkit::claim(name, "", "1Gi").namespace("ns").arc();
            cache.offer_claim(claim).expect("cached");
        }
        cache
    }

    async fn drain(queue: &WorkQueue<ObjectKey>) -> Vec<ObjectKey> {
        let mut keys = vec![];
        while !queue.is_empty() {
            if let Some(key) = queue.get().await {
                queue.done(&key);
                keys.push(key);
            }
        }
        keys.sort();
        keys
    }

    #[tokio::test]
    async fn a_volume_becoming_available_wakes_every_waiting_claim_once() {
        let queue = WorkQueue::new();
        let follow = FollowUp::new(queue.clone(), cache_with(&["a", "b", "c"]));
        for name in ["a", "b"] {
            let began = follow.epoch();
            follow.claim_synced(&key(name), true, began);
        }
        assert_eq!(follow.waiting(), 2);
        assert!(drain(&queue).await.is_empty());
        follow.volume_freed();
        assert_eq!(drain(&queue).await, vec![key("a"), key("b")]);
        assert_eq!(follow.waiting(), 0);
        follow.volume_freed();
        assert!(drain(&queue).await.is_empty(), "no one waits any more");
    }

    #[tokio::test]
    async fn a_volume_available_during_the_search_is_not_missed() {
        let queue = WorkQueue::new();
        let follow = FollowUp::new(queue.clone(), cache_with(&["a", "b", "c"]));
        let began = follow.epoch();
        follow.volume_freed();
        follow.claim_synced(&key("a"), true, began);
        assert_eq!(drain(&queue).await, vec![key("a")], "queued again at once");
        assert_eq!(follow.waiting(), 0);
    }

    #[tokio::test]
    async fn bound_and_deleted_claims_wait_no_more() {
        let follow = FollowUp::new(WorkQueue::new(), Arc::default());
        follow.claim_synced(&key("a"), true, 0);
        follow.claim_synced(&key("b"), true, 0);
        follow.claim_synced(&key("a"), false, 0);
        follow.forget(&key("b"));
        assert_eq!(follow.waiting(), 0);
    }

    #[tokio::test]
    async fn claims_named_by_a_decision_are_queued() {
        let queue = WorkQueue::new();
        let follow = FollowUp::new(queue.clone(), cache_with(&["a", "b", "c"]));
        follow.apply(Next {
            sync_claims: vec![key("c")],
            ..Next::default()
        });
        assert_eq!(drain(&queue).await, vec![key("c")]);
    }
}
