//! A work queue of object keys with the semantics of client-go's workqueue:
//! deduplication, one worker per key, delayed adds and per-key exponential
//! retry backoff; plus a lane for periodic resyncs and marks that tell when
//! every key queued before a moment has had its turn.
//!
//! The controller's sync functions are not reentrant for one object, and a
//! burst of watch events for an object should cost one sync, not one per
//! event. The queue guarantees both:
//!
//! - a key that is waiting is queued once, however often it is added;
//! - a key that a worker is processing is never handed to another worker,
//!   however many workers there are; if it is added meanwhile, it is queued
//!   again when the worker calls [`WorkQueue::done`], so the change that
//!   came in is not lost;
//! - waiting keys are handed out in the order they were first added, those
//!   added with [`WorkQueue::add`] before those of a resync
//!   ([`WorkQueue::add_resync`]), so a resync of thousands of objects never
//!   delays a change that just came in; a resync key that is added again
//!   with `add` moves to the front lane, keeping its age.
//!
//! Every queued key gets a sequence number. [`WorkQueue::mark`] notes the
//! present and [`WorkQueue::passed`] tells whether every key queued up to
//! that mark has been processed (keys waiting for a retry delay do not
//! count: they had their turn).
//!
//! Delays and backoff use `tokio::time`, so tests can run with paused time.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap};
use std::hash::Hash;
use std::pin::pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use crate::sparse::shrink_when_sparse;

/// First retry delay of a failing key (client-go's default item limiter).
pub const BACKOFF_BASE: Duration = Duration::from_millis(5);

/// Longest retry delay of a failing key (client-go's default item limiter).
pub const BACKOFF_MAX: Duration = Duration::from_secs(1000);

/// A deduplicating FIFO of keys, shared by the event handlers that add keys
/// and the workers that process them. Cloning is cheap and gives another
/// handle on the same queue.
pub struct WorkQueue<K> {
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
    /// Wakes one waiting worker for each key that became available (or
    /// an earlier due time to re-arm for), and every worker when the
    /// queue shuts down. Waking one rather than all keeps a busy queue from
    /// waking every idle worker for each key only one of them can take.
    changed: Notify,
}

/// Which lane a waiting key is in: changes go before resyncs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Lane {
    /// Keys added because something changed (and retries).
    Change,
    /// Keys added by a periodic resync.
    Resync,
}

/// A point in the queue's history, from [`WorkQueue::mark`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Mark(u64);

struct State<K> {
    /// Keys ready for a worker, by sequence number, one map per lane; none
    /// of them is being processed. A waiting key is held once, shared by its
    /// lane and `waiting`: a start on a full cluster queues every key at
    /// once, and a second copy of 100,000 keys is megabytes.
    changes: BTreeMap<u64, Arc<K>>,
    resyncs: BTreeMap<u64, Arc<K>>,
    /// The lane and sequence number of each waiting key.
    waiting: HashMap<Arc<K>, (Lane, u64)>,
    /// Keys added while being processed, with the lane to queue them in
    /// again when they are done.
    again: HashMap<K, Lane>,
    /// Keys handed to a worker and not yet `done`, with their sequence
    /// number.
    processing: HashMap<K, u64>,
    /// The next sequence number, of a queued key or of a delayed one.
    next_seq: u64,
    /// Keys to add later, by due time; entries whose sequence number is no
    /// longer in `delayed_keys` were superseded by an earlier due time.
    delayed: BinaryHeap<Reverse<(Instant, u64)>>,
    /// The key behind each live sequence number in `delayed`.
    delayed_keys: HashMap<u64, K>,
    /// The live sequence number and due time of each delayed key.
    delayed_by_key: HashMap<K, (Instant, u64)>,
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
    pub fn new() -> Self {
        Self {
            inner: Arc::new(Inner {
                state: Mutex::new(State {
                    changes: BTreeMap::new(),
                    resyncs: BTreeMap::new(),
                    waiting: HashMap::new(),
                    again: HashMap::new(),
                    processing: HashMap::new(),
                    next_seq: 0,
                    delayed: BinaryHeap::new(),
                    delayed_keys: HashMap::new(),
                    delayed_by_key: HashMap::new(),
                    failures: HashMap::new(),
                    shutting_down: false,
                }),
                changed: Notify::new(),
            }),
        }
    }

    /// Marks `key` as needing processing because something changed. A key
    /// already waiting keeps its place (or moves ahead of the resync lane);
    /// a key being processed is queued again once it is `done`. Ignored
    /// after [`shut_down`](Self::shut_down).
    pub fn add(&self, key: K) {
        self.add_in(key, Lane::Change);
    }

    /// Marks `key` as needing processing for a periodic resync: it waits
    /// behind every key added with [`add`](Self::add).
    pub fn add_resync(&self, key: K) {
        self.add_in(key, Lane::Resync);
    }

    /// Whether `key` is waiting for a worker already (a key being processed
    /// or delayed is not): adding a waiting key changes nothing, so a
    /// caller about to read or copy many objects to queue them can pass
    /// those by first.
    pub fn is_waiting(&self, key: &K) -> bool {
        self.lock().waiting.contains_key(key)
    }

    fn add_in(&self, key: K, lane: Lane) {
        let added = self.lock().add(key, lane);
        if added {
            self.inner.changed.notify_one();
        }
    }

    /// Adds `key` once `delay` has passed, so a retry or a timed re-check does
    /// not occupy a worker while it waits. A key already scheduled keeps the
    /// earlier of its two due times. Ignored after shut-down.
    pub fn add_after(&self, key: K, delay: Duration) {
        if delay.is_zero() {
            self.add(key);
            return;
        }
        let scheduled = self.lock().schedule(key, Instant::now() + delay);
        if scheduled {
            // A waiting worker may be timing a later due time; let it re-arm.
            self.inner.changed.notify_one();
        }
    }

    /// Adds `key` after its retry backoff (5 ms, doubling with each failure
    /// up to 1000 s), so a key that keeps failing does not spin a worker.
    pub fn add_rate_limited(&self, key: K) {
        let delay = self.lock().next_backoff(&key);
        self.add_after(key, delay);
    }

    /// Clears the failure count of `key`, so its next retry starts from the
    /// shortest backoff again. Called after a key was processed successfully.
    pub fn forget(&self, key: &K) {
        self.lock().failures.remove(key);
    }

    /// Waits for a key to process and marks it as being processed; the
    /// caller must call [`done`](Self::done) with it afterwards.
    ///
    /// Returns `None` as soon as the queue is shut down, even when keys are
    /// still waiting: workers exit promptly, and a restarted controller
    /// re-lists every object anyway, so nothing is lost by dropping them.
    pub async fn get(&self) -> Option<K> {
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
                if let Some(key) = state.take() {
                    return Some(key);
                }
                state.next_due()
            };
            match next_due {
                Some(due) => {
                    tokio::select! {
                        biased;
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
    pub fn done(&self, key: &K) {
        let requeued = self.lock().done(key);
        if requeued {
            self.inner.changed.notify_one();
        }
    }

    /// Number of keys ready for a worker (not counting keys being processed
    /// or still waiting for their delay), for the queue-depth metric.
    pub fn len(&self) -> usize {
        let mut state = self.lock();
        state.promote_due(Instant::now());
        state.waiting.len()
    }

    /// Whether no key is ready for a worker (the pair of [`Self::len`]).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether no key is ready, being processed, or waiting for a retry:
    /// the controller has nothing left to do until something changes.
    pub fn is_idle(&self) -> bool {
        let mut state = self.lock();
        state.promote_due(Instant::now());
        state.waiting.is_empty() && state.processing.is_empty() && state.delayed.is_empty()
    }

    /// The present: every key queued from now on comes after this mark.
    pub fn mark(&self) -> Mark {
        Mark(self.lock().next_seq)
    }

    /// Whether every key that was waiting or being processed at `mark` has
    /// been processed since (keys waiting for a retry delay do not count).
    pub fn passed(&self, mark: Mark) -> bool {
        self.lock().oldest().is_none_or(|oldest| oldest >= mark.0)
    }

    /// Stops the queue: waiting workers return `None` at once, later adds
    /// are ignored and delayed keys are dropped.
    pub fn shut_down(&self) {
        self.lock().shut_down();
        self.inner.changed.notify_waiters();
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
    fn lane(&mut self, lane: Lane) -> &mut BTreeMap<u64, Arc<K>> {
        match lane {
            Lane::Change => &mut self.changes,
            Lane::Resync => &mut self.resyncs,
        }
    }

    fn next_seq(&mut self) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        seq
    }

    /// Returns whether a worker may now have something to take.
    fn add(&mut self, key: K, lane: Lane) -> bool {
        if self.shutting_down {
            return false;
        }
        if let Some(&(current, seq)) = self.waiting.get(&key) {
            if lane >= current {
                return false;
            }
            // A change for a key waiting in the resync lane: it moves ahead,
            // keeping its sequence number.
            let shared = self.resyncs.remove(&seq).unwrap_or_else(|| Arc::new(key));
            self.changes.insert(seq, Arc::clone(&shared));
            self.waiting.insert(shared, (lane, seq));
            return true;
        }
        if self.processing.contains_key(&key) {
            // Queued again by `done`, in the more urgent of the lanes asked.
            let again = self.again.entry(key).or_insert(lane);
            *again = (*again).min(lane);
            return false;
        }
        self.queue(key, lane);
        true
    }

    fn queue(&mut self, key: K, lane: Lane) {
        let seq = self.next_seq();
        let key = Arc::new(key);
        self.lane(lane).insert(seq, Arc::clone(&key));
        self.waiting.insert(key, (lane, seq));
    }

    /// Hands the oldest key of the most urgent lane to a worker.
    fn take(&mut self) -> Option<K> {
        let (seq, shared) = match self.changes.pop_first() {
            Some(entry) => entry,
            None => self.resyncs.pop_first()?,
        };
        self.waiting.remove(&*shared);
        let (len, capacity) = (self.waiting.len(), self.waiting.capacity());
        shrink_when_sparse(len, capacity, |to| self.waiting.shrink_to(to));
        // The lane's entry and `waiting`'s were the only holders.
        let key = Arc::try_unwrap(shared).unwrap_or_else(|shared| K::clone(&shared));
        self.processing.insert(key.clone(), seq);
        Some(key)
    }

    /// The sequence number of the oldest key waiting or being processed.
    fn oldest(&self) -> Option<u64> {
        let firsts = [
            self.changes.first_key_value().map(|(seq, _)| *seq),
            self.resyncs.first_key_value().map(|(seq, _)| *seq),
        ];
        firsts
            .into_iter()
            .flatten()
            .chain(self.processing.values().copied())
            .min()
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
        let seq = self.next_seq();
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
                self.add(key, Lane::Change);
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
        match self.again.remove(key) {
            Some(lane) if !self.shutting_down => {
                self.queue(key.clone(), lane);
                true
            }
            _ => false,
        }
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
mod tests;
