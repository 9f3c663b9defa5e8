//! The binder's store: the newest version of every PersistentVolume and
//! PersistentVolumeClaim the process has seen or written, the process's one
//! store of both kinds.
//!
//! Binding makes several API writes whose watch events come back late and out
//! of order. Deciding from the watch stream alone would then offer a volume
//! that was just bound to a second claim, or plan a status write on a copy
//! older than the spec just written. So every watch event *and* every answer
//! to a write is offered here, and the decisions read from here (upstream's
//! `ctrl.volumes` / `ctrl.claims` with `storeObjectUpdate`).
//!
//! An offer is kept when it is newer than the stored version, by the one
//! rule of [`crate::runtime::version`]; older ones are dropped. An offer of
//! the stored version is the stored object itself (the API server never
//! gives two contents one resourceVersion): the watch event of the
//! controller's own write, whose answer is stored already, or an object
//! listed again. Nothing is stored again for it, so the object stays
//! unpacked where it was kept and a record that its binding is complete
//! holds; the caller syncs it all the same.
//!
//! The store is the process's only copy of volumes and claims, and it
//! holds each one packed ([`crate::pv::packed`]): a read returns a fresh
//! `Arc`, or the one kept for the last few objects read or written
//! ([`Recent`]), which the store keeps as new as the packed ones. It also
//! knows which objects a watch has shown ([`PvStore::listed_volume`]): an
//! object known only from the answer of the controller's own write (a
//! volume it has just created, a write that crossed the object's deletion)
//! is not synced on its own.
//!
//! Volumes live in the [`VolumeIndex`] under one lock, so a stored volume and
//! its place in the index never disagree: once a bound volume is offered, no
//! other claim can be matched to it. A volume reserved for a claim
//! ([`PvStore::reserve`], taken by the executor for the plan that binds
//! it) is passed by by every search for another claim until the plan ends.
//!
//! Whenever a volume becomes free for every claim (a new volume, one made
//! Available or unbound again, one whose reservation was dropped), the hook
//! installed with [`PvStore::on_volume_freed`] is called, after the lock
//! is released: claims that found nothing may fit now.

use std::borrow::Borrow;
use std::collections::HashMap;
use std::fmt;
use std::sync::{
    Arc, Mutex, MutexGuard, OnceLock, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard,
};

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};

use crate::pv::census::{Census, ClaimTally, VolumeTally};
use crate::pv::index::{Candidate, MatchError, VolumeIndex};
use crate::pv::keys::VolumeName;
use crate::pv::objects::ObjectName;
use crate::pv::packed::{Recent, Stored, Version};
use crate::runtime::informer::{Store, StoreError};
use crate::runtime::keys::ObjectKey;
use crate::runtime::version::{self, Age, age_of_numbers};

/// The store of volumes (with their index) and claims; see the module
/// documentation. Cheap to share: wrap it in an `Arc`.
#[derive(Debug, Default)]
pub struct PvStore {
    volumes: RwLock<VolumeIndex>,
    /// Every claim by key, hashed as the index's volumes are.
    claims: RwLock<HashMap<ObjectKey, Stored<PersistentVolumeClaim>>>,
    /// The volumes read or written last, unpacked; changed only under the
    /// `volumes` lock (a read lock is enough for what a read unpacked: no
    /// store can happen meanwhile).
    recent_volumes: Recent<String, PersistentVolume>,
    /// The claims read or written last, under the `claims` lock likewise.
    recent_claims: Recent<ObjectKey, PersistentVolumeClaim>,
    /// What the state gauges count the stored volumes under; changed only
    /// under the `volumes` write lock.
    volume_census: Mutex<Census<VolumeTally>>,
    /// Likewise for claims, under the `claims` write lock.
    claim_census: Mutex<Census<ClaimTally>>,
    freed: FreedHook,
}

/// What to call when a volume becomes free for every claim.
#[derive(Default)]
struct FreedHook(OnceLock<Box<dyn Fn() + Send + Sync>>);

impl FreedHook {
    fn call(&self) {
        if let Some(hook) = self.0.get() {
            hook();
        }
    }
}

impl fmt::Debug for FreedHook {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("FreedHook")
    }
}

/// A volume reserved for one claim while that claim's binding is under
/// way: searches for other claims pass it by until this is dropped,
/// whatever the binding's outcome.
#[derive(Debug)]
pub struct ReservedVolume {
    store: Arc<PvStore>,
    name: String,
    claim: ObjectKey,
}

impl Drop for ReservedVolume {
    fn drop(&mut self) {
        let freed = write(&self.store.volumes).release(&self.name, &self.claim);
        if freed {
            self.store.freed.call();
        }
    }
}

/// Locks for reading. A poisoned lock is used anyway: no code in this module
/// panics while holding a lock, and every write replaces whole entries, so the
/// data behind the lock is consistent.
fn read<T>(lock: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(PoisonError::into_inner)
}

/// Locks a census, recovering a poisoned lock as [`read`] does.
fn count<T>(census: &Mutex<Census<T>>) -> MutexGuard<'_, Census<T>> {
    census.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Locks for writing, recovering a poisoned lock as [`read`] does.
fn write<T>(lock: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(PoisonError::into_inner)
}

/// How an offered version stands against the stored one, by the one rule
/// of [`crate::runtime::version`].
fn age_against(stored: Option<&Version>, offered: Option<&str>) -> Age {
    let held = match stored {
        Some(Version::Number(number)) => Some(*number),
        Some(Version::Text(_)) | None => None,
    };
    age_of_numbers(held, version::number(offered))
}

/// The error of an object that cannot be packed.
fn unpackable(object: &ObjectName, reason: impl std::fmt::Display) -> StoreError {
    StoreError {
        object: object.to_string(),
        reason: format!("cannot be stored: {reason}"),
    }
}

impl PvStore {
    /// A store that keeps the last `recent` volumes and the last `recent`
    /// claims read or written unpacked ([`Recent`]): at least as many as
    /// the controller's workers have in flight, or their reads unpack again
    /// what a moment ago was at hand.
    pub fn with_recent(recent: usize) -> Self {
        Self {
            recent_volumes: Recent::new(recent),
            recent_claims: Recent::new(recent),
            ..Self::default()
        }
    }

    /// Installs what to call whenever a volume becomes free for every claim
    /// (see the module documentation); the wiring installs it once, later
    /// calls are ignored. The hook runs outside the store's locks and should
    /// be quick.
    pub fn on_volume_freed(&self, hook: impl Fn() + Send + Sync + 'static) {
        if self.freed.0.set(Box::new(hook)).is_err() {
            tracing::warn!("the store's volume hook is installed already");
        }
    }

    /// Offers a volume known from the answer of a write: stores it (and
    /// re-files it in the index) unless the stored version is as new.
    /// Returns whether it was stored.
    pub fn offer_volume(
        &self,
        volume: impl Into<Arc<PersistentVolume>>,
    ) -> Result<bool, StoreError> {
        let volume = volume.into();
        self.offer_volume_from(&volume, false, Some(&volume))
    }

    /// Offers a volume a watch has shown, as [`PvStore::offer_volume`];
    /// the volume counts as listed from now on, even when a newer version
    /// is kept.
    pub fn offer_listed_volume(
        &self,
        volume: impl Borrow<PersistentVolume>,
    ) -> Result<bool, StoreError> {
        self.offer_volume_from(volume.borrow(), true, None)
    }

    /// Stores `volume` unless the stored version is newer, listed or not,
    /// and keeps it unpacked when it comes as an `Arc`.
    fn offer_volume_from(
        &self,
        volume: &PersistentVolume,
        listed: bool,
        shared: Option<&Arc<PersistentVolume>>,
    ) -> Result<bool, StoreError> {
        let freed = {
            let mut index = write(&self.volumes);
            let name = volume.metadata.name.as_deref().unwrap_or("");
            if let Some(stored) = index.version(name) {
                let offered = volume.metadata.resource_version.as_deref();
                if age_against(stored, offered) != Age::Newer {
                    if listed {
                        index.set_listed(name);
                    }
                    return Ok(false);
                }
            }
            let counted = index.tally(name);
            let freed = index
                .insert(volume)
                .map_err(|error| unpackable(&ObjectName::of_volume(volume), error))?;
            let mut census = count(&self.volume_census);
            index.set_tally(name, census.enter(VolumeTally::of(volume)));
            if let Some(counted) = counted {
                census.leave(counted);
            }
            drop(census);
            if listed {
                index.set_listed(name);
            }
            match shared {
                Some(shared) => self.recent_volumes.put(name.to_owned(), Arc::clone(shared)),
                None => self.recent_volumes.forget(name),
            }
            freed
        };
        if freed {
            self.freed.call();
        }
        Ok(true)
    }

    /// The stored volume of that name.
    pub fn volume(&self, name: &VolumeName) -> Option<Arc<PersistentVolume>> {
        self.recent_volume(&read(&self.volumes), name.as_str())
    }

    /// The stored volume of that name, if a watch has shown it: what a
    /// volume worker syncs.
    pub fn listed_volume(&self, name: &VolumeName) -> Option<Arc<PersistentVolume>> {
        let index = read(&self.volumes);
        if !index.is_listed(name.as_str()) {
            return None;
        }
        self.recent_volume(&index, name.as_str())
    }

    /// The volume of that name as kept unpacked, or unpacked now and kept.
    fn recent_volume(&self, index: &VolumeIndex, name: &str) -> Option<Arc<PersistentVolume>> {
        if let Some(volume) = self.recent_volumes.get(name) {
            return Some(volume);
        }
        let volume = index.get(name)?;
        self.recent_volumes
            .put(name.to_owned(), Arc::clone(&volume));
        Some(volume)
    }

    /// Forgets a volume (it was deleted), returning what was stored.
    pub fn remove_volume(&self, name: &VolumeName) -> Option<Arc<PersistentVolume>> {
        let mut index = write(&self.volumes);
        self.recent_volumes.forget(name.as_str());
        if let Some(counted) = index.tally(name.as_str()) {
            count(&self.volume_census).leave(counted);
        }
        index.remove(name.as_str())
    }

    /// Every stored volume, in name order, each unpacked (and the lock
    /// taken) only as the iterator reaches it: going through thousands never
    /// holds more than one of them, and leaves the recent ones as they are.
    pub fn volumes(&self) -> impl Iterator<Item = Arc<PersistentVolume>> + '_ {
        self.volume_names().into_iter().filter_map(|name| {
            let index = read(&self.volumes);
            self.recent_volumes
                .get(name.as_str())
                .or_else(|| index.get(name.as_str()))
        })
    }

    /// The names of all stored volumes, in order.
    pub fn volume_names(&self) -> Vec<VolumeName> {
        let mut names: Vec<VolumeName> = read(&self.volumes).names().collect();
        names.sort_unstable();
        names
    }

    /// How many volumes are stored.
    pub fn volumes_len(&self) -> usize {
        read(&self.volumes).len()
    }

    /// The best stored volume for `claim` (see [`VolumeIndex::find_best_match`]):
    /// volumes reserved for other claims are passed by.
    pub fn best_match(
        &self,
        claim: &PersistentVolumeClaim,
        delay_binding: bool,
    ) -> Result<Option<Arc<PersistentVolume>>, MatchError> {
        let index = read(&self.volumes);
        let found = index.find_best_match(claim, delay_binding)?;
        if let Some(volume) = &found {
            // The binding reads it next.
            let name = volume.metadata.name.as_deref().unwrap_or("");
            self.recent_volumes.put(name.to_owned(), Arc::clone(volume));
        }
        Ok(found)
    }

    /// Reserves the volume `name` for the claim `claim` until what is
    /// returned is dropped; refused when it is reserved for another claim.
    /// A volume reserved for this claim already (by an earlier reservation
    /// still alive) stays reserved until both are dropped.
    pub fn reserve(self: &Arc<Self>, name: &str, claim: &ObjectKey) -> Option<ReservedVolume> {
        if !write(&self.volumes).reserve(name, claim) {
            return None;
        }
        Some(ReservedVolume {
            store: Arc::clone(self),
            name: name.to_owned(),
            claim: claim.clone(),
        })
    }

    /// How many changes of volumes and reservations the index has seen
    /// (see [`VolumeIndex::changes`]).
    pub fn index_changes(&self) -> u64 {
        read(&self.volumes).changes()
    }

    /// Every stored volume with its verdict for `claim` (see
    /// [`VolumeIndex::explain`]), read under the index's lock.
    pub fn explain(
        &self,
        claim: &PersistentVolumeClaim,
        delay_binding: bool,
    ) -> Result<Vec<Candidate>, MatchError> {
        read(&self.volumes).explain(claim, delay_binding)
    }

    /// The nearest misses among the stored volumes for `claim`, for an
    /// event (see [`VolumeIndex::nearest_misses`]), read under the index's
    /// lock.
    pub fn nearest_misses(
        &self,
        claim: &PersistentVolumeClaim,
        delay_binding: bool,
    ) -> Result<Option<String>, MatchError> {
        read(&self.volumes).nearest_misses(claim, delay_binding)
    }

    /// Whether the volume of that name is reserved for a claim being bound.
    pub fn is_reserved(&self, name: &VolumeName) -> bool {
        read(&self.volumes).is_reserved(name.as_str())
    }

    /// Offers a claim known from the answer of a write: stores it unless
    /// the stored version is as new. Returns whether it was stored.
    pub fn offer_claim(
        &self,
        claim: impl Into<Arc<PersistentVolumeClaim>>,
    ) -> Result<bool, StoreError> {
        let claim = claim.into();
        self.offer_claim_from(&claim, false, Some(&claim))
    }

    /// Offers a claim a watch has shown, as [`PvStore::offer_claim`];
    /// the claim counts as listed from now on, even when a newer version is
    /// kept.
    pub fn offer_listed_claim(
        &self,
        claim: impl Borrow<PersistentVolumeClaim>,
    ) -> Result<bool, StoreError> {
        self.offer_claim_from(claim.borrow(), true, None)
    }

    /// Stores `claim` as [`PvStore::offer_volume_from`] does a volume.
    fn offer_claim_from(
        &self,
        claim: &PersistentVolumeClaim,
        listed: bool,
        shared: Option<&Arc<PersistentVolumeClaim>>,
    ) -> Result<bool, StoreError> {
        let key = ObjectKey::of(claim);
        let mut claims = write(&self.claims);
        let mut was_listed = false;
        if let Some(stored) = claims.get_mut(&key) {
            let offered = claim.metadata.resource_version.as_deref();
            if age_against(stored.version(), offered) != Age::Newer {
                if listed {
                    stored.set_listed();
                }
                return Ok(false);
            }
            was_listed = stored.listed();
        }
        let mut stored = Stored::new(claim, listed || was_listed)
            .map_err(|error| unpackable(&ObjectName::Claim(key.clone()), error))?;
        let mut census = count(&self.claim_census);
        stored.set_tally(census.enter(ClaimTally::of(claim)));
        match shared {
            Some(shared) => self.recent_claims.put(key.clone(), Arc::clone(shared)),
            None => self.recent_claims.forget(&key),
        }
        if let Some(counted) = claims.insert(key, stored).and_then(|old| old.tally()) {
            census.leave(counted);
        }
        Ok(true)
    }

    /// The stored claim with that key.
    pub fn claim(&self, key: &ObjectKey) -> Option<Arc<PersistentVolumeClaim>> {
        let claims = read(&self.claims);
        if let Some(claim) = self.recent_claims.get(key) {
            return Some(claim);
        }
        let claim = claims.get(key)?.object()?;
        self.recent_claims.put(key.clone(), Arc::clone(&claim));
        Some(claim)
    }

    /// Whether the claim with that key is stored and a watch has shown it:
    /// what a claim worker syncs.
    pub fn is_listed_claim(&self, key: &ObjectKey) -> bool {
        read(&self.claims).get(key).is_some_and(Stored::listed)
    }

    /// Forgets a claim (it was deleted), returning what was stored.
    pub fn remove_claim(&self, key: &ObjectKey) -> Option<Arc<PersistentVolumeClaim>> {
        let mut claims = write(&self.claims);
        self.recent_claims.forget(key);
        let stored = claims.remove(key)?;
        if let Some(counted) = stored.tally() {
            count(&self.claim_census).leave(counted);
        }
        stored.object()
    }

    /// The stored claims with these keys, in the keys' order, each unpacked
    /// only as the iterator reaches it; keys no longer stored are passed by.
    pub fn claims_of(
        &self,
        keys: Vec<ObjectKey>,
    ) -> impl Iterator<Item = Arc<PersistentVolumeClaim>> + '_ {
        keys.into_iter().filter_map(|key| {
            let claims = read(&self.claims);
            self.recent_claims
                .get(&key)
                .or_else(|| claims.get(&key)?.object())
        })
    }

    /// The keys of all stored claims, in order.
    pub fn claim_keys(&self) -> Vec<ObjectKey> {
        let mut keys: Vec<ObjectKey> = read(&self.claims).keys().cloned().collect();
        keys.sort_unstable();
        keys
    }

    /// How many stored volumes the state gauges count under each tally.
    pub(crate) fn volume_census(&self) -> Vec<(VolumeTally, u64)> {
        count(&self.volume_census).counts()
    }

    /// How many stored claims the state gauges count under each tally.
    pub(crate) fn claim_census(&self) -> Vec<(ClaimTally, u64)> {
        count(&self.claim_census).counts()
    }

    /// How many claims are stored.
    pub fn claims_len(&self) -> usize {
        read(&self.claims).len()
    }
}

/// The store is the process's one store of volumes: a watch's
/// versions count as listed, a write's answer does not.
impl Store<PersistentVolume> for PvStore {
    fn watched(&self, volume: &Arc<PersistentVolume>) {
        if let Err(error) = self.offer_listed_volume(volume.as_ref()) {
            tracing::warn!(%error, "volume not stored");
        }
    }

    fn written(&self, volume: Arc<PersistentVolume>) -> Result<(), StoreError> {
        self.offer_volume(volume).map(drop)
    }

    fn forget(&self, key: &ObjectKey) -> Option<Arc<PersistentVolume>> {
        self.remove_volume(&VolumeName::new(key.name.clone()))
    }

    fn get(&self, key: &ObjectKey) -> Option<Arc<PersistentVolume>> {
        self.volume(&VolumeName::new(key.name.clone()))
    }

    fn keys(&self) -> Vec<ObjectKey> {
        self.volume_names().iter().map(VolumeName::key).collect()
    }
}

/// The store is the process's one store of claims, as of volumes.
impl Store<PersistentVolumeClaim> for PvStore {
    fn watched(&self, claim: &Arc<PersistentVolumeClaim>) {
        if let Err(error) = self.offer_listed_claim(claim.as_ref()) {
            tracing::warn!(%error, "claim not stored");
        }
    }

    fn written(&self, claim: Arc<PersistentVolumeClaim>) -> Result<(), StoreError> {
        self.offer_claim(claim).map(drop)
    }

    fn forget(&self, key: &ObjectKey) -> Option<Arc<PersistentVolumeClaim>> {
        self.remove_claim(key)
    }

    fn get(&self, key: &ObjectKey) -> Option<Arc<PersistentVolumeClaim>> {
        self.claim(key)
    }

    fn keys(&self) -> Vec<ObjectKey> {
        self.claim_keys()
    }
}

mod complete;
#[cfg(test)]
mod tests;
