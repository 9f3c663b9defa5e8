//! Review answers kept for a while, in a cache that forgets (moka): each
//! answer expires after its own time to live (an allowing and a denying
//! SubjectAccessReview are kept for different times), concurrent asks for
//! one key wait for one answer (a burst of scrapes makes one review, not a
//! hundred), failures are not kept, and the number of keys is bounded
//! (forged tokens cannot grow it without end).

use std::future::Future;
use std::hash::Hash;
use std::sync::Arc;
use std::time::{Duration, Instant};

use moka::Expiry;
use moka::future::Cache;

/// An answer and how long it holds.
#[derive(Clone, Debug)]
struct Timed<V> {
    value: V,
    ttl: Duration,
}

/// Expires each answer after its own time to live.
struct OwnTimeToLive;

impl<K, V> Expiry<K, Timed<V>> for OwnTimeToLive {
    fn expire_after_create(&self, _key: &K, answer: &Timed<V>, _now: Instant) -> Option<Duration> {
        Some(answer.ttl)
    }
}

/// Answers by key, each until it expires.
pub(crate) struct ReviewCache<K, V> {
    answers: Cache<K, Timed<V>>,
}

impl<K, V> ReviewCache<K, V>
where
    K: Eq + Hash + Send + Sync + 'static,
    V: Clone + Send + Sync + 'static,
{
    /// A cache of at most `capacity` keys.
    pub(crate) fn new(capacity: u64) -> Self {
        Self {
            answers: Cache::builder()
                .max_capacity(capacity)
                .expire_after(OwnTimeToLive)
                .build(),
        }
    }

    /// The answer for `key`: the kept one while it holds, else the one
    /// `ask` gives with its time to live (`ask` runs once for all who ask
    /// at the same time; its failure is returned to them all and not
    /// kept).
    pub(crate) async fn get_or_ask<E, F>(
        &self,
        key: K,
        ask: impl FnOnce() -> F,
    ) -> Result<V, Arc<E>>
    where
        F: Future<Output = Result<(V, Duration), E>>,
        E: Send + Sync + 'static,
    {
        let timed = self
            .answers
            .try_get_with(key, async move {
                let (value, ttl) = ask().await?;
                Ok::<_, E>(Timed { value, ttl })
            })
            .await?;
        Ok(timed.value)
    }

    /// How many answers are kept, once pending evictions are done.
    #[cfg(test)]
    async fn len(&self) -> u64 {
        self.answers.run_pending_tasks().await;
        self.answers.entry_count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    async fn ask(
        asked: &AtomicUsize,
        answer: Result<u32, &'static str>,
        ttl: Duration,
    ) -> Result<(u32, Duration), &'static str> {
        asked.fetch_add(1, Ordering::SeqCst);
        tokio::task::yield_now().await;
        answer.map(|v| (v, ttl))
    }

    const TEN_SECONDS: Duration = Duration::from_secs(10);

    #[tokio::test]
    async fn one_ask_for_a_burst_and_again_once_the_answer_expired() {
        let cache = ReviewCache::new(8);
        let asked = AtomicUsize::new(0);
        let burst = (0..100).map(|_| cache.get_or_ask("k", || ask(&asked, Ok(1), TEN_SECONDS)));
        let answers = futures::future::join_all(burst).await;
        assert!(answers.iter().all(|a| matches!(a, Ok(1))));
        assert_eq!(asked.load(Ordering::SeqCst), 1);
        assert!(matches!(
            cache
                .get_or_ask("k", || ask(&asked, Ok(2), TEN_SECONDS))
                .await,
            Ok(1)
        ));
        assert_eq!(asked.load(Ordering::SeqCst), 1, "kept for its ten seconds");

        // An answer kept for no time at all is asked for again.
        assert!(matches!(
            cache
                .get_or_ask("z", || ask(&asked, Ok(3), Duration::ZERO))
                .await,
            Ok(3)
        ));
        assert!(matches!(
            cache
                .get_or_ask("z", || ask(&asked, Ok(4), Duration::ZERO))
                .await,
            Ok(4)
        ));
        assert_eq!(asked.load(Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn failures_are_not_kept_and_the_size_is_bounded() {
        let cache = ReviewCache::new(2);
        let asked = AtomicUsize::new(0);
        let failed = cache
            .get_or_ask("k", || ask(&asked, Err("down"), TEN_SECONDS))
            .await;
        assert_eq!(failed.unwrap_err().as_ref(), &"down");
        assert!(matches!(
            cache
                .get_or_ask("k", || ask(&asked, Ok(3), TEN_SECONDS))
                .await,
            Ok(3)
        ));
        assert_eq!(asked.load(Ordering::SeqCst), 2);
        for key in ["a", "b", "c", "d", "e", "f"] {
            cache
                .get_or_ask(key, || ask(&asked, Ok(0), TEN_SECONDS))
                .await
                .unwrap();
        }
        assert!(cache.len().await <= 2);
    }

    /// A time to live past what an `Instant` can hold (an absurd flag)
    /// keeps the answer, without overflowing.
    #[tokio::test]
    async fn an_absurd_time_to_live_does_not_overflow() {
        let cache = ReviewCache::new(2);
        let asked = AtomicUsize::new(0);
        for _ in 0..2 {
            assert!(matches!(
                cache
                    .get_or_ask("k", || ask(&asked, Ok(7), Duration::MAX))
                    .await,
                Ok(7)
            ));
        }
        assert_eq!(asked.load(Ordering::SeqCst), 1);
    }
}
