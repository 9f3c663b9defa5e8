//! The one door for every API write of every controller of the process:
//! updates, status writes, patches, creates and deletes of objects of any
//! kind (events and the Lease have their own paths).
//!
//! A decision is made from one copy of an object (its basis); by the time
//! the write goes out, another task of this process (another worker, a
//! long operation, another controller) may have written the same object.
//! Writing the basis would then meet a 409, or worse, overwrite what the
//! other task decided. So every write:
//!
//! 1. takes the object's write lock (one per object for the whole
//!    process), so two tasks of this process never write one object at
//!    once;
//! 2. for an update, edits the newest copy the kind's store holds (never
//!    older than the basis), with an edit that re-checks on that copy what
//!    the decision assumed and refuses when the object moved on
//!    ([`Edit::Refused`]), and sends nothing when the edit changed nothing;
//!    what it sends is a merge patch of only the fields the edit changed,
//!    conditional on the copy's resourceVersion, so a field the compiled
//!    types do not know (a newer API server's) is never erased
//!    ([`merge_patch`]);
//! 3. sends the request, classifies its failure (a 409 and a refused edit
//!    alike are conflicts: retried at once from fresh data), and counts it
//!    once in `pv_controller_api_writes_total`, by controller, resource,
//!    verb, subresource and result;
//! 4. puts the server's answer, trimmed as the kind's watch trims it, into
//!    the kind's store before the lock is released, so the next sync of any
//!    controller, and the next writer, sees it.

use crate::api_message::ApiMessage;
use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

use kube::api::{DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::{Client, Resource};
use tokio::sync::OwnedMutexGuard;

use crate::informer::{StoreError, StoreRef};
use crate::keys::ObjectKey;
pub use crate::kinds::Part;
use crate::kinds::{Kind, Shape};
use crate::lean::Lean;
use crate::merge_patch::{self, MergePatch};
use crate::metrics::{Metrics, WriteOutcome};
use serde_json::value::RawValue;

/// What an edit made of the newest copy of an object.
#[derive(Debug, PartialEq, Eq)]
pub enum Edit {
    /// The copy was changed: write it.
    Changed,
    /// The copy already is as wanted: nothing to write.
    Unchanged,
    /// The object moved on since the decision: the write would act on a
    /// view that no longer holds. The sync is retried from fresh data.
    Refused(String),
}

/// Why a write did not happen.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// The API server refused the request or could not be reached;
    /// `action` says which request it was.
    #[error("{action}: {}", ApiMessage(source))]
    Api {
        /// What the request was for, e.g. `update status of Widget w1`.
        action: String,
        /// The client's error.
        #[source]
        source: kube::Error,
    },
    /// The object changed since the decision (another task of this process
    /// wrote it first); nothing was sent.
    #[error("{object} changed since the decision: {reason}")]
    Stale {
        /// The object, e.g. `Widget w1`.
        object: String,
        /// What changed.
        reason: String,
    },
    /// The server's answer could not be stored.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A plan wrote a kind its controller has no writer for: a defect of
    /// the controller's wiring, reported instead of a crash.
    #[error("no writer of {0} is set up")]
    NoWriter(&'static str),
}

impl WriteError {
    /// Whether the write met a 409 or was refused because the object moved
    /// on: expected now and then, retried at once from fresh data.
    pub fn is_conflict(&self) -> bool {
        match self {
            Self::Api {
                source: kube::Error::Api(status),
                ..
            } => status.is_conflict(),
            Self::Stale { .. } => true,
            Self::Api { .. } | Self::Store(_) | Self::NoWriter(_) => false,
        }
    }
}

/// How a write that returned `result` ended, for the write metric.
fn outcome<T>(result: &Result<T, kube::Error>) -> WriteOutcome {
    match result {
        Ok(_) => WriteOutcome::Ok,
        Err(kube::Error::Api(status)) if status.is_conflict() => WriteOutcome::Conflict,
        Err(_) => WriteOutcome::Error,
    }
}

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
}

impl fmt::Debug for Door {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Door")
            .field("locks", &self.locks.len())
            .finish_non_exhaustive()
    }
}

impl Door {
    /// The door of the process: writes through `client`, counted in
    /// `metrics`.
    pub fn new(client: Client, metrics: Arc<Metrics>) -> Self {
        Self {
            client,
            metrics,
            locks: WriteLocks::default(),
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

    /// How many objects have a write lock right now (held or waited for).
    #[cfg(test)]
    pub(crate) fn locks_in_use(&self) -> usize {
        self.locks.len()
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

/// The newer of the basis and the stored copy, by resourceVersion; the
/// basis when either version does not parse.
pub fn newer<K: Resource>(basis: &Arc<K>, stored: Option<Arc<K>>) -> Arc<K> {
    let version = |object: &K| {
        object
            .meta()
            .resource_version
            .as_deref()
            .and_then(|v| v.parse::<u64>().ok())
    };
    match stored {
        Some(stored) if version(basis).is_some() && version(&stored) >= version(basis) => stored,
        _ => Arc::clone(basis),
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

    fn count(&self, verb: &str, subresource: &str, outcome: WriteOutcome) {
        self.door
            .metrics
            .api_write(self.controller, &K::plural(&()), verb, subresource, outcome);
    }

    /// Trims the server's answer as the watch would and stores it.
    fn store(&self, mut answer: K) -> Result<Arc<K>, WriteError> {
        self.store.shape().trim(&mut answer);
        let answer = Arc::new(answer);
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

    /// Creates `object` and stores the answer.
    pub async fn create(&self, object: &K) -> Result<Arc<K>, WriteError> {
        let key = ObjectKey::of(object);
        let _guard = self.door.locks.lock(K::NAME, key.clone()).await;
        let result = K::api(&self.door.client, &key.namespace)
            .create(&PostParams::default(), object)
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
        self.store(created)
    }

    /// Deletes the object `key`, and only the incarnation `uid` names when
    /// given (the request carries it as a precondition, so an object
    /// re-created under the same name since is never deleted in its
    /// place). An object already gone counts as deleted. Returns the
    /// object when the answer shows it still stored, marked for deletion
    /// and held by finalizers (trimmed as stored; that version's watch
    /// event may already have come and gone); nothing is stored: the watch
    /// tells when the object is gone.
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
        let result = match K::api(&self.door.client, &key.namespace)
            .delete(&key.name, &params)
            .await
        {
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
        result.map_err(|source| WriteError::Api {
            action: format!("delete {}", describe::<K>(key)),
            source,
        })
    }

    /// Reads the object `key` from the API server, under its write lock, and
    /// stores the answer; `None` when it does not exist. For an operation
    /// that must act on the object as it is now, not as a sync saw it. A
    /// read, not counted as a write.
    pub async fn refresh(&self, key: &ObjectKey) -> Result<Option<Arc<K>>, WriteError> {
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
        let stored = self.store(found)?;
        // The store keeps whichever is newer: a write of this process may
        // have overtaken the read.
        let held = self.store.get(key);
        Ok(Some(newer(&stored, held)))
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
        let result = K::api(&self.door.client, &key.namespace)
            .patch_status(
                &key.name,
                &PatchParams::apply(manager).force(),
                &Patch::Apply(applied),
            )
            .await;
        self.count("patch", "status", outcome(&result));
        let applied = result.map_err(|source| WriteError::Api {
            action: format!("apply status of {}", describe::<K>(key)),
            source,
        })?;
        self.store(applied)
    }

    /// Edits the newest copy of `basis` with `edit` and, when the edit
    /// changed `part` of it, sends what changed as a merge patch carrying
    /// the copy's resourceVersion (so a change by anyone else since is a
    /// 409, and fields the edit did not touch stay as the server has them);
    /// returns the object as it now is.
    pub async fn update(
        &self,
        basis: &Arc<K>,
        part: Part,
        edit: impl FnOnce(&mut K) -> Edit,
    ) -> Result<Arc<K>, WriteError> {
        let key = ObjectKey::of(basis.as_ref());
        let _guard = self.door.locks.lock(K::NAME, key.clone()).await;
        let newest = newer(basis, self.store.get(&key));
        let mut changed = K::clone(&newest);
        match edit(&mut changed) {
            Edit::Unchanged => return Ok(newest),
            Edit::Refused(reason) => {
                return Err(WriteError::Stale {
                    object: describe::<K>(&key),
                    reason,
                });
            }
            Edit::Changed => {}
        }
        let shape = self.store.shape();
        let Some(patch) = conditional_patch(shape, newest.as_ref(), &changed, part)? else {
            // The edit changed nothing the server keeps in this part.
            return Ok(newest);
        };
        let api = K::api(&self.door.client, &key.namespace);
        let result = send_patch(&self.door.client, &api, &key.name, part, &patch).await;
        self.count("patch", part.subresource(), outcome(&result));
        let source = match result {
            Ok(written) => return self.store(written),
            Err(source) => source,
        };
        if let kube::Error::Api(status) = &source
            && status.is_conflict()
        {
            self.reread(&api, &key).await;
        }
        Err(WriteError::Api {
            action: match part {
                Part::Spec => format!("update {}", describe::<K>(&key)),
                Part::Status => format!("update status of {}", describe::<K>(&key)),
            },
            source,
        })
    }
}

/// The merge patch that makes `part` of `newest` into that of `changed`
/// (both encoded as `shape` encodes a write of `part`), carrying
/// `newest`'s resourceVersion so the server refuses it (409) when the
/// object changed since; `None` when that part did not change. Only what
/// the edit changed is named, so every field the compiled types do not
/// know (a newer server's) stays as the server holds it.
fn conditional_patch<K: Kind>(
    shape: &Shape<K>,
    newest: &K,
    changed: &K,
    part: Part,
) -> Result<Option<Box<RawValue>>, WriteError> {
    let encoding_failed = |error| WriteError::Api {
        action: format!("encode {}", describe::<K>(&ObjectKey::of(newest))),
        source: kube::Error::SerdeError(error),
    };
    let before = shape.encode(newest, part).map_err(encoding_failed)?;
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
    let version = match &newest.meta().resource_version {
        Some(version) => Some(serde_json::value::to_raw_value(version).map_err(encoding_failed)?),
        None => None,
    };
    if let Some(version) = &version {
        let stamp = ("resourceVersion".into(), MergePatch::Value(version));
        match members.iter_mut().find(|(name, _)| name == "metadata") {
            Some((_, MergePatch::Object(metadata))) => metadata.push(stamp),
            Some(_) => {}
            None => members.push(("metadata".into(), MergePatch::Object(vec![stamp]))),
        }
    }
    serde_json::value::to_raw_value(&MergePatch::Object(members))
        .map(Some)
        .map_err(encoding_failed)
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

#[cfg(test)]
mod tests;
