//! The UIDs of pods seen deleted, the most recent few hundred (upstream's
//! `uidCache`): a reservation by such a pod is removed without asking the
//! API server whether the pod is gone.

use std::collections::{HashSet, VecDeque};
use std::sync::Mutex;

/// A bounded set of UIDs; the oldest is forgotten when it is full.
#[derive(Debug)]
pub(crate) struct DeletedPods {
    inner: Mutex<(VecDeque<String>, HashSet<String>)>,
    capacity: usize,
}

impl DeletedPods {
    /// A set remembering at most `capacity` UIDs.
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            inner: Mutex::default(),
            capacity,
        }
    }

    /// Remembers a deleted pod's UID.
    pub(crate) fn add(&self, uid: &str) {
        let mut guard = self
            .inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let (order, set) = &mut *guard;
        if uid.is_empty() || !set.insert(uid.to_string()) {
            return;
        }
        order.push_back(uid.to_string());
        while order.len() > self.capacity {
            if let Some(oldest) = order.pop_front() {
                set.remove(&oldest);
            }
        }
    }

    /// Whether a pod with this UID was seen deleted (recently).
    pub(crate) fn contains(&self, uid: &str) -> bool {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .1
            .contains(uid)
    }
}

#[cfg(test)]
mod tests;
