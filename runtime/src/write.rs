//! The one door for every API write of every controller of the process:
//! updates, status writes, patches, creates and deletes of objects of any
//! kind (events and the Lease have their own paths).
//!
//! A decision is made from one copy of an object (its basis), and its
//! update is made on that copy when the plan is made. By the time the
//! write goes out, anyone (another task of this process, another client)
//! may have changed the object. So every write:
//!
//! 1. takes the object's write lock (one per object for the whole
//!    process), so two tasks of this process never write one object at
//!    once;
//! 2. for an update, refuses without sending anything when the kind's
//!    store holds a newer copy than the one the write is conditional on
//!    (the basis, or the plan's own last answer for the object): the
//!    decision was made on a copy that no longer holds;
//! 3. sends a merge patch of only the fields the decision changed,
//!    carrying the resourceVersion and UID of that copy, so the API server
//!    refuses it (409) when the object changed or was re-created since,
//!    and a field the compiled types do not know (a newer API server's) is
//!    never erased ([`merge_patch`]);
//! 4. classifies its failure (a 409 and a refused write alike are
//!    conflicts: the key is decided again from fresh data), and counts it
//!    once in `pv_controller_api_writes_total`, by controller, resource,
//!    verb, subresource and result;
//! 5. puts the server's answer, trimmed as the kind's watch trims it, into
//!    the kind's store before the lock is released, so the next sync of any
//!    controller, and the next writer, sees it.
//!
//! Once the API server turns a write away as overloaded, the door lets only
//! as many writes be in flight at once as it learns the server takes
//! ([`limit`]).

use std::any::{Any, TypeId};
use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

use kube::Client;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use tokio::sync::OwnedMutexGuard;

use crate::informer::StoreRef;
use crate::keys::ObjectKey;
use crate::kinds::Kind;
pub use crate::kinds::Part;
use crate::lean::Lean;
use crate::merge_patch::{self, MergePatch};
use crate::metrics::{Metrics, WriteOutcome};
use crate::version::{Age, age_of_versions};
use serde_json::value::RawValue;

/// An object's write lock is filed under its kind and key.
type LockKey = (&'static str, ObjectKey);

/// One lock per object being written, created on demand and dropped when
/// nobody holds or waits for it, so the map stays as small as the number
/// of writes in flight.
#[derive(Clone, Default)]
struct WriteLocks {
    locks: Arc<Mutex<HashMap<LockKey, Arc<tokio::sync::Mutex<()>>>>>,
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
            .is_some_and(|lock| Arc::strong_count(lock) <= 2)
        {
            locks.remove(&self.key);
        }
    }
}

impl WriteLocks {
    async fn lock(&self, kind: &'static str, key: ObjectKey) -> WriteGuard {
        let key = (kind, key);
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

    fn len(&self) -> usize {
        self.locks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

/// The process's write door; [`Door::writer`] hands each controller its
/// writer of a kind. Cheap to clone; clones share the locks.
#[derive(Clone)]
pub struct Door {
    client: Client,
    metrics: Arc<Metrics>,
    locks: WriteLocks,
    limit: WriteLimit,
}

impl fmt::Debug for Door {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Door")
            .field("locks", &self.locks.len())
            .field("limit", &self.limit.allowed())
            .finish_non_exhaustive()
    }
}

impl Door {
    /// The door of the process: writes through `client`, counted in
    /// `metrics`.
    pub fn new(client: Client, metrics: Arc<Metrics>) -> Self {
        let limit = WriteLimit::new(metrics.write_limit());
        Self {
            client,
            metrics,
            locks: WriteLocks::default(),
            limit,
        }
    }

    /// The writer of `controller` for the kind `K`, storing answers into
    /// `store` (the kind's one store).
    pub fn writer<K: Kind>(&self, controller: &'static str, store: StoreRef<K>) -> Writer<K> {
        Writer {
            door: self.clone(),
            controller,
            store,
        }
    }
}

/// One controller's writes of one kind. Cheap to clone.
pub struct Writer<K: 'static> {
    door: Door,
    controller: &'static str,
    store: StoreRef<K>,
}

impl<K> Clone for Writer<K> {
    fn clone(&self) -> Self {
        Self {
            door: self.door.clone(),
            controller: self.controller,
            store: self.store.clone(),
        }
    }
}

impl<K> fmt::Debug for Writer<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Writer")
            .field("controller", &self.controller)
            .finish_non_exhaustive()
    }
}

/// The writers of one controller, one per kind, found by kind: what the
/// executor carries a plan's writes out with. Cheap to clone.
#[derive(Clone, Default)]
pub struct WriterSet {
    by_kind: HashMap<TypeId, Arc<dyn Any + Send + Sync>>,
}

impl fmt::Debug for WriterSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WriterSet")
            .field("kinds", &self.by_kind.len())
            .finish()
    }
}

impl WriterSet {
    /// The set with `writer` as the writer of its kind.
    #[must_use]
    pub fn with<K: Kind>(mut self, writer: Writer<K>) -> Self {
        self.by_kind.insert(TypeId::of::<K>(), Arc::new(writer));
        self
    }

    /// The writer of the kind `K`.
    pub fn get<K: Kind>(&self) -> Result<&Writer<K>, WriteError> {
        self.by_kind
            .get(&TypeId::of::<K>())
            .and_then(|writer| writer.downcast_ref::<Writer<K>>())
            .ok_or(WriteError::NoWriter(K::NAME))
    }
}

/// `Kind name` of an object, for errors and logs.
fn describe<K: Kind>(key: &ObjectKey) -> String {
    format!("{} {key}", K::kind(&()))
}

impl<K: Kind> Writer<K> {
    /// The controller whose writes these are.
    pub fn controller(&self) -> &'static str {
        self.controller
    }

    /// The stored copy of the object `key`, if the store holds one.
    pub fn stored(&self, key: &ObjectKey) -> Option<Arc<K>> {
        self.store.get(key)
    }

    /// Sends `request`, a write, once the door's limit lets it be in flight
    /// ([`WriteLimit`]), and awaits it, counted in flight until it is
    /// answered; the limit learns from its answer.
    async fn in_flight<T>(
        &self,
        request: impl Future<Output = Result<T, kube::Error>>,
    ) -> Result<T, kube::Error> {
        let admitted = self.door.limit.admit().await;
        let counted = self.door.metrics.write_in_flight(self.controller);
        let result = request.await;
        drop(counted);
        admitted.ended(Ended::of(&result));
        result
    }

    fn count(&self, verb: &str, subresource: &str, outcome: WriteOutcome) {
        self.door
            .metrics
            .api_write(self.controller, &K::plural(&()), verb, subresource, outcome);
    }

    /// Trims the server's answer as the watch would and stores it, unless
    /// the watch showed that incarnation deleted meanwhile (an answer may
    /// come after the watch's delete event).
    fn store(&self, mut answer: K) -> Result<Arc<K>, WriteError> {
        self.store.shape().trim(&mut answer);
        let answer = Arc::new(answer);
        if let Some(uid) = answer.meta().uid.as_deref()
            && self.store.incarnations().is_deleted(uid)
        {
            tracing::debug!(object = %describe::<K>(&ObjectKey::of(answer.as_ref())), "an answer about an object since deleted, not stored");
            return Ok(answer);
        }
        if let Some(store) = self.store.store() {
            store.written(Arc::clone(&answer))?;
        }
        Ok(answer)
    }

    /// After a 409, reads the object `key` (its write lock held) and stores
    /// the answer, so the retry decides on the server's copy. Normally the
    /// watch has brought it already; when a watch lost the change, this is
    /// what repairs the store, where retrying from the store's copy would
    /// meet the same 409 forever.
    async fn reread(&self, api: &kube::Api<K>, key: &ObjectKey) {
        match api.get_opt(&key.name).await {
            Ok(Some(found)) => {
                if let Err(error) = self.store(found) {
                    tracing::warn!(object = %describe::<K>(key), %error, "re-read after a conflict not stored");
                }
            }
            Ok(None) => {}
            Err(error) => {
                tracing::debug!(object = %describe::<K>(key), %error, "re-read after a conflict failed");
            }
        }
    }

    /// Creates `object` and stores the answer; until the watch shows it, a
    /// relist older than it does not take it for gone.
    pub async fn create(&self, object: &K) -> Result<Arc<K>, WriteError> {
        let key = ObjectKey::of(object);
        let _guard = self.door.locks.lock(K::NAME, key.clone()).await;
        let api = K::api(&self.door.client, &key.namespace);
        let result = self
            .in_flight(api.create(&PostParams::default(), object))
            .await;
        self.count("create", "", outcome(&result));
        let created = result.map_err(|source| {
            // A generated name is shown by its prefix.
            let name = match &key.name {
                name if name.is_empty() => {
                    object.meta().generate_name.as_deref().unwrap_or_default()
                }
                name => name,
            };
            WriteError::Api {
                action: format!("create {} {name}", K::kind(&())),
                source,
            }
        })?;
        if let Some(uid) = created.meta().uid.as_deref() {
            // Unless the watch showed it before the answer came.
            let shown = self
                .store
                .get(&ObjectKey::of(&created))
                .is_some_and(|held| held.meta().uid.as_deref() == Some(uid));
            if !shown {
                self.store.incarnations().created(uid);
            }
        }
        self.store(created)
    }

    /// Deletes the object `key`, and only the incarnation `uid` names when
    /// given (the request carries it as a precondition, so an object
    /// re-created under the same name since is never deleted in its
    /// place). An object already gone counts as deleted. Returns the
    /// object when the answer shows it still stored, marked for deletion
    /// and held by finalizers (trimmed and stored: that version's watch
    /// event may already have come and gone); otherwise the store is told
    /// of the delete ([`crate::informer::Store::deleted_by_write`]), and the
    /// watch tells when the object is gone.
    pub async fn delete(
        &self,
        key: &ObjectKey,
        uid: Option<&str>,
    ) -> Result<Option<K>, WriteError> {
        let _guard = self.door.locks.lock(K::NAME, key.clone()).await;
        let params = DeleteParams {
            preconditions: uid.map(|uid| Preconditions {
                uid: Some(uid.to_string()),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        let api = K::api(&self.door.client, &key.namespace);
        let result = match self.in_flight(api.delete(&key.name, &params)).await {
            Err(kube::Error::Api(status)) if status.is_not_found() => Ok(None),
            Ok(answer) => Ok(answer
                .left()
                .filter(|object| {
                    let meta = object.meta();
                    meta.deletion_timestamp.is_some()
                        && meta.finalizers.as_ref().is_some_and(|f| !f.is_empty())
                })
                .map(|mut held| {
                    self.store.shape().trim(&mut held);
                    held
                })),
            Err(error) => Err(error),
        };
        self.count("delete", "", outcome(&result));
        let held = result.map_err(|source| WriteError::Api {
            action: format!("delete {}", describe::<K>(key)),
            source,
        })?;
        if let Some(held) = &held {
            self.store(held.clone())?;
        } else {
            if let Some(uid) = uid {
                self.store.incarnations().deleted(uid);
            }
            if let Some(store) = self.store.store() {
                store.deleted_by_write(key, uid);
            }
        }
        Ok(held)
    }

    /// Reads the object `key` from the API server, under its write lock (so
    /// no write of this process overtakes it), and offers the answer to the
    /// store; `None` when it does not exist. For a decision or an operation
    /// that must know the object as the server has it now, not as a watch
    /// showed it (nor as a store that kept a stale copy holds it). A read,
    /// not counted as a write.
    pub async fn read(&self, key: &ObjectKey) -> Result<Option<Arc<K>>, WriteError> {
        let _guard = self.door.locks.lock(K::NAME, key.clone()).await;
        let found = K::api(&self.door.client, &key.namespace)
            .get_opt(&key.name)
            .await
            .map_err(|source| WriteError::Api {
                action: format!("get {}", describe::<K>(key)),
                source,
            })?;
        let Some(found) = found else {
            return Ok(None);
        };
        self.store(found).map(Some)
    }

    /// Applies `applied` (a partial object: apiVersion, kind, name and the
    /// status fields it sets) to the status of the object `key` by
    /// server-side apply as `manager`, forcing, and stores the answer. The
    /// only write of a kind whose store keeps a trimmed copy: an apply
    /// changes the fields it names and those the manager applied before
    /// and leaves out now, nothing else.
    pub async fn apply_status(
        &self,
        key: &ObjectKey,
        manager: &str,
        applied: &serde_json::Value,
    ) -> Result<Arc<K>, WriteError> {
        let _guard = self.door.locks.lock(K::NAME, key.clone()).await;
        let api = K::api(&self.door.client, &key.namespace);
        let params = PatchParams::apply(manager).force();
        let result = self
            .in_flight(api.patch_status(&key.name, &params, &Patch::Apply(applied)))
            .await;
        self.count("patch", "status", outcome(&result));
        let applied = result.map_err(|source| WriteError::Api {
            action: format!("apply status of {}", describe::<K>(key)),
            source,
        })?;
        self.store(applied)
    }

    /// What `changed` changes of `part` of `basis` (`changed` being the
    /// basis as a decision left it), as a write of this kind encodes the
    /// two; `None` when it changes nothing the server keeps in that part.
    pub fn change(&self, basis: &K, changed: &K, part: Part) -> Result<Option<Change>, WriteError> {
        let encoding_failed = |error| WriteError::Api {
            action: format!("encode {}", describe::<K>(&ObjectKey::of(basis))),
            source: kube::Error::SerdeError(error),
        };
        let shape = self.store.shape();
        let before = shape.encode(basis, part).map_err(encoding_failed)?;
        let after = shape.encode(changed, part).map_err(encoding_failed)?;
        let Some(MergePatch::Object(mut members)) = merge_patch::diff(&before, &after) else {
            return Ok(None);
        };
        // The server ignores the other part of a write to one part: a kind
        // whose encoding holds both leaves it out of the request.
        let other = match part {
            Part::Spec => "status",
            Part::Status => "spec",
        };
        members.retain(|(name, _)| name != other);
        if members.is_empty() {
            return Ok(None);
        }
        let members = members
            .into_iter()
            .map(|(name, value)| (Cow::Owned(name.into_owned()), value.into_owned()))
            .collect();
        Ok(Some(Change { members }))
    }

    /// Sends `change` to `part` of the object `key` as a merge patch
    /// carrying `condition`: refused without a request when the store holds
    /// a newer copy of the object than the condition's version, and by the
    /// server (409) when the object changed or was re-created since. Fields
    /// the change does not name stay as the server has them. Returns the
    /// object as the server answered it; `None`, with nothing sent, when
    /// there is no change.
    pub async fn send_change(
        &self,
        key: &ObjectKey,
        condition: Condition<'_>,
        part: Part,
        change: Option<&Change>,
    ) -> Result<Option<Arc<K>>, WriteError> {
        let _guard = self.door.locks.lock(K::NAME, key.clone()).await;
        if let Some(held) = self.store.get(key) {
            let ahead = age_of_versions(condition.version, held.meta().resource_version.as_deref());
            if ahead == Age::Newer {
                return Err(WriteError::Stale {
                    object: describe::<K>(key),
                    reason: format!(
                        "the store holds version {} where the decision read {}",
                        held.meta().resource_version.as_deref().unwrap_or("-"),
                        condition.version.unwrap_or("-")
                    ),
                });
            }
        }
        let Some(change) = change else {
            // The decision changed nothing the server keeps in this part.
            return Ok(None);
        };
        let patch = change
            .conditional(condition)
            .map_err(|error| WriteError::Api {
                action: format!("encode {}", describe::<K>(key)),
                source: kube::Error::SerdeError(error),
            })?;
        let api = K::api(&self.door.client, &key.namespace);
        let result = self
            .in_flight(send_patch(&self.door.client, &api, &key.name, part, &patch))
            .await;
        self.count("patch", part.subresource(), outcome(&result));
        let source = match result {
            Ok(written) => return self.store(written).map(Some),
            Err(source) => source,
        };
        if let kube::Error::Api(status) = &source
            && status.is_conflict()
        {
            self.reread(&api, key).await;
        }
        Err(WriteError::Api {
            action: match part {
                Part::Spec => format!("update {}", describe::<K>(key)),
                Part::Status => format!("update status of {}", describe::<K>(key)),
            },
            source,
        })
    }
}

/// What a write is conditional on: the resourceVersion and UID of the copy
/// its decision read.
#[derive(Clone, Copy, Debug)]
pub struct Condition<'a> {
    /// The resourceVersion the object must still be at.
    pub version: Option<&'a str>,
    /// The UID the object must still have (not re-created).
    pub uid: Option<&'a str>,
}

/// What an update changes of one part of an object: the merge patch that
/// makes the copy its decision read into the copy it made, holding its
/// own names and values and not yet the condition it is sent under. Only
/// what the decision changed is named, so every field the compiled types
/// do not know (a newer server's) stays as the server holds it. A plan
/// about to send its updates holds these instead of the copies they were
/// taken from.
#[derive(Debug)]
pub struct Change {
    /// The members of the patch's top-level object.
    members: Vec<(Cow<'static, str>, MergePatch<'static>)>,
}

impl Change {
    /// The patch carrying `condition` in its metadata, so the server
    /// refuses it (409) when the object changed or was re-created since.
    fn conditional(&self, condition: Condition<'_>) -> serde_json::Result<Box<RawValue>> {
        let mut members = self.borrowed();
        let stamps = [
            ("resourceVersion", condition.version),
            ("uid", condition.uid),
        ];
        let mut values = Vec::new();
        for (field, value) in stamps {
            if let Some(value) = value {
                values.push((field, serde_json::value::to_raw_value(value)?));
            }
        }
        for (field, value) in &values {
            let stamp = (
                (*field).into(),
                MergePatch::Value(Cow::Borrowed(value.as_ref())),
            );
            match members.iter_mut().find(|(name, _)| name == "metadata") {
                Some((_, MergePatch::Object(metadata))) => metadata.push(stamp),
                Some(_) => {}
                None => members.push(("metadata".into(), MergePatch::Object(vec![stamp]))),
            }
        }
        serde_json::value::to_raw_value(&MergePatch::Object(members))
    }

    /// The members, borrowed.
    fn borrowed(&self) -> Vec<(Cow<'_, str>, MergePatch<'_>)> {
        self.members
            .iter()
            .map(|(name, value)| (Cow::Borrowed(name.as_ref()), value.borrowed()))
            .collect()
    }
}

/// Sends `patch` as a JSON merge patch to the object `name` of `api`, or to
/// its status; the answer is decoded without its managedFields ([`Lean`]),
/// which the store would drop anyway.
async fn send_patch<K: Kind>(
    client: &Client,
    api: &kube::Api<K>,
    name: &str,
    part: Part,
    patch: &RawValue,
) -> Result<K, kube::Error> {
    let request = kube::core::Request::new(api.resource_url());
    let params = PatchParams::default();
    let patch = Patch::Merge(patch);
    let request = match part {
        Part::Spec => request.patch(name, &params, &patch),
        Part::Status => request.patch_subresource("status", name, &params, &patch),
    }
    .map_err(kube::Error::BuildRequest)?;
    client
        .request::<Lean<K>>(request)
        .await
        .map(|Lean(answer)| answer)
}

mod error;
pub use error::WriteError;
mod limit;
use error::outcome;
pub use limit::{Admitted, Ended, WriteLimit};

#[cfg(test)]
mod tests;
