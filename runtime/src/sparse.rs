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
mod tests;
