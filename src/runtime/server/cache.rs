//! A small cache of review answers that forgets: each answer is kept for
//! its own time to live, concurrent asks for one key wait for one answer
//! (a burst of scrapes makes one review, not a hundred), failures are not
//! kept, and the number of keys is bounded (forged tokens cannot grow it
//! without end). On tokio's clock, so paused time drives it in tests.

use std::collections::HashMap;
use std::future::Future;
use std::hash::Hash;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::OnceCell;
use tokio::time::Instant;

/// An answer and until when it holds.
type Slot<V> = Arc<OnceCell<(V, Instant)>>;

/// Answers by key, each until it expires.
#[derive(Debug)]
pub(crate) struct ExpiringCache<K, V> {
    slots: Mutex<HashMap<K, Slot<V>>>,
    capacity: usize,
}

impl<K: Eq + Hash + Clone, V: Clone> ExpiringCache<K, V> {
    /// A cache of at most `capacity` keys.
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            slots: Mutex::default(),
            capacity: capacity.max(1),
        }
    }

    /// The answer for `key`: the kept one while it holds, else the one
    /// `ask` gives with its time to live (`ask` runs once for all who ask
    /// at the same time; its failure is returned and not kept).
    pub(crate) async fn get_or_ask<E, F>(&self, key: K, ask: impl FnOnce() -> F) -> Result<V, E>
    where
        F: Future<Output = Result<(V, Duration), E>>,
    {
        let slot = self.slot(key);
        let (value, _) = slot
            .get_or_try_init(|| async {
                let (value, ttl) = ask().await?;
                Ok::<_, E>((value, Instant::now() + ttl))
            })
            .await?;
        Ok(value.clone())
    }

    /// The slot of `key`: the present one unless its answer expired, else a
    /// new empty one (making room when the cache is full).
    fn slot(&self, key: K) -> Slot<V> {
        let now = Instant::now();
        let mut slots = self
            .slots
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let fresh = |slot: &Slot<V>| slot.get().is_none_or(|(_, until)| *until > now);
        if let Some(slot) = slots.get(&key).filter(|slot| fresh(slot)) {
            return Arc::clone(slot);
        }
        if slots.len() >= self.capacity {
            slots.retain(|_, slot| slot.get().is_some_and(|(_, until)| *until > now));
            if slots.len() >= self.capacity {
                let victim = slots.keys().next().cloned();
                if let Some(victim) = victim {
                    slots.remove(&victim);
                }
            }
        }
        let slot = Slot::default();
        slots.insert(key, Arc::clone(&slot));
        slot
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    async fn ask(
        asked: &AtomicUsize,
        answer: Result<u32, &'static str>,
    ) -> Result<(u32, Duration), &'static str> {
        asked.fetch_add(1, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(10)).await;
        answer.map(|v| (v, Duration::from_secs(10)))
    }

    #[tokio::test(start_paused = true)]
    async fn one_ask_for_a_burst_and_again_after_expiry() {
        let cache = ExpiringCache::new(8);
        let asked = AtomicUsize::new(0);
        let burst = (0..100).map(|_| cache.get_or_ask("k", || ask(&asked, Ok(1))));
        let answers = futures::future::join_all(burst).await;
        assert!(answers.iter().all(|a| *a == Ok(1)));
        assert_eq!(asked.load(Ordering::SeqCst), 1);
        tokio::time::sleep(Duration::from_secs(11)).await;
        assert_eq!(cache.get_or_ask("k", || ask(&asked, Ok(2))).await, Ok(2));
        assert_eq!(asked.load(Ordering::SeqCst), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn failures_are_not_kept_and_the_size_is_bounded() {
        let cache = ExpiringCache::new(2);
        let asked = AtomicUsize::new(0);
        assert_eq!(
            cache.get_or_ask("k", || ask(&asked, Err("down"))).await,
            Err("down")
        );
        assert_eq!(cache.get_or_ask("k", || ask(&asked, Ok(3))).await, Ok(3));
        assert_eq!(asked.load(Ordering::SeqCst), 2);
        for key in ["a", "b", "c", "d"] {
            cache.get_or_ask(key, || ask(&asked, Ok(0))).await.unwrap();
        }
        assert!(cache.slots.lock().unwrap().len() <= 2);
    }
}
