//! The work queue of pool names: each name at most once, ready at a time
//! (now, or after a delay); a name added again keeps its earlier time.
//! Failed names come back after a per-name exponential backoff (5 ms
//! doubling to 1,000 s, reset by [`Queue::forget`]) that an overall token
//! bucket (10 per second, bursts of 100) slows further when many pools
//! fail at once: client-go's default controller rate limiter, as
//! upstream's publisher uses it.

use std::collections::BTreeMap;
use std::time::Duration;
use tokio::time::Instant;

/// The first retry delay of a failed pool.
const BACKOFF_BASE: Duration = Duration::from_millis(5);
/// The longest retry delay of a failed pool.
const BACKOFF_MAX: Duration = Duration::from_secs(1000);
/// Retries the bucket allows per second, overall.
const BUCKET_RATE: f64 = 10.0;
/// Retries the bucket allows at once.
const BUCKET_BURST: f64 = 100.0;

/// Pool names with the time each is ready at.
#[derive(Debug)]
pub(crate) struct Queue {
    ready_at: BTreeMap<String, Instant>,
    failures: BTreeMap<String, u32>,
    tokens: f64,
    refilled: Instant,
}

impl Queue {
    /// An empty queue with a full bucket.
    pub(crate) fn new(now: Instant) -> Self {
        Self {
            ready_at: BTreeMap::new(),
            failures: BTreeMap::new(),
            tokens: BUCKET_BURST,
            refilled: now,
        }
    }

    /// Makes `name` ready at `at`, or earlier if it already is.
    pub(crate) fn add_at(&mut self, name: &str, at: Instant) {
        self.ready_at
            .entry(name.to_string())
            .and_modify(|t| *t = (*t).min(at))
            .or_insert(at);
    }

    /// Makes `name` ready after its backoff; returns the delay.
    pub(crate) fn add_rate_limited(&mut self, name: &str, now: Instant) -> Duration {
        let failures = self.failures.entry(name.to_string()).or_insert(0);
        let backoff = BACKOFF_BASE
            .checked_mul(2u32.saturating_pow(*failures))
            .map_or(BACKOFF_MAX, |d| d.min(BACKOFF_MAX));
        *failures = failures.saturating_add(1);
        let delay = backoff.max(self.bucket_delay(now));
        self.add_at(name, now + delay);
        delay
    }

    /// Takes a token from the bucket; returns how long the caller waits
    /// for it.
    fn bucket_delay(&mut self, now: Instant) -> Duration {
        let elapsed = now.saturating_duration_since(self.refilled).as_secs_f64();
        self.tokens = (self.tokens + elapsed * BUCKET_RATE).min(BUCKET_BURST);
        self.refilled = now;
        self.tokens -= 1.0;
        if self.tokens >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-self.tokens / BUCKET_RATE)
        }
    }

    /// Forgets the failures of `name`: its next retry starts over.
    pub(crate) fn forget(&mut self, name: &str) {
        self.failures.remove(name);
    }

    /// Takes the name ready first, if one is ready at `now`.
    pub(crate) fn pop_ready(&mut self, now: Instant) -> Option<String> {
        let (name, _) = self
            .ready_at
            .iter()
            .filter(|(_, at)| **at <= now)
            .min_by_key(|(_, at)| **at)?;
        let name = name.clone();
        self.ready_at.remove(&name);
        Some(name)
    }

    /// When the next name gets ready.
    pub(crate) fn next_at(&self) -> Option<Instant> {
        self.ready_at.values().min().copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn earliest_time_wins_and_names_are_unique() {
        let now = Instant::now();
        let mut q = Queue::new(now);
        q.add_at("a", now + Duration::from_secs(30));
        q.add_at("a", now);
        q.add_at("a", now + Duration::from_secs(60));
        q.add_at("b", now + Duration::from_secs(1));
        assert_eq!(q.pop_ready(now).as_deref(), Some("a"));
        assert_eq!(q.pop_ready(now), None);
        assert_eq!(q.next_at(), Some(now + Duration::from_secs(1)));
        assert_eq!(
            q.pop_ready(now + Duration::from_secs(1)).as_deref(),
            Some("b")
        );
    }

    #[test]
    fn backoff_doubles_per_pool_and_forget_resets_it() {
        let now = Instant::now();
        let mut q = Queue::new(now);
        let delays: Vec<u128> = (0..4)
            .map(|_| q.add_rate_limited("a", now).as_millis())
            .collect();
        assert_eq!(delays, [5, 10, 20, 40]);
        assert_eq!(q.add_rate_limited("b", now).as_millis(), 5);
        q.forget("a");
        assert_eq!(q.add_rate_limited("a", now).as_millis(), 5);
        for _ in 0..40 {
            q.add_rate_limited("c", now);
        }
        assert_eq!(q.add_rate_limited("c", now), BACKOFF_MAX);
    }

    #[test]
    fn the_bucket_limits_many_pools_failing_at_once() {
        let now = Instant::now();
        let mut q = Queue::new(now);
        for i in 0..100 {
            assert_eq!(q.add_rate_limited(&format!("p{i}"), now).as_millis(), 5);
        }
        assert_eq!(q.add_rate_limited("p100", now).as_millis(), 100);
        assert_eq!(q.add_rate_limited("p101", now).as_millis(), 200);
    }
}
