//! The counts behind upstream's `pv_collector_*` gauges, kept up to date as
//! the store stores, replaces and forgets objects.
//!
//! The store holds every volume and claim packed ([`crate::pv::packed`]),
//! so counting them at scrape time meant unpacking every one of them, under
//! the store's locks: at 100,000 pairs a scrape took a second of CPU while
//! the workers waited on those locks. Instead each stored object carries
//! the id of its tally (what the gauges count it under), and a scrape reads
//! one count per tally: a handful, whatever the number of objects.

use std::collections::HashMap;
use std::hash::Hash;
use std::num::NonZeroU32;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};

use crate::pv::objects::{
    ClaimPhase, VolumeMode, VolumePhase, claim_phase, claim_vac, plugin_name, volume_mode,
    volume_phase,
};

/// What the gauges count a volume under.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct VolumeTally {
    /// Whether its phase is Bound (`pv_collector_bound_pv_count`, or
    /// `..._unbound_...`).
    pub(crate) bound: bool,
    /// `spec.storageClassName` only (not the beta annotation), as upstream's
    /// collector reads it.
    pub(crate) class: String,
    /// Its plugin, as upstream names it ([`plugin_name`]).
    pub(crate) plugin: String,
    /// Its volume mode.
    pub(crate) mode: String,
}

impl VolumeTally {
    /// What `volume` is counted under.
    pub(crate) fn of(volume: &PersistentVolume) -> Self {
        Self {
            bound: volume_phase(volume) == Some(VolumePhase::Bound),
            class: volume
                .spec
                .as_ref()
                .and_then(|s| s.storage_class_name.clone())
                .unwrap_or_default(),
            plugin: plugin_name(volume),
            mode: match volume_mode(volume) {
                VolumeMode::Filesystem => "Filesystem".to_string(),
                VolumeMode::Block => "Block".to_string(),
                VolumeMode::Other(mode) => mode,
            },
        }
    }
}

/// What the gauges count a claim under.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct ClaimTally {
    /// Whether its phase is Bound.
    pub(crate) bound: bool,
    /// Its namespace.
    pub(crate) namespace: String,
    /// `spec.storageClassName`.
    pub(crate) class: String,
    /// Its VolumeAttributesClass.
    pub(crate) attributes_class: String,
    /// Whether, unbound, it names neither a volume nor a node the scheduler
    /// selected: under a WaitForFirstConsumer class, it waits for a pod as
    /// designed ([`crate::pv::consumer_wait`]). False for a bound claim.
    pub(crate) unscheduled: bool,
}

impl ClaimTally {
    /// What `claim` is counted under.
    pub(crate) fn of(claim: &PersistentVolumeClaim) -> Self {
        Self {
            bound: claim_phase(claim) == Some(ClaimPhase::Bound),
            namespace: claim.metadata.namespace.clone().unwrap_or_default(),
            class: claim
                .spec
                .as_ref()
                .and_then(|s| s.storage_class_name.clone())
                .unwrap_or_default(),
            attributes_class: claim_vac(claim).unwrap_or("").to_string(),
            unscheduled: claim_phase(claim) != Some(ClaimPhase::Bound) && unscheduled(claim),
        }
    }
}

/// Whether `claim` names neither a volume nor a selected node.
fn unscheduled(claim: &PersistentVolumeClaim) -> bool {
    let named_volume = claim
        .spec
        .as_ref()
        .and_then(|spec| spec.volume_name.as_deref())
        .is_some_and(|name| !name.is_empty());
    let selected_node = claim
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|annotations| annotations.contains_key(k8s_names::ANN_SELECTED_NODE));
    !named_volume && !selected_node
}

/// The id a stored object keeps of its tally.
pub(crate) type TallyId = NonZeroU32;

/// How many stored objects each tally has. A tally nothing is counted
/// under any more is forgotten, so namespaces and classes that come and go
/// leave nothing behind.
#[derive(Debug)]
pub(crate) struct Census<T> {
    ids: HashMap<T, TallyId>,
    /// By id - 1: the tally and its count; `None` for a free slot.
    slots: Vec<Option<(T, u64)>>,
    free: Vec<TallyId>,
}

impl<T> Default for Census<T> {
    fn default() -> Self {
        Self {
            ids: HashMap::new(),
            slots: Vec::new(),
            free: Vec::new(),
        }
    }
}

impl<T: Clone + Eq + Hash> Census<T> {
    /// Counts one more object under `tally`; the object keeps the id to
    /// [`leave`](Self::leave) with.
    pub(crate) fn enter(&mut self, tally: T) -> TallyId {
        if let Some(&id) = self.ids.get(&tally) {
            if let Some((_, count)) = self.slot(id) {
                *count += 1;
            }
            return id;
        }
        let id = if let Some(id) = self.free.pop() {
            self.slots[index(id)] = Some((tally.clone(), 1));
            id
        } else {
            self.slots.push(Some((tally.clone(), 1)));
            TallyId::new(u32::try_from(self.slots.len()).unwrap_or(u32::MAX))
                .unwrap_or(TallyId::MIN)
        };
        self.ids.insert(tally, id);
        id
    }

    /// Counts one object fewer under the tally of `id`.
    pub(crate) fn leave(&mut self, id: TallyId) {
        let Some((tally, count)) = self.slot(id) else {
            return;
        };
        *count = count.saturating_sub(1);
        if *count == 0 {
            let tally = tally.clone();
            self.ids.remove(&tally);
            self.slots[index(id)] = None;
            self.free.push(id);
        }
    }

    /// Every tally with its count (never zero).
    pub(crate) fn counts(&self) -> Vec<(T, u64)> {
        self.slots.iter().flatten().cloned().collect()
    }

    fn slot(&mut self, id: TallyId) -> Option<&mut (T, u64)> {
        self.slots.get_mut(index(id))?.as_mut()
    }
}

/// The slot of `id`.
fn index(id: TallyId) -> usize {
    id.get() as usize - 1
}

#[cfg(test)]
mod tests;
