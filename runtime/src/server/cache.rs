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
mod tests;
