//! The volume index: every known PersistentVolume, filed so that the best
//! volume for a claim is found without scanning them all.
//!
//! The choice is upstream's (`index.go` `findByClaim` with
//! `FindMatchingVolume`, controller path: no node, no exclusions):
//!
//! 1. Volumes are grouped by their set of access modes. A claim tries every
//!    group whose set contains the modes it asks for, fewest modes first
//!    (equal sizes in canonical mode order, where upstream's order is
//!    random), and takes the first group that yields a volume. So a volume
//!    with fewer extra modes beats a smaller one with more.
//! 2. Within a group a volume is skipped when its claimRef names another
//!    claim, when it is smaller than the request, when its volume mode or its
//!    VolumeAttributesClass differs from the claim's, or when it is being
//!    deleted.
//! 3. A volume pre-bound to the claim (claimRef names it) that passes step 2
//!    is taken at once, whatever its phase, labels or class (of several in
//!    one group, the first by name).
//! 4. Otherwise, under delayed binding (WaitForFirstConsumer) nothing else is
//!    taken: the scheduler binds such claims. Without it, the smallest free
//!    volume of the claim's class whose labels fit the claim's selector is
//!    taken (ties by name, where upstream keeps the first seen).
//!
//! A free volume has no claimRef, is not being deleted, and is Available or
//! new (Pending, or no phase yet). Upstream offers only Available volumes,
//! so a new volume waits for the controller's own Pending → Available write
//! before any claim can have it, and claims synced meanwhile take whatever
//! else is Available, a larger volume included. Here a new volume is offered
//! at once: nothing is lost by it, since every write of this controller
//! edits the newest copy of its object (so the binding and the phase write
//! never meet in a conflict), and a volume bound before its phase write
//! never needs that write at all.
//!
//! A free volume can be reserved for one claim while that claim's binding is
//! under way ([`VolumeIndex::reserve`]): searches for every other claim pass
//! it by, so two workers binding two claims at once never pick the same
//! volume. The reservation is dropped when the binding ends, whether it
//! succeeded (the volume then names its claim) or failed (the volume is free
//! for anyone again).
//!
//! To keep a search cheap with thousands of volumes, each volume's capacity,
//! modes and filters are read once when it is inserted. Free volumes sit in
//! buckets keyed by everything that must be equal (modes, class, volume
//! mode, VolumeAttributesClass), each ordered by capacity and holding each
//! volume's labels beside its name, so a search starts at the requested
//! size and only checks the selector, without looking the volume up.
//! Volumes with a claimRef are filed under the claim they name, which is all
//! step 3 needs. A volume whose capacity or access modes cannot be read is
//! stored but never offered.
//!
//! Volumes are stored packed ([`crate::pv::packed`]); a search reads only
//! what was filed at insertion and unpacks the one volume it returns (and
//! the volumes pre-bound to the claim, to check their claimRef's UID).

use std::borrow::Borrow;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::PersistentVolume;
use quantity::Amount;

use crate::pv::census::TallyId;
use crate::pv::keys::VolumeName;
use crate::pv::objects::{
    AccessModes, ObjectError, VolumeMode, VolumePhase, is_being_deleted, volume_access_modes,
    volume_capacity, volume_class, volume_mode, volume_vac,
};
use crate::pv::packed::{Completed, Partner, Stored, Version};
use crate::runtime::keys::ObjectKey;
use selector::{Selector, SelectorCache};

/// Why a claim could not be matched at all (as opposed to "no volume fits").
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MatchError {
    /// The claim's request or access modes cannot be read.
    #[error("cannot match {0}")]
    Claim(#[from] ObjectError),
    /// The claim's label selector is invalid.
    #[error("cannot match claim \"{claim}\": invalid label selector: {source}")]
    Selector {
        /// The claim with the bad selector.
        claim: ObjectKey,
        /// What is wrong with it.
        #[source]
        source: SelectorError,
    },
}

/// What makes a label selector requirement invalid (upstream's
/// `LabelSelectorAsSelector` rules; key and value syntax is not checked).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    /// The operator is not In, NotIn, Exists or DoesNotExist.
    #[error("key {key:?}: unknown operator {operator:?}")]
    UnknownOperator {
        /// The label key of the requirement.
        key: String,
        /// The operator as written.
        operator: String,
    },
    /// In or NotIn without values.
    #[error("key {key:?}: operator {operator} needs at least one value")]
    MissingValues {
        /// The label key of the requirement.
        key: String,
        /// In or NotIn.
        operator: String,
    },
    /// Exists or DoesNotExist with values.
    #[error("key {key:?}: operator {operator} takes no values")]
    UnexpectedValues {
        /// The label key of the requirement.
        key: String,
        /// Exists or DoesNotExist.
        operator: String,
    },
}

/// The claim a volume is reserved for, and by how many reservations.
#[derive(Debug)]
struct Reserved {
    claim: ObjectKey,
    count: u32,
}

/// All volumes the controller knows, with the structures that make
/// [`VolumeIndex::find_best_match`] fast. See the module documentation.
///
/// Each volume's name is held once and shared by every structure that
/// files it, as are the claim keys volumes are filed under and the buckets
/// (a handful of distinct ones, whatever the number of volumes).
#[derive(Debug, Default)]
pub struct VolumeIndex {
    /// Every volume by name, hashed: a lookup costs the same with ten
    /// volumes or a hundred thousand. Nothing needs the volumes in name
    /// order but the few callers that sort what they take. Each entry is
    /// boxed: the table then holds two pointers a slot, not the whole
    /// entry, in every slot of a table kept at most seven-eighths full
    /// and grown by doubling.
    volumes: HashMap<Name, Box<Entry>>,
    /// The free volumes of each bucket by capacity, each with its labels:
    /// a search walks them from the requested size on.
    free: HashMap<Arc<Bucket>, FreeBySize>,
    /// The same free volumes, each bucket's grouped by label set: a claim
    /// with a selector checks it once per label set instead of once per
    /// volume.
    labelled: HashMap<Arc<Bucket>, BTreeMap<Arc<Labels>, BySize>>,
    /// The volumes whose claimRef names a claim, by that claim, in name
    /// order (nearly always one).
    claimed: HashMap<Arc<ObjectKey>, Filed>,
    /// Volumes reserved for the claim whose binding is under way.
    reserved: HashMap<String, Reserved>,
    /// Every bucket seen, shared by the volumes' [`Traits`].
    buckets: HashSet<Arc<Bucket>>,
    /// Bumped by every change of a volume or a reservation, so an
    /// explanation made earlier is known to still hold.
    changes: u64,
    /// The label selectors of the claims searched for lately, compiled.
    selectors: SelectorCache,
    /// Tests only: a search with a selector walks the bucket in capacity
    /// order however few label sets it has, so that the property test
    /// checks both ways of searching.
    #[cfg(test)]
    always_walk: bool,
}

#[derive(Debug)]
struct Entry {
    volume: Stored<PersistentVolume>,
    /// `None` when the volume can never match (unreadable capacity or modes).
    traits: Option<Traits>,
}

/// What matching needs of a volume, read once at insertion.
#[derive(Debug)]
struct Traits {
    /// Its access modes, class, volume mode and VolumeAttributesClass.
    bucket: Arc<Bucket>,
    capacity: Amount,
    deleting: bool,
    place: Place,
}

/// A volume's name, shared by every structure of the index that files it.
type Name = Arc<str>;

/// Where a searchable volume is filed.
#[derive(Debug)]
enum Place {
    /// Free (unclaimed, Available or new, not being deleted): offered to
    /// any fitting claim of its bucket. Its labels are shared with every
    /// free volume of the bucket that has the same.
    Free(Arc<Labels>),
    /// Has a claimRef: offered only to the claim it names.
    Claimed(Arc<ObjectKey>),
    /// Unclaimed but Bound, Released, Failed or being deleted: offered to
    /// no one.
    Unavailable,
}

/// Volume names by capacity, ties by name.
type BySize = BTreeSet<(Amount, Name)>;

/// Free volume names by capacity, ties by name, each with its labels (the
/// ones its [`Place::Free`] shares): one pointer a free volume more than
/// [`BySize`], for a walk that reads the labels in place.
type FreeBySize = BTreeMap<(Amount, Name), Arc<Labels>>;

/// The names of the volumes filed under one claim, in name order. Nearly
/// always one, held in place: a list of its own for each of a hundred
/// thousand bound volumes would cost 64 bytes a volume.
#[derive(Debug)]
enum Filed {
    One(Name),
    /// Two or more, sorted.
    Many(Vec<Name>),
}

impl Filed {
    /// Adds `name`, unless it is there already.
    fn insert(&mut self, name: &Name) {
        match self {
            Filed::One(one) if one == name => {}
            Filed::One(one) => {
                let mut names = vec![Arc::clone(one), Arc::clone(name)];
                names.sort_unstable();
                *self = Filed::Many(names);
            }
            Filed::Many(names) => {
                if let Err(at) = names.binary_search(name) {
                    names.insert(at, Arc::clone(name));
                }
            }
        }
    }

    /// Removes `name`; returns whether no name is left.
    fn remove(&mut self, name: &str) -> bool {
        match self {
            Filed::One(one) => **one == *name,
            Filed::Many(names) => {
                names.retain(|n| **n != *name);
                match names.as_slice() {
                    [] => true,
                    [one] => {
                        let one = Arc::clone(one);
                        *self = Filed::One(one);
                        false
                    }
                    _ => false,
                }
            }
        }
    }

    fn iter(&self) -> std::slice::Iter<'_, Name> {
        match self {
            Filed::One(one) => std::slice::from_ref(one).iter(),
            Filed::Many(names) => names.iter(),
        }
    }
}

/// A volume's labels, as a key of [`VolumeIndex::labelled`].
type Labels = BTreeMap<String, String>;

/// Whether a volume in this phase may be offered when it has no claimRef:
/// Available, or new (Pending, no phase yet); an unknown phase may not.
fn offerable_phase(phase: Option<&str>) -> bool {
    phase.is_none_or(|text| {
        matches!(
            VolumePhase::parse(text),
            Some(VolumePhase::Pending | VolumePhase::Available)
        )
    })
}

/// Everything that must be equal between an unclaimed volume and a claim.
#[derive(Debug, PartialEq, Eq, Hash)]
struct Bucket {
    modes: AccessModes,
    class: String,
    volume_mode: VolumeMode,
    vac: Option<String>,
}

impl Traits {
    /// What matching needs of `volume`; `None` when it can never match.
    /// Its bucket, labels and claim key are fresh copies, for the index to
    /// swap for the ones it shares.
    fn read(volume: &PersistentVolume) -> Option<Self> {
        let capacity = volume_capacity(volume).ok()?;
        let bucket = Bucket {
            modes: volume_access_modes(volume).ok()?,
            class: volume_class(volume).to_owned(),
            volume_mode: volume_mode(volume),
            vac: volume_vac(volume).map(str::to_owned),
        };
        let deleting = is_being_deleted(&volume.metadata);
        let spec = volume.spec.as_ref();
        let claim_ref = spec.and_then(|s| s.claim_ref.as_ref());
        let offerable = offerable_phase(volume.status.as_ref().and_then(|s| s.phase.as_deref()));
        let place = match claim_ref {
            Some(r) => Place::Claimed(Arc::new(ObjectKey::of_reference(r))),
            None if offerable && !deleting => {
                Place::Free(Arc::new(volume.metadata.labels.clone().unwrap_or_default()))
            }
            None => Place::Unavailable,
        };
        Some(Self {
            bucket: Arc::new(bucket),
            capacity,
            deleting,
            place,
        })
    }
}

impl VolumeIndex {
    /// Adds a volume, replacing any volume of the same name (a volume a
    /// watch has shown stays so, see [`VolumeIndex::set_listed`]). Returns
    /// whether this made the volume free when it was not (new to the index,
    /// or unclaimed or Available again), and it is not reserved: news for
    /// the claims that found nothing so far. Fails, storing nothing, only
    /// when the volume cannot be packed.
    pub fn insert(
        &mut self,
        volume: impl Borrow<PersistentVolume>,
    ) -> Result<bool, serde_json::Error> {
        let volume = volume.borrow();
        self.changes += 1;
        let name = volume.metadata.name.as_deref().unwrap_or_default();
        let listed = self.is_listed(name);
        let stored = Stored::new(volume, listed)?;
        let was_free = self.is_free(name);
        let name = match self.forget(name) {
            Some((shared, _)) => shared,
            None => Name::from(name),
        };
        let mut traits = Traits::read(volume);
        if let Some(traits) = &mut traits {
            self.file(&name, traits);
        }
        self.volumes.insert(
            Arc::clone(&name),
            Box::new(Entry {
                volume: stored,
                traits,
            }),
        );
        Ok(!was_free && self.is_free(&name) && !self.reserved.contains_key(&*name))
    }

    /// Files the volume `name` where `traits` place it, swapping their
    /// bucket, labels and claim key for the ones the index shares.
    fn file(&mut self, name: &Name, traits: &mut Traits) {
        match self.buckets.get(&traits.bucket) {
            Some(shared) => traits.bucket = Arc::clone(shared),
            None => {
                self.buckets.insert(Arc::clone(&traits.bucket));
            }
        }
        let bucket = &traits.bucket;
        match &mut traits.place {
            Place::Free(labels) => {
                let item = (traits.capacity, Arc::clone(name));
                let groups = self.labelled.entry(Arc::clone(bucket)).or_default();
                if let Some((shared, _)) = groups.get_key_value(&**labels) {
                    *labels = Arc::clone(shared);
                }
                groups
                    .entry(Arc::clone(labels))
                    .or_default()
                    .insert(item.clone());
                self.free
                    .entry(Arc::clone(bucket))
                    .or_default()
                    .insert(item, Arc::clone(labels));
            }
            Place::Claimed(key) => {
                if let Some((shared, _)) = self.claimed.get_key_value(&**key) {
                    *key = Arc::clone(shared);
                }
                self.claimed
                    .entry(Arc::clone(key))
                    .and_modify(|names| names.insert(name))
                    .or_insert_with(|| Filed::One(Arc::clone(name)));
            }
            Place::Unavailable => {}
        }
    }

    /// Marks the volume of that name as shown by a watch (not only known
    /// from the answer of a write of the controller's own).
    pub fn set_listed(&mut self, name: &str) {
        if let Some(entry) = self.volumes.get_mut(name) {
            entry.volume.set_listed();
        }
    }

    /// Whether the volume of that name is stored and a watch has shown it.
    pub fn is_listed(&self, name: &str) -> bool {
        self.volumes.get(name).is_some_and(|e| e.volume.listed())
    }

    /// What the state gauges count the volume of that name under, once
    /// counted.
    pub(crate) fn tally(&self, name: &str) -> Option<TallyId> {
        self.volumes.get(name)?.volume.tally()
    }

    /// Records what the state gauges count the volume of that name under.
    pub(crate) fn set_tally(&mut self, name: &str, tally: TallyId) {
        if let Some(entry) = self.volumes.get_mut(name) {
            entry.volume.set_tally(tally);
        }
    }

    /// The stored resourceVersion of the volume of that name: `None` when
    /// no such volume is stored, `Some(None)` when it has none.
    pub(crate) fn version(&self, name: &str) -> Option<Option<&Version>> {
        self.volumes.get(name).map(|e| e.volume.version())
    }

    /// Records that a sync of `version` of the volume of that name found it
    /// completed with `claim` at `claim_version` (see [`Completed`]); ignored
    /// when another version is stored now.
    pub(crate) fn complete_with_claim(
        &mut self,
        name: &str,
        version: Option<&str>,
        claim: &ObjectKey,
        claim_version: Version,
    ) {
        let Some(entry) = self.volumes.get_mut(name) else {
            return;
        };
        let partner = match entry.traits.as_ref().map(|t| &t.place) {
            Some(Place::Claimed(key)) if **key == *claim => Arc::clone(key),
            _ => Arc::new(claim.clone()),
        };
        let completed = Completed {
            partner: Some((Partner::Claim(partner), claim_version)),
        };
        entry.volume.complete(version, completed);
    }

    /// Records what a sync of `version` of the volume of that name found it
    /// completed with (see [`Completed`]); ignored when another version is
    /// stored now.
    pub(crate) fn complete(&mut self, name: &str, version: Option<&str>, completed: Completed) {
        if let Some(entry) = self.volumes.get_mut(name) {
            entry.volume.complete(version, completed);
        }
    }

    /// The index's own copy of the name of that volume, if it is stored,
    /// for others to share.
    pub(crate) fn shared_name(&self, name: &str) -> Option<Name> {
        self.volumes
            .get_key_value(name)
            .map(|(name, _)| Arc::clone(name))
    }

    /// What a sync of the stored version of the volume of that name found
    /// it completed with, if it did.
    pub(crate) fn completed(&self, name: &str) -> Option<&Completed> {
        self.volumes.get(name)?.volume.completed()
    }

    /// Whether the volume of that name is free (see the module
    /// documentation), reserved or not.
    fn is_free(&self, name: &str) -> bool {
        self.volumes
            .get(name)
            .and_then(|e| e.traits.as_ref())
            .is_some_and(|t| matches!(t.place, Place::Free(..)))
    }

    /// Removes the volume of that name, returning it if it was there.
    pub fn remove(&mut self, name: &str) -> Option<Arc<PersistentVolume>> {
        self.changes += 1;
        self.forget(name)?.1.volume.object()
    }

    /// How many changes of volumes and reservations the index has seen:
    /// equal counts, equal verdicts for a claim that did not change.
    pub fn changes(&self) -> u64 {
        self.changes
    }

    /// Removes the volume of that name and its filing, returning its
    /// shared name and its entry if it was there.
    fn forget(&mut self, name: &str) -> Option<(Name, Box<Entry>)> {
        let (name, entry) = self.volumes.remove_entry(name)?;
        if let Some(traits) = &entry.traits {
            let bucket = &traits.bucket;
            match &traits.place {
                Place::Free(labels) => {
                    let item = (traits.capacity, Arc::clone(&name));
                    if let Some(set) = self.free.get_mut(bucket) {
                        set.remove(&item);
                        if set.is_empty() {
                            self.free.remove(bucket);
                        }
                    }
                    if let Some(groups) = self.labelled.get_mut(bucket) {
                        if let Some(set) = groups.get_mut(&**labels) {
                            set.remove(&item);
                            if set.is_empty() {
                                groups.remove(&**labels);
                            }
                        }
                        if groups.is_empty() {
                            self.labelled.remove(bucket);
                        }
                    }
                }
                Place::Claimed(key) => {
                    if let Some(names) = self.claimed.get_mut(key)
                        && names.remove(&name)
                    {
                        self.claimed.remove(key);
                    }
                }
                Place::Unavailable => {}
            }
        }
        Some((name, entry))
    }

    /// A copy of the volume of that name, if present.
    pub fn get(&self, name: &str) -> Option<Arc<PersistentVolume>> {
        self.volumes.get(name)?.volume.object()
    }

    /// The names of all volumes, in no particular order, each sharing the
    /// index's string.
    pub fn names(&self) -> impl Iterator<Item = VolumeName> + '_ {
        self.volumes
            .keys()
            .map(|name| VolumeName::from(Arc::clone(name)))
    }

    /// How many volumes are stored, searchable or not.
    pub fn len(&self) -> usize {
        self.volumes.len()
    }

    /// Whether no volume is stored.
    #[cfg(feature = "testing")]
    pub fn is_empty(&self) -> bool {
        self.volumes.is_empty()
    }
}

mod explain;
mod reservations;
mod search;
mod selector;
pub(crate) use explain::human;
pub(crate) use explain::{Candidate, Verdict};

#[cfg(test)]
mod tests;
