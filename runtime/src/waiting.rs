//! Keys that wait to be woken: those whose plan said [`crate::plan::Then::Wait`]
//! (a claim that found no volume), queued again all at once when their
//! controller wakes them (a volume became free), in the order it asks.
//!
//! A wake that comes while a key's decision is under way must not be
//! missed (the volume freed just after the claim's search): each wake
//! moves an epoch on, a pool notes the epoch before it decides, and a key
//! whose decision began before the last wake is queued again at once
//! instead of waiting.

use std::collections::HashSet;
use std::hash::Hash;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crate::queue::WorkQueue;

#[derive(Debug)]
struct State<Key> {
    keys: HashSet<Key>,
    epoch: u64,
}

/// The keys of one queue that wait to be woken. Cheap to clone.
pub struct Waiting<Key> {
    state: Arc<Mutex<State<Key>>>,
    queue: WorkQueue<Key>,
}

impl<Key> Clone for Waiting<Key> {
    fn clone(&self) -> Self {
        Self {
            state: Arc::clone(&self.state),
            queue: self.queue.clone(),
        }
    }
}

impl<Key: Clone + Eq + Hash + Send + Sync + 'static> Waiting<Key> {
    /// The waiting keys of `queue` (none yet).
    pub fn new(queue: WorkQueue<Key>) -> Self {
        Self {
            state: Arc::new(Mutex::new(State {
                keys: HashSet::new(),
                epoch: 0,
            })),
            queue,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State<Key>> {
        // No code panics while holding the lock.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The epoch now (moved on by every wake).
    pub fn epoch(&self) -> u64 {
        self.lock().epoch
    }

    /// `key`, decided from the epoch `began`, waits: kept until the next
    /// wake, or queued again at once when a wake came since `began`.
    pub fn wait(&self, key: &Key, began: u64) {
        let missed = {
            let mut state = self.lock();
            if state.epoch == began {
                state.keys.insert(key.clone());
                false
            } else {
                true
            }
        };
        if missed {
            self.queue.add(key.clone());
        }
    }

    /// `key` waits no more (its plan went through without waiting, or its
    /// object is gone).
    pub fn forget(&self, key: &Key) {
        self.lock().keys.remove(key);
    }

    /// Wakes every waiting key: queued again in the order `order` gives
    /// them (it may leave out those no longer worth a decision).
    pub fn wake(&self, order: impl FnOnce(Vec<Key>) -> Vec<Key>) {
        let waiting: Vec<Key> = {
            let mut state = self.lock();
            state.epoch += 1;
            std::mem::take(&mut state.keys).into_iter().collect()
        };
        if waiting.is_empty() {
            return;
        }
        tracing::debug!(keys = waiting.len(), "waking the waiting keys");
        for key in order(waiting) {
            self.queue.add(key);
        }
    }

    /// How many keys wait.
    pub fn len(&self) -> usize {
        self.lock().keys.len()
    }

    /// Whether no key waits.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests;
