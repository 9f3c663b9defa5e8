//! The objects of one kind read or written last, kept unpacked.
//!
//! A sync reads its objects several times (each write edits the newest
//! copy, and reads the answer of the one before), and every claim worker
//! has a claim and a volume in flight: keeping the last objects unpacked
//! spares most of those reads an unpack. Looked up by key in one step, so
//! keeping more of them (one for each object the workers have in flight)
//! costs no more per read.

use std::borrow::Borrow;
use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::hash::Hash;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// How many objects of a kind are kept unless the wiring says otherwise:
/// more than the default workers sync at once, each touching one volume
/// and one claim.
pub(crate) const RECENT: usize = 64;

/// The objects of one kind read or written last, unpacked, by key: at most
/// `capacity` of them, the one put longest ago dropped first. Its owner
/// keeps it exactly as new as the packed objects: every store of a key
/// replaces or forgets its entry here, under the lock that guards the store.
pub(crate) struct Recent<Q, K> {
    capacity: usize,
    slots: Mutex<Slots<Q, K>>,
}

struct Slots<Q, K> {
    /// Each kept object with the stamp of its last put.
    by_key: HashMap<Q, (u64, Arc<K>)>,
    /// Keys by the stamp of each put, oldest first; an entry whose stamp is
    /// no longer its key's was put again since, or forgotten.
    order: VecDeque<(u64, Q)>,
    next: u64,
}

impl<Q, K> Recent<Q, K> {
    /// Keeps at most `capacity` objects (at least one).
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            capacity: capacity.max(1),
            slots: Mutex::new(Slots {
                by_key: HashMap::new(),
                order: VecDeque::new(),
                next: 0,
            }),
        }
    }

    fn slots(&self) -> MutexGuard<'_, Slots<Q, K>> {
        // Every change below leaves the slots whole, so a poisoned lock is
        // used as it is.
        self.slots.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl<Q, K> Default for Recent<Q, K> {
    fn default() -> Self {
        Self::new(RECENT)
    }
}

impl<Q, K> fmt::Debug for Recent<Q, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Recent({})", self.capacity)
    }
}

impl<Q: Hash + Eq + Clone, K> Recent<Q, K> {
    /// The object kept for `key`.
    pub(crate) fn get<B>(&self, key: &B) -> Option<Arc<K>>
    where
        Q: Borrow<B>,
        B: Hash + Eq + ?Sized,
    {
        let slots = self.slots();
        slots.by_key.get(key).map(|(_, object)| Arc::clone(object))
    }

    /// Keeps `object` for `key`, in place of what was kept for it.
    pub(crate) fn put(&self, key: Q, object: Arc<K>) {
        let mut slots = self.slots();
        let stamp = slots.next;
        slots.next += 1;
        slots.order.push_back((stamp, key.clone()));
        slots.by_key.insert(key, (stamp, object));
        while slots.by_key.len() > self.capacity {
            let Some((stamp, key)) = slots.order.pop_front() else {
                break;
            };
            if slots.by_key.get(&key).is_some_and(|(own, _)| *own == stamp) {
                slots.by_key.remove(&key);
            }
        }
        // Puts of keys kept already leave their older stamps behind.
        if slots.order.len() > 2 * self.capacity {
            let Slots { by_key, order, .. } = &mut *slots;
            order.retain(|(stamp, key)| by_key.get(key).is_some_and(|(own, _)| own == stamp));
        }
    }

    /// Drops what is kept for `key`.
    pub(crate) fn forget<B>(&self, key: &B)
    where
        Q: Borrow<B>,
        B: Hash + Eq + ?Sized,
    {
        self.slots().by_key.remove(key);
    }

    /// How many objects are kept.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.slots().by_key.len()
    }
}

#[cfg(test)]
mod tests;
