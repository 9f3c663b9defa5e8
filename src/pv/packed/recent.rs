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
mod tests {
    use super::*;

    #[test]
    fn recent_keeps_the_last_objects_by_key() {
        let recent: Recent<String, u32> = Recent::default();
        recent.put("a".to_owned(), Arc::new(1));
        recent.put("a".to_owned(), Arc::new(2));
        assert_eq!(recent.get("a").as_deref(), Some(&2));
        recent.forget("a");
        assert_eq!(recent.get("a"), None);
        for i in 0..=RECENT {
            recent.put(i.to_string(), Arc::new(u32::try_from(i).expect("small")));
        }
        assert_eq!(recent.get("0"), None, "the oldest is dropped");
        assert_eq!(recent.get("1").as_deref(), Some(&1));
        assert_eq!(recent.len(), RECENT);
    }

    #[test]
    fn a_key_put_again_is_dropped_by_its_last_put() {
        let recent: Recent<String, u32> = Recent::new(3);
        recent.put("a".to_owned(), Arc::new(1));
        recent.put("b".to_owned(), Arc::new(2));
        recent.put("a".to_owned(), Arc::new(3));
        recent.put("c".to_owned(), Arc::new(4));
        recent.put("d".to_owned(), Arc::new(5));
        assert_eq!(recent.get("b"), None, "b was put longest ago");
        assert_eq!(recent.get("a").as_deref(), Some(&3));
        for i in 0..1000 {
            recent.put("a".to_owned(), Arc::new(i));
        }
        assert_eq!(recent.len(), 3);
        assert!(recent.slots().order.len() <= 6, "stale stamps are dropped");
        assert_eq!(recent.get("c").as_deref(), Some(&4));
        assert_eq!(recent.get("d").as_deref(), Some(&5));
    }
}
