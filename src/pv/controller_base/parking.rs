//! New volumes wait for the claims ahead of them before their first sync.
//!
//! A new volume (Pending, no claimRef) is free for claims at once (see
//! [`crate::pv::index`]), so its own first sync has only one thing to do:
//! the Pending → Available write. When many claims and volumes arrive
//! together (a controller starting on a full cluster, a batch created by a
//! tool), most of those volumes are bound by the claims queued before them,
//! and a volume bound first needs no Available write at all: binding makes
//! it Bound. So a new volume's sync is parked until every claim that was
//! queued or being synced when the volume worker reached it has had its
//! turn (a [`Mark`] of the claim queue); then it is queued again and synced
//! as usual, writing Available only if no claim took it. In a quiet cluster
//! the claim queue is idle and nothing is parked.
//!
//! This decides when a sync runs, never what it does: a parked volume is
//! already offered to every claim, and its sync, once it runs, decides as
//! always.

use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use k8s_openapi::api::core::v1::PersistentVolume;

use crate::pv::keys::VolumeName;
use crate::pv::objects::is_new_volume;
use crate::runtime::keys::ObjectKey;
use crate::runtime::queue::{Mark, WorkQueue};
use crate::runtime::sparse::shrink_when_sparse;

#[derive(Debug, Default)]
struct State {
    /// Parked volumes in the order they were parked (so by mark).
    parked: VecDeque<(Mark, VolumeName)>,
    /// The names in `parked`.
    parked_names: HashSet<VolumeName>,
    /// Volumes whose claims had their turn: their next sync runs.
    cleared: HashSet<VolumeName>,
}

impl State {
    /// Gives back the memory of a burst of parked volumes once most have
    /// gone (see [`shrink_when_sparse`]).
    fn shrink_when_sparse(&mut self) {
        let Self {
            parked,
            parked_names,
            cleared,
        } = self;
        shrink_when_sparse(parked.len(), parked.capacity(), |to| parked.shrink_to(to));
        shrink_when_sparse(parked_names.len(), parked_names.capacity(), |to| {
            parked_names.shrink_to(to);
        });
        shrink_when_sparse(cleared.len(), cleared.capacity(), |to| {
            cleared.shrink_to(to);
        });
    }
}

/// The parked new volumes. Cheap to clone; clones share the state.
#[derive(Clone)]
pub(super) struct Parking {
    state: Arc<Mutex<State>>,
    claim_queue: WorkQueue<ObjectKey>,
    volume_queue: WorkQueue<VolumeName>,
}

impl Parking {
    pub(super) fn new(
        claim_queue: WorkQueue<ObjectKey>,
        volume_queue: WorkQueue<VolumeName>,
    ) -> Self {
        Self {
            state: Arc::default(),
            claim_queue,
            volume_queue,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether the sync of `volume` (as the volume worker is about to sync
    /// it) waits for the claims ahead of it; if so it is parked, and queued
    /// again once they had their turn.
    pub(super) fn park(&self, name: &VolumeName, volume: &PersistentVolume) -> bool {
        let mut state = self.lock();
        let cleared = state.cleared.remove(name);
        if cleared {
            state.shrink_when_sparse();
        }
        if cleared || !is_new_volume(volume) {
            return false;
        }
        if state.parked_names.contains(name) {
            return true;
        }
        // Under the state's lock: `release_passed` runs after each claim's
        // turn ends and takes this lock first, so a mark that passes right
        // after this check is still seen by it.
        let mark = self.claim_queue.mark();
        if self.claim_queue.passed(mark) {
            return false;
        }
        tracing::debug!(volume = %name, "new volume waits for the claims queued before it");
        state.parked.push_back((mark, name.clone()));
        state.parked_names.insert(name.clone());
        true
    }

    /// Queues again every parked volume whose claims have all had their
    /// turn; called whenever a claim's turn ends.
    pub(super) fn release_passed(&self) {
        let mut state = self.lock();
        while let Some(&(mark, _)) = state.parked.front() {
            if !self.claim_queue.passed(mark) {
                break;
            }
            let Some((_, name)) = state.parked.pop_front() else {
                break;
            };
            state.parked_names.remove(&name);
            state.cleared.insert(name.clone());
            self.volume_queue.add(name);
        }
        state.shrink_when_sparse();
    }

    /// Whether the volume `name` is parked: a parked volume is queued again
    /// when the claims ahead of it had their turn, and a change to it is
    /// queued as any other, so a resync need not.
    pub(super) fn is_parked(&self, name: &str) -> bool {
        self.lock().parked_names.contains(name)
    }

    /// The volume is gone: nothing waits for it any more.
    pub(super) fn forget(&self, name: &VolumeName) {
        let mut state = self.lock();
        state.cleared.remove(name);
        if state.parked_names.remove(name) {
            state.parked.retain(|(_, parked)| parked != name);
        }
    }

    /// How many volumes are parked.
    #[cfg(test)]
    fn parked(&self) -> usize {
        self.lock().parked.len()
    }
}

#[cfg(test)]
mod tests;
