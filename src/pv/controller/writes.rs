//! The one door through which the controller writes volumes and claims.
//!
//! A decision is made from one copy of an object (its basis); by the time the
//! write goes out, another task of this process (a worker of the other kind,
//! a long operation) may have written the same object. Writing the basis
//! would then meet a 409, or worse, overwrite what the other task decided.
//! So every write:
//!
//! 1. takes the object's write lock, so two tasks of this process never
//!    write one object at once;
//! 2. edits the newest copy the shadow cache holds (never older than the
//!    basis), with an edit that re-checks on that copy what the decision
//!    assumed, and refuses when the object moved on ([`Edit::Refused`]);
//! 3. skips the request when the edit changed nothing;
//! 4. sends it with the newest copy's resourceVersion, counts it, and puts
//!    the server's answer into the shadow cache before the lock is released,
//!    so the next writer edits that answer.
//!
//! Creates and deletes go through here too, so every write is counted.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use kube::api::{DeleteParams, PostParams, Preconditions};
use kube::{Api, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::sync::OwnedMutexGuard;

use super::Controller;
use crate::pv::cache::ShadowCache;
use crate::pv::error::{Error, Result, api as api_error};
use crate::pv::keys::{ClaimKey, VolumeName};
use crate::pv::objects::{ClaimPhase, VolumePhase, claim_phase, volume_phase};
use crate::runtime::events::{EventType, reference_of};
use crate::runtime::metrics::WriteOutcome;

/// What an edit made of the newest copy of an object.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Edit {
    /// The copy was changed: write it.
    Changed,
    /// The copy already is as wanted: nothing to write.
    Unchanged,
    /// The object moved on since the decision: the write would act on a
    /// view that no longer holds. The sync is retried from fresh data.
    Refused(String),
}

/// The part of an object a write replaces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Part {
    /// Spec and metadata (the main resource).
    Spec,
    /// The status subresource.
    Status,
}

impl Part {
    /// The subresource label of the write metric ("" for the main resource).
    fn subresource(self) -> &'static str {
        match self {
            Part::Spec => "",
            Part::Status => "status",
        }
    }
}

/// The key of an object's write lock.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum LockKey {
    Volume(String),
    Claim(ClaimKey),
}

/// One lock per object being written, created on demand and dropped when
/// nobody holds or waits for it, so the map stays as small as the number of
/// writes in flight.
#[derive(Clone, Default)]
pub(super) struct WriteLocks {
    locks: Arc<Mutex<HashMap<LockKey, Arc<tokio::sync::Mutex<()>>>>>,
}

impl fmt::Debug for WriteLocks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("WriteLocks")
    }
}

/// A held write lock; dropping it releases the lock and forgets it when no
/// other task waits for it.
struct WriteGuard {
    locks: WriteLocks,
    key: LockKey,
    _held: OwnedMutexGuard<()>,
}

impl Drop for WriteGuard {
    fn drop(&mut self) {
        let mut locks = self
            .locks
            .locks
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        // The map and this guard hold one reference each; more means waiters.
        if locks
            .get(&self.key)
            .is_some_and(|l| Arc::strong_count(l) <= 2)
        {
            locks.remove(&self.key);
        }
    }
}

impl WriteLocks {
    async fn lock(&self, key: LockKey) -> WriteGuard {
        let lock = {
            let mut locks = self.locks.lock().unwrap_or_else(PoisonError::into_inner);
            Arc::clone(locks.entry(key.clone()).or_default())
        };
        let held = lock.lock_owned().await;
        WriteGuard {
            locks: self.clone(),
            key,
            _held: held,
        }
    }

    /// How many objects have a lock right now (held or waited for).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.locks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

/// The two kinds the controller writes, as the door needs them.
trait Writable:
    Resource<DynamicType = ()> + Clone + Serialize + DeserializeOwned + fmt::Debug + Send + Sync
{
    fn lock_key(&self) -> LockKey;
    fn describe(&self) -> String;
    fn newest(&self, cache: &ShadowCache) -> Option<Arc<Self>>;
    fn store(cache: &ShadowCache, object: Arc<Self>) -> Result<()>;
    fn api(client: &kube::Client, object: &Self) -> Api<Self>;
}

impl Writable for PersistentVolume {
    fn lock_key(&self) -> LockKey {
        LockKey::Volume(VolumeName::of(self).0)
    }
    fn describe(&self) -> String {
        format!("volume {:?}", VolumeName::of(self).0)
    }
    fn newest(&self, cache: &ShadowCache) -> Option<Arc<Self>> {
        cache.volume(&VolumeName::of(self).0)
    }
    fn store(cache: &ShadowCache, object: Arc<Self>) -> Result<()> {
        cache.offer_volume(object)?;
        Ok(())
    }
    fn api(client: &kube::Client, _: &Self) -> Api<Self> {
        Api::all(client.clone())
    }
}

impl Writable for PersistentVolumeClaim {
    fn lock_key(&self) -> LockKey {
        LockKey::Claim(ClaimKey::of(self))
    }
    fn describe(&self) -> String {
        format!("claim {}", ClaimKey::of(self))
    }
    fn newest(&self, cache: &ShadowCache) -> Option<Arc<Self>> {
        cache.claim(&ClaimKey::of(self))
    }
    fn store(cache: &ShadowCache, object: Arc<Self>) -> Result<()> {
        cache.offer_claim(object)?;
        Ok(())
    }
    fn api(client: &kube::Client, claim: &Self) -> Api<Self> {
        Api::namespaced(
            client.clone(),
            claim.metadata.namespace.as_deref().unwrap_or(""),
        )
    }
}

/// A write's answer without what the controller never reads (its
/// `managedFields`, as the watchers drop them), before it is cached.
fn without_unread_fields<K: Resource>(mut object: K) -> K {
    object.meta_mut().managed_fields = None;
    object
}

/// The newer of the basis and the cached copy, by resourceVersion; the basis
/// when either version does not parse (the cache refuses such objects).
fn newer<K: Writable>(basis: &Arc<K>, cached: Option<Arc<K>>) -> Arc<K> {
    let version = |object: &K| {
        object
            .meta()
            .resource_version
            .as_deref()
            .and_then(|v| v.parse::<u64>().ok())
    };
    match cached {
        Some(cached) if version(&cached) >= version(basis) && version(basis).is_some() => cached,
        _ => Arc::clone(basis),
    }
}

impl Controller {
    pub(super) fn volumes_api(&self) -> Api<PersistentVolume> {
        Api::all(self.client.clone())
    }

    pub(super) fn claims_api(&self, namespace: &str) -> Api<PersistentVolumeClaim> {
        Api::namespaced(self.client.clone(), namespace)
    }

    /// Edits the newest copy of the volume `basis` and writes `part` of it
    /// when the edit changed it; returns the volume as it now is.
    pub(super) async fn write_volume(
        &self,
        basis: &Arc<PersistentVolume>,
        part: Part,
        edit: impl FnOnce(&mut PersistentVolume) -> Edit,
    ) -> Result<Arc<PersistentVolume>> {
        self.write(basis, part, edit).await
    }

    /// Edits the newest copy of the claim `basis` and writes `part` of it
    /// when the edit changed it; returns the claim as it now is.
    pub(super) async fn write_claim(
        &self,
        basis: &Arc<PersistentVolumeClaim>,
        part: Part,
        edit: impl FnOnce(&mut PersistentVolumeClaim) -> Edit,
    ) -> Result<Arc<PersistentVolumeClaim>> {
        self.write(basis, part, edit).await
    }

    async fn write<K: Writable>(
        &self,
        basis: &Arc<K>,
        part: Part,
        edit: impl FnOnce(&mut K) -> Edit,
    ) -> Result<Arc<K>> {
        let _guard = self.write_locks.lock(basis.lock_key()).await;
        let newest = newer(basis, basis.newest(&self.cache));
        let mut changed = K::clone(&newest);
        match edit(&mut changed) {
            Edit::Unchanged => return Ok(newest),
            Edit::Refused(reason) => {
                return Err(Error::Stale {
                    object: basis.describe(),
                    reason,
                });
            }
            Edit::Changed => {}
        }
        let api = K::api(&self.client, &changed);
        let name = changed.meta().name.clone().unwrap_or_default();
        let params = PostParams::default();
        let result = match part {
            Part::Spec => api.replace(&name, &params, &changed).await,
            Part::Status => api.replace_status(&name, &params, &changed).await,
        }
        .map_err(api_error(|| match part {
            Part::Spec => format!("updating {}", changed.describe()),
            Part::Status => format!("updating status of {}", changed.describe()),
        }));
        self.count_write::<K>("update", part.subresource(), write_outcome(&result));
        let stored = Arc::new(without_unread_fields(result?));
        K::store(&self.cache, Arc::clone(&stored))?;
        Ok(stored)
    }

    /// Creates a volume (a provisioned one) and stores the answer.
    pub(super) async fn create_volume(
        &self,
        volume: &PersistentVolume,
    ) -> Result<Arc<PersistentVolume>> {
        let _guard = self.write_locks.lock(volume.lock_key()).await;
        let result = self
            .volumes_api()
            .create(&PostParams::default(), volume)
            .await
            .map_err(api_error(|| format!("creating {}", volume.describe())));
        self.count_write::<PersistentVolume>("create", "", write_outcome(&result));
        let stored = Arc::new(without_unread_fields(result?));
        PersistentVolume::store(&self.cache, Arc::clone(&stored))?;
        Ok(stored)
    }

    /// Deletes the volume object `volume` names, and only that incarnation:
    /// the request carries its UID as a precondition, so a volume re-created
    /// under the same name since is never deleted in its place (the server
    /// answers 409). A volume already gone counts as deleted.
    pub(super) async fn delete_volume(&self, volume: &PersistentVolume) -> Result<()> {
        let _guard = self.write_locks.lock(volume.lock_key()).await;
        let name = VolumeName::of(volume).0;
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid: volume.metadata.uid.clone(),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        let result = match self.volumes_api().delete(&name, &params).await {
            Err(kube::Error::Api(status)) if status.is_not_found() => Ok(()),
            other => other
                .map(drop)
                .map_err(api_error(|| format!("deleting {}", volume.describe()))),
        };
        self.count_write::<PersistentVolume>("delete", "", write_outcome(&result));
        result
    }

    /// Counts a write to a volume or claim by its verb and outcome.
    fn count_write<K: Resource<DynamicType = ()>>(
        &self,
        verb: &str,
        subresource: &str,
        outcome: WriteOutcome,
    ) {
        self.metrics
            .api_write(&K::plural(&()), verb, subresource, outcome);
    }

    /// Moves a volume to `phase` (with `message`) when it is not there yet;
    /// returns the volume as it now is and whether this write moved it.
    /// Refused when the volume's claimRef changed since `basis`: the phase
    /// was decided for a binding that no longer holds.
    async fn change_phase(
        &self,
        basis: &Arc<PersistentVolume>,
        phase: VolumePhase,
        message: Option<String>,
    ) -> Result<(Arc<PersistentVolume>, bool)> {
        let mut wrote = false;
        let stored = self
            .write_volume(basis, Part::Status, |volume| {
                let edit = set_phase_edit(basis, volume, phase, message);
                wrote = edit == Edit::Changed;
                edit
            })
            .await?;
        if wrote {
            tracing::info!(phase = %phase, "volume entered phase");
        } else {
            tracing::debug!(phase = %phase, "volume phase already set");
        }
        Ok((stored, wrote))
    }

    /// Sets a volume's phase (and message) when it differs; returns the
    /// volume as it now is.
    pub(super) async fn set_volume_phase(
        &self,
        basis: &Arc<PersistentVolume>,
        phase: VolumePhase,
        message: Option<String>,
    ) -> Result<Arc<PersistentVolume>> {
        Ok(self.change_phase(basis, phase, message).await?.0)
    }

    /// Makes a volume Available (the shadow cache tells the claims waiting
    /// for a volume when this frees it).
    pub(super) async fn make_available(&self, basis: &Arc<PersistentVolume>) -> Result<()> {
        self.change_phase(basis, VolumePhase::Available, None)
            .await
            .map(drop)
    }

    /// Sets a volume's phase and, only when this write changed the phase,
    /// records an event; the message also goes into the volume's status.
    pub(super) async fn set_volume_phase_with_event(
        &self,
        basis: &Arc<PersistentVolume>,
        phase: VolumePhase,
        event_type: EventType,
        reason: &str,
        message: String,
    ) -> Result<Arc<PersistentVolume>> {
        let (stored, wrote) = self
            .change_phase(basis, phase, Some(message.clone()))
            .await?;
        if wrote {
            self.record(stored.as_ref(), event_type, reason, message);
        }
        Ok(stored)
    }

    /// Records a Warning event about `object`: something went wrong or
    /// needs attention. Never waits for the write.
    pub(super) fn warn<K: Resource<DynamicType = ()>>(
        &self,
        object: &K,
        reason: &str,
        message: String,
    ) {
        self.record(object, EventType::Warning, reason, message);
    }

    /// Records a Normal event about `object`: something worth knowing.
    /// Never waits for the write.
    pub(super) fn note<K: Resource<DynamicType = ()>>(
        &self,
        object: &K,
        reason: &str,
        message: String,
    ) {
        self.record(object, EventType::Normal, reason, message);
    }

    /// Records an event of `event_type` about `object`.
    pub(super) fn record<K: Resource<DynamicType = ()>>(
        &self,
        object: &K,
        event_type: EventType,
        reason: &str,
        message: String,
    ) {
        self.recorder
            .record(&reference_of(object), event_type, reason, message);
    }
}

/// How a write that returned `result` ended, for the write metric.
fn write_outcome<T>(result: &Result<T>) -> WriteOutcome {
    match result {
        Ok(_) => WriteOutcome::Ok,
        Err(error) if error.is_conflict() => WriteOutcome::Conflict,
        Err(_) => WriteOutcome::Error,
    }
}

/// The edit that moves a volume to `phase`, unless its claimRef is no longer
/// the one of `basis`.
fn set_phase_edit(
    basis: &PersistentVolume,
    volume: &mut PersistentVolume,
    phase: VolumePhase,
    message: Option<String>,
) -> Edit {
    if !same_claim_ref(basis, volume) {
        return Edit::Refused(format!(
            "its claimRef changed before it could become {phase}"
        ));
    }
    if volume_phase(volume) == Some(phase) {
        return Edit::Unchanged;
    }
    let status = volume.status.get_or_insert_with(Default::default);
    status.phase = Some(phase.as_str().to_string());
    status.message = message;
    Edit::Changed
}

/// Whether two copies of a volume name the same claim (namespace, name, UID).
pub(super) fn same_claim_ref(a: &PersistentVolume, b: &PersistentVolume) -> bool {
    let reference = |v: &PersistentVolume| {
        v.spec.as_ref().and_then(|s| s.claim_ref.as_ref()).map(|r| {
            (
                r.namespace.clone().unwrap_or_default(),
                r.name.clone().unwrap_or_default(),
                r.uid.clone().unwrap_or_default(),
            )
        })
    };
    reference(a) == reference(b)
}

/// Whether two copies of a claim are the same incarnation at the same
/// binding step (UID, requested volume, bind-completed), so a decision made
/// on one still holds for the other.
pub(super) fn same_claim_binding(a: &PersistentVolumeClaim, b: &PersistentVolumeClaim) -> bool {
    let binding = |c: &PersistentVolumeClaim| {
        (
            c.metadata.uid.clone(),
            c.spec.as_ref().and_then(|s| s.volume_name.clone()),
            crate::pv::objects::has_annotation(
                &c.metadata,
                crate::pv::constants::ANN_BIND_COMPLETED,
            ),
        )
    };
    binding(a) == binding(b)
}

/// Whether the claim is in `phase`.
pub(super) fn claim_in_phase(claim: &PersistentVolumeClaim, phase: ClaimPhase) -> bool {
    claim_phase(claim) == Some(phase)
}

#[cfg(test)]
mod tests;
