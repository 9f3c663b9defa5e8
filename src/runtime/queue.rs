//! A work queue of object keys with the semantics of client-go's workqueue:
//! deduplication, one worker per key, delayed adds and per-key exponential
//! retry backoff.
//!
//! The controller's sync functions are not reentrant for one object, and a
//! burst of watch events for an object should cost one sync, not one per
//! event. The queue guarantees both:
//!
//! - a key that is waiting is queued once, however often it is added;
//! - a key that a worker is processing is never handed to another worker; if
//!   it is added meanwhile, it is queued again when the worker calls
//!   [`WorkQueue::done`], so the change that came in is not lost;
//! - waiting keys are handed out in the order they were first added.
//!
//! Delays and backoff use `tokio::time`, so tests can run with paused time.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet, VecDeque};
use std::hash::Hash;
use std::pin::pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

/// First retry delay of a failing key (client-go's default item limiter).
pub(crate) const BACKOFF_BASE: Duration = Duration::from_millis(5);

/// Longest retry delay of a failing key (client-go's default item limiter).
pub(crate) const BACKOFF_MAX: Duration = Duration::from_secs(1000);

/// A deduplicating FIFO of keys, shared by the event handlers that add keys
/// and the workers that process them. Cloning is cheap and gives another
/// handle on the same queue.
pub(crate) struct WorkQueue<K> {
    inner: Arc<Inner<K>>,
}

impl<K> Clone for WorkQueue<K> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
        }
    }
}

struct Inner<K> {
    state: Mutex<State<K>>,
    /// Woken whenever a key may have become available or the queue shut down.
    changed: Notify,
}

struct State<K> {
    /// Keys ready for a worker, oldest first; none of them is being processed.
    waiting: VecDeque<K>,
    /// Keys that need processing: those in `waiting`, plus keys added while
    /// they were being processed.
    dirty: HashSet<K>,
    /// Keys handed to a worker and not yet `done`.
    processing: HashSet<K>,
    /// Keys to add later, by due time; entries whose sequence number is no
    /// longer in `delayed_keys` were superseded by an earlier due time.
    delayed: BinaryHeap<Reverse<(Instant, u64)>>,
    /// The key behind each live sequence number in `delayed`.
    delayed_keys: HashMap<u64, K>,
    /// The live sequence number and due time of each delayed key.
    delayed_by_key: HashMap<K, (Instant, u64)>,
    next_seq: u64,
    /// Consecutive failures per key, for the retry backoff.
    failures: HashMap<K, u32>,
    shutting_down: bool,
}

impl<K: Clone + Eq + Hash + Send + Sync + 'static> Default for WorkQueue<K> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: Clone + Eq + Hash + Send + Sync + 'static> WorkQueue<K> {
    /// An empty queue, ready for workers.
    pub(crate) fn new() -> Self {
        Self {
            inner: Arc::new(Inner {
                state: Mutex::new(State {
                    waiting: VecDeque::new(),
                    dirty: HashSet::new(),
                    processing: HashSet::new(),
                    delayed: BinaryHeap::new(),
                    delayed_keys: HashMap::new(),
                    delayed_by_key: HashMap::new(),
                    next_seq: 0,
                    failures: HashMap::new(),
                    shutting_down: false,
                }),
                changed: Notify::new(),
            }),
        }
    }

    /// Marks `key` as needing processing. A key already waiting stays where
    /// it is; a key being processed is queued again once it is `done`.
    /// Ignored after [`shut_down`](Self::shut_down).
    pub(crate) fn add(&self, key: K) {
        let added = self.lock().add(key);
        if added {
            self.inner.changed.notify_waiters();
        }
    }

    /// Adds `key` once `delay` has passed, so a retry or a timed re-check does
    /// not occupy a worker while it waits. A key already scheduled keeps the
    /// earlier of its two due times. Ignored after shut-down.
    pub(crate) fn add_after(&self, key: K, delay: Duration) {
        if delay.is_zero() {
            self.add(key);
            return;
        }
        let scheduled = self.lock().schedule(key, Instant::now() + delay);
        if scheduled {
            // A waiting worker may be timing a later due time; let it re-arm.
            self.inner.changed.notify_waiters();
        }
    }

    /// Adds `key` after its retry backoff (5 ms, doubling with each failure
    /// up to 1000 s), so a key that keeps failing does not spin a worker.
    pub(crate) fn add_rate_limited(&self, key: K) {
        let delay = self.lock().next_backoff(&key);
        self.add_after(key, delay);
    }

    /// Clears the failure count of `key`, so its next retry starts from the
    /// shortest backoff again. Called after a key was processed successfully.
    pub(crate) fn forget(&self, key: &K) {
        self.lock().failures.remove(key);
    }

    /// How many times `key` was re-added by [`add_rate_limited`](Self::add_rate_limited)
    /// since it was last forgotten.
    #[cfg(test)]
    pub(crate) fn num_requeues(&self, key: &K) -> u32 {
        self.lock().failures.get(key).copied().unwrap_or(0)
    }

    /// Waits for a key to process and marks it as being processed; the
    /// caller must call [`done`](Self::done) with it afterwards.
    ///
    /// Returns `None` as soon as the queue is shut down, even when keys are
    /// still waiting: workers exit promptly, and a restarted controller
    /// re-lists every object anyway, so nothing is lost by dropping them.
    pub(crate) async fn get(&self) -> Option<K> {
        loop {
            let mut changed = pin!(self.inner.changed.notified());
            // Register before looking at the state, so a change made between
            // the look and the wait still wakes this worker.
            changed.as_mut().enable();
            let next_due = {
                let mut state = self.lock();
                if state.shutting_down {
                    return None;
                }
                state.promote_due(Instant::now());
                if let Some(key) = state.waiting.pop_front() {
                    state.dirty.remove(&key);
                    state.processing.insert(key.clone());
                    return Some(key);
                }
                state.next_due()
            };
            match next_due {
                Some(due) => {
                    tokio::select! {
                        () = changed => {}
                        () = tokio::time::sleep_until(due) => {}
                    }
                }
                None => changed.await,
            }
        }
    }

    /// Marks `key` as processed. If it was added while being processed, it
    /// is queued again now.
    pub(crate) fn done(&self, key: &K) {
        let requeued = self.lock().done(key);
        if requeued {
            self.inner.changed.notify_waiters();
        }
    }

    /// Number of keys ready for a worker (not counting keys being processed
    /// or still waiting for their delay), for the queue-depth metric.
    pub(crate) fn len(&self) -> usize {
        let mut state = self.lock();
        state.promote_due(Instant::now());
        state.waiting.len()
    }

    /// Whether no key is ready for a worker.
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether no key is ready, being processed, or waiting for a retry:
    /// the controller has nothing left to do until something changes.
    pub(crate) fn is_idle(&self) -> bool {
        let mut state = self.lock();
        state.promote_due(Instant::now());
        state.waiting.is_empty() && state.processing.is_empty() && state.delayed.is_empty()
    }

    /// Stops the queue: waiting workers return `None` at once, later adds
    /// are ignored and delayed keys are dropped.
    pub(crate) fn shut_down(&self) {
        self.lock().shut_down();
        self.inner.changed.notify_waiters();
    }

    /// Whether [`shut_down`](Self::shut_down) was called.
    #[cfg(test)]
    pub(crate) fn is_shutting_down(&self) -> bool {
        self.lock().shutting_down
    }

    fn lock(&self) -> MutexGuard<'_, State<K>> {
        // No code panics while holding the lock, so a poisoned state is still
        // consistent.
        self.inner
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

impl<K: Clone + Eq + Hash> State<K> {
    /// Returns whether a worker may now have something to take.
    fn add(&mut self, key: K) -> bool {
        if self.shutting_down || self.dirty.contains(&key) {
            return false;
        }
        self.dirty.insert(key.clone());
        if self.processing.contains(&key) {
            // Queued again by `done`.
            return false;
        }
        self.waiting.push_back(key);
        true
    }

    /// Returns whether the key's due time was set or moved earlier.
    fn schedule(&mut self, key: K, due: Instant) -> bool {
        if self.shutting_down {
            return false;
        }
        if let Some(&(current, seq)) = self.delayed_by_key.get(&key) {
            if current <= due {
                return false;
            }
            self.delayed_keys.remove(&seq);
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        self.delayed.push(Reverse((due, seq)));
        self.delayed_keys.insert(seq, key.clone());
        self.delayed_by_key.insert(key, (due, seq));
        true
    }

    /// Moves every delayed key whose time has come to the waiting keys, in
    /// due-time order.
    fn promote_due(&mut self, now: Instant) {
        while let Some(&Reverse((due, seq))) = self.delayed.peek() {
            if due > now {
                break;
            }
            self.delayed.pop();
            if let Some(key) = self.delayed_keys.remove(&seq) {
                self.delayed_by_key.remove(&key);
                self.add(key);
            }
        }
    }

    /// Due time of the earliest live delayed key.
    fn next_due(&mut self) -> Option<Instant> {
        while let Some(&Reverse((due, seq))) = self.delayed.peek() {
            if self.delayed_keys.contains_key(&seq) {
                return Some(due);
            }
            self.delayed.pop();
        }
        None
    }

    fn next_backoff(&mut self, key: &K) -> Duration {
        let failures = self.failures.entry(key.clone()).or_insert(0);
        let exponent = *failures;
        *failures = failures.saturating_add(1);
        backoff_delay(exponent)
    }

    /// Returns whether the key was queued again.
    fn done(&mut self, key: &K) -> bool {
        self.processing.remove(key);
        if self.dirty.contains(key) && !self.shutting_down {
            self.waiting.push_back(key.clone());
            return true;
        }
        false
    }

    fn shut_down(&mut self) {
        self.shutting_down = true;
        self.delayed.clear();
        self.delayed_keys.clear();
        self.delayed_by_key.clear();
    }
}

/// The retry delay after `exponent` earlier failures: `BACKOFF_BASE * 2^exponent`,
/// capped at `BACKOFF_MAX`.
fn backoff_delay(exponent: u32) -> Duration {
    2u32.checked_pow(exponent)
        .and_then(|factor| BACKOFF_BASE.checked_mul(factor))
        .map_or(BACKOFF_MAX, |delay| delay.min(BACKOFF_MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether a worker gets a key without waiting (lets ready tasks run first).
    async fn try_get(queue: &WorkQueue<&'static str>) -> Option<&'static str> {
        tokio::time::timeout(Duration::ZERO, queue.get())
            .await
            .ok()
            .flatten()
    }

    #[tokio::test(start_paused = true)]
    async fn waiting_key_is_queued_once() {
        let queue = WorkQueue::new();
        queue.add("a");
        queue.add("b");
        queue.add("a");
        assert_eq!(queue.len(), 2);
        assert_eq!(try_get(&queue).await, Some("a"));
        assert_eq!(try_get(&queue).await, Some("b"));
        assert_eq!(try_get(&queue).await, None);
    }

    #[tokio::test(start_paused = true)]
    async fn keys_come_out_in_insertion_order() {
        let queue = WorkQueue::new();
        for key in ["c", "a", "b"] {
            queue.add(key);
        }
        let mut order = Vec::new();
        while let Some(key) = try_get(&queue).await {
            order.push(key);
            queue.done(&key);
        }
        assert_eq!(order, ["c", "a", "b"]);
    }

    #[tokio::test(start_paused = true)]
    async fn key_in_processing_is_not_given_to_a_second_worker() {
        let queue = WorkQueue::new();
        queue.add("a");
        assert_eq!(try_get(&queue).await, Some("a"));
        queue.add("a");
        assert_eq!(queue.len(), 0);
        let second = tokio::spawn({
            let queue = queue.clone();
            async move { queue.get().await }
        });
        tokio::time::sleep(Duration::from_secs(60)).await;
        assert!(!second.is_finished());
        queue.done(&"a");
        assert_eq!(second.await.ok().flatten(), Some("a"));
    }

    #[tokio::test(start_paused = true)]
    async fn key_added_while_processing_is_queued_again_once_on_done() {
        let queue = WorkQueue::new();
        queue.add("a");
        assert_eq!(try_get(&queue).await, Some("a"));
        queue.add("a");
        queue.add("a");
        queue.done(&"a");
        assert_eq!(queue.len(), 1);
        assert_eq!(try_get(&queue).await, Some("a"));
        queue.done(&"a");
        assert_eq!(try_get(&queue).await, None);
    }

    #[tokio::test(start_paused = true)]
    async fn done_without_re_add_does_not_requeue() {
        let queue = WorkQueue::new();
        queue.add("a");
        assert_eq!(try_get(&queue).await, Some("a"));
        queue.done(&"a");
        assert!(queue.is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn delayed_key_becomes_available_after_its_delay() {
        let queue = WorkQueue::new();
        queue.add_after("a", Duration::from_secs(10));
        assert_eq!(try_get(&queue).await, None);
        tokio::time::advance(Duration::from_millis(9_999)).await;
        assert_eq!(try_get(&queue).await, None);
        tokio::time::advance(Duration::from_millis(1)).await;
        assert_eq!(queue.len(), 1);
        assert_eq!(try_get(&queue).await, Some("a"));
    }

    #[tokio::test(start_paused = true)]
    async fn waiting_worker_wakes_for_a_delayed_key() {
        let queue = WorkQueue::new();
        let worker = tokio::spawn({
            let queue = queue.clone();
            async move { queue.get().await }
        });
        tokio::task::yield_now().await;
        queue.add_after("a", Duration::from_secs(3));
        let started = Instant::now();
        assert_eq!(worker.await.ok().flatten(), Some("a"));
        assert_eq!(started.elapsed(), Duration::from_secs(3));
    }

    #[tokio::test(start_paused = true)]
    async fn delayed_key_keeps_its_earliest_due_time() {
        let queue = WorkQueue::new();
        queue.add_after("a", Duration::from_secs(10));
        queue.add_after("a", Duration::from_secs(2));
        queue.add_after("a", Duration::from_secs(5));
        tokio::time::advance(Duration::from_secs(2)).await;
        assert_eq!(try_get(&queue).await, Some("a"));
        queue.done(&"a");
        tokio::time::advance(Duration::from_secs(20)).await;
        assert_eq!(try_get(&queue).await, None);
    }

    #[tokio::test(start_paused = true)]
    async fn rate_limited_backoff_doubles_per_failure() {
        let queue = WorkQueue::new();
        for (failures, delay_ms) in [(0u32, 5u64), (1, 10), (2, 20), (3, 40)] {
            assert_eq!(queue.num_requeues(&"a"), failures);
            queue.add_rate_limited("a");
            tokio::time::advance(Duration::from_millis(delay_ms - 1)).await;
            assert_eq!(try_get(&queue).await, None, "before {delay_ms} ms");
            tokio::time::advance(Duration::from_millis(1)).await;
            assert_eq!(try_get(&queue).await, Some("a"), "after {delay_ms} ms");
            queue.done(&"a");
        }
        assert_eq!(queue.num_requeues(&"a"), 4);
    }

    #[tokio::test(start_paused = true)]
    async fn forget_resets_the_backoff() {
        let queue = WorkQueue::new();
        for _ in 0..5 {
            queue.add_rate_limited("a");
        }
        queue.forget(&"a");
        assert_eq!(queue.num_requeues(&"a"), 0);
        // The five adds above are still scheduled (earliest at 5 ms); take it.
        tokio::time::advance(Duration::from_millis(5)).await;
        assert_eq!(try_get(&queue).await, Some("a"));
        queue.done(&"a");
        // Without the forget this retry would wait 5 ms * 2^5.
        queue.add_rate_limited("a");
        tokio::time::advance(Duration::from_millis(5)).await;
        assert_eq!(try_get(&queue).await, Some("a"));
        assert_eq!(queue.num_requeues(&"a"), 1);
    }

    #[test]
    fn backoff_is_capped() {
        assert_eq!(backoff_delay(0), Duration::from_millis(5));
        assert_eq!(backoff_delay(17), Duration::from_millis(5 << 17));
        assert_eq!(backoff_delay(18), BACKOFF_MAX);
        assert_eq!(backoff_delay(40), BACKOFF_MAX);
        assert_eq!(backoff_delay(u32::MAX), BACKOFF_MAX);
    }

    #[tokio::test(start_paused = true)]
    async fn shut_down_wakes_every_waiting_worker() {
        let queue: WorkQueue<&'static str> = WorkQueue::new();
        let workers: Vec<_> = (0..3)
            .map(|_| {
                let queue = queue.clone();
                tokio::spawn(async move { queue.get().await })
            })
            .collect();
        tokio::task::yield_now().await;
        queue.shut_down();
        for worker in workers {
            assert_eq!(worker.await.ok().flatten(), None);
        }
    }

    #[tokio::test(start_paused = true)]
    async fn shut_down_drops_waiting_keys_and_ignores_adds() {
        let queue = WorkQueue::new();
        queue.add("a");
        queue.add_after("b", Duration::from_secs(1));
        queue.shut_down();
        queue.add("c");
        assert!(queue.is_shutting_down());
        assert_eq!(queue.get().await, None);
        tokio::time::advance(Duration::from_secs(2)).await;
        assert_eq!(queue.get().await, None);
    }

    #[tokio::test(start_paused = true)]
    async fn added_key_wakes_a_waiting_worker() {
        let queue = WorkQueue::new();
        let worker = tokio::spawn({
            let queue = queue.clone();
            async move { queue.get().await }
        });
        tokio::task::yield_now().await;
        queue.add("a");
        assert_eq!(worker.await.ok().flatten(), Some("a"));
    }
}
