//! Giving memory back from collections that a burst filled and that have
//! mostly emptied since.
//!
//! A controller started on a full cluster queues every object at once: its
//! queues and waiting lists grow to hold a hundred thousand keys, and empty
//! again as the keys are synced. Hash maps, sets and deques keep their
//! largest capacity forever, so without this the tables of that one burst
//! (about 120 bytes an object at 100,000 pairs) stay allocated beside the
//! objects for the life of the process.

/// Collections below this many slots are left alone: shrinking them saves
/// nothing worth the rehash.
const SMALLEST: usize = 1024;

/// Calls `shrink_to` with a capacity of twice `len` when a collection of
/// `capacity` slots holds `len`, under a quarter of them; so a collection
/// that empties key by key is rebuilt a few times in all (each time at a
/// quarter of its size), and one that is refilled right away never is.
pub fn shrink_when_sparse(len: usize, capacity: usize, shrink_to: impl FnOnce(usize)) {
    if capacity > SMALLEST && len < capacity / 4 {
        shrink_to(len * 2);
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{HashMap, VecDeque};

    use super::shrink_when_sparse;

    #[test]
    fn a_map_emptied_key_by_key_gives_its_table_back() {
        let mut map: HashMap<u32, u32> = (0..100_000).map(|i| (i, i)).collect();
        let full = map.capacity();
        for i in 0..99_990 {
            map.remove(&i);
            shrink_when_sparse(map.len(), map.capacity(), |to| map.shrink_to(to));
        }
        assert_eq!(map.len(), 10);
        assert!(
            map.capacity() <= 2 * super::SMALLEST,
            "{} of {full} slots kept",
            map.capacity()
        );
        assert_eq!(map.get(&99_995), Some(&99_995), "what is left stays");
    }

    #[test]
    fn a_busy_or_small_collection_is_left_alone() {
        let mut deque: VecDeque<u32> = (0..10_000).collect();
        let full = deque.capacity();
        for _ in 0..5_000 {
            deque.pop_front();
            shrink_when_sparse(deque.len(), deque.capacity(), |to| deque.shrink_to(to));
        }
        assert_eq!(deque.capacity(), full, "half full: kept");
        let mut small: VecDeque<u32> = VecDeque::with_capacity(1000);
        small.push_back(1);
        shrink_when_sparse(small.len(), small.capacity(), |to| small.shrink_to(to));
        assert!(small.capacity() >= 1000, "small: kept");
    }
}
