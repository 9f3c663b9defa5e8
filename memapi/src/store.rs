//! The object store: objects by resource and key, the global
//! resourceVersion counter, the bounded change history and the watchers.
//!
//! Every write goes through [`Store::commit`] or [`Store::commit_removal`],
//! which bump the counter, record the change in the history and hand it to
//! every interested watcher while the store lock is held, so that watchers
//! see changes in order, without gaps or duplicates.

use super::object;
use super::resources::ResourceKind;
use super::rng::Rng;
use super::selectors::Filter;
use super::status::ApiError;
use serde_json::{Value, json};
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use tokio::sync::mpsc;

/// Default number of changes kept for watches that resume from the past.
pub const DEFAULT_HISTORY: usize = 200_000;

/// Key of one object inside a resource: (namespace or "", name).
pub(crate) type ObjKey = (String, String);

/// Key of one resource: (group, plural).
type ResKey = (&'static str, &'static str);

/// The kind of change a watch event reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeType {
    /// The object was created.
    Added,
    /// The object was changed.
    Modified,
    /// The object was removed.
    Deleted,
}

/// One recorded write.
#[derive(Debug, Clone)]
struct Change {
    rv: u64,
    kind: &'static ResourceKind,
    ty: ChangeType,
    obj: Arc<Value>,
    prev: Option<Arc<Value>>,
}

/// What a watcher's channel carries.
#[derive(Debug, Clone)]
pub(crate) enum WatchItem {
    /// ADDED / MODIFIED / DELETED with the object.
    Event(ChangeType, Arc<Value>),
    /// BOOKMARK at a resourceVersion; `true` marks the end of initial events.
    Bookmark(u64, bool),
    /// An in-stream error, after which the stream ends.
    Error(ApiError),
    /// The connection breaks: the stream ends with a transport error.
    Cut,
    /// The server ends the stream cleanly, as at `timeoutSeconds`.
    End,
}

/// The sending half of one watch, with what it filters on.
#[derive(Debug)]
struct WatchSink {
    kind: &'static ResourceKind,
    filter: Filter,
    tx: mpsc::UnboundedSender<WatchItem>,
    /// A watch of the API, which [`Store::cut_watches`] can break; an
    /// observer of the tests is not.
    cuttable: bool,
}

impl WatchSink {
    /// Translates a change into the event this watcher should see, if any:
    /// an object entering the filter is ADDED, one leaving it is DELETED.
    fn event_for(&self, change: &Change) -> Option<WatchItem> {
        if !std::ptr::eq(self.kind, change.kind) {
            return None;
        }
        let now = self.filter.matches(&change.obj);
        let before = change.prev.as_ref().is_some_and(|p| self.filter.matches(p));
        let ty = match (change.ty, before, now) {
            (ChangeType::Added, _, true) | (ChangeType::Modified, false, true) => ChangeType::Added,
            (ChangeType::Deleted, _, true) | (ChangeType::Modified, true, false) => {
                ChangeType::Deleted
            }
            (ChangeType::Modified, true, true) => ChangeType::Modified,
            _ => return None,
        };
        Some(WatchItem::Event(ty, change.obj.clone()))
    }
}

/// All objects, the counter, the history and the watchers.
#[derive(Debug)]
pub(crate) struct Store {
    rv: u64,
    objects: BTreeMap<ResKey, BTreeMap<ObjKey, Arc<Value>>>,
    history: VecDeque<Change>,
    history_limit: usize,
    compacted: u64,
    watchers: Vec<WatchSink>,
    /// Randomness for names, UIDs and reactor coin flips.
    pub rng: Rng,
    /// Whether PVs and PVCs created through the API get their protection
    /// finalizer, as from the StorageObjectInUseProtection admission plugin
    /// (see [`MemApiConfig::protection_finalizers`](super::MemApiConfig)).
    pub protection_finalizers: bool,
    /// Whether the OwnerReferencesPermissionEnforcement admission plugin
    /// runs (see [`MemApiConfig::owner_references_permission_enforcement`](super::MemApiConfig)).
    pub owner_references_permission_enforcement: bool,
    /// The roles and bindings that authorize named users' requests.
    pub(crate) rbac: super::rbac::Rbac,
    /// Fields each resource drops from what clients write, as a server
    /// with a feature gate off drops the gated fields (see
    /// [`MemApi::drop_fields`](super::MemApi::drop_fields)).
    dropped_fields: BTreeMap<ResKey, Vec<String>>,
    /// How many of the next changes of each resource the watches of the
    /// API miss (see [`MemApi::lose_events`](super::MemApi::lose_events)).
    lost_events: BTreeMap<ResKey, usize>,
    /// How late the watches of the API deliver each resource's events
    /// (see [`MemApi::lag_watches`](super::MemApi::lag_watches)).
    lags: BTreeMap<ResKey, std::time::Duration>,
}

fn res_key(kind: &ResourceKind) -> ResKey {
    (kind.group, kind.plural)
}

impl Store {
    /// An empty store.
    pub(crate) fn new(seed: u64, history_limit: usize) -> Self {
        Self {
            rv: 1,
            objects: BTreeMap::new(),
            history: VecDeque::new(),
            history_limit,
            compacted: 0,
            watchers: Vec::new(),
            rng: Rng::new(seed),
            protection_finalizers: false,
            owner_references_permission_enforcement: false,
            rbac: super::rbac::Rbac::default(),
            dropped_fields: BTreeMap::new(),
            lost_events: BTreeMap::new(),
            lags: BTreeMap::new(),
        }
    }

    /// Makes the watches of the API deliver each event of `kind` `lag`
    /// after it reaches them (none: at once).
    pub(crate) fn set_lag(&mut self, kind: &ResourceKind, lag: std::time::Duration) {
        if lag.is_zero() {
            self.lags.remove(&res_key(kind));
        } else {
            self.lags.insert(res_key(kind), lag);
        }
    }

    /// How late the watches of the API deliver the events of `kind`.
    pub(crate) fn lag(&self, kind: &ResourceKind) -> std::time::Duration {
        self.lags.get(&res_key(kind)).copied().unwrap_or_default()
    }

    /// Makes the watches of the API miss the next `count` changes of
    /// `kind`.
    pub(crate) fn lose_events(&mut self, kind: &ResourceKind, count: usize) {
        self.lost_events.insert(res_key(kind), count);
    }

    /// Makes writes through the API to `kind` drop the fields at `paths`
    /// (replacing what was set before; none: drop nothing).
    pub(crate) fn set_dropped_fields(&mut self, kind: &ResourceKind, paths: Vec<String>) {
        self.dropped_fields.insert(res_key(kind), paths);
    }

    /// Removes from an object written through the API the fields its
    /// resource drops.
    pub(crate) fn drop_fields(&self, kind: &ResourceKind, obj: &mut Value) {
        for path in self
            .dropped_fields
            .get(&res_key(kind))
            .into_iter()
            .flatten()
        {
            object::remove_each(obj, path);
        }
    }

    /// Whether creates and updates of `kind` drop the field at `path`
    /// (exactly as given to [`MemApi::drop_fields`](super::MemApi::drop_fields)).
    pub(crate) fn drops(&self, kind: &ResourceKind, path: &str) -> bool {
        self.dropped_fields
            .get(&res_key(kind))
            .is_some_and(|paths| paths.iter().any(|p| p == path))
    }

    /// The current (latest) resourceVersion.
    pub(crate) fn rv(&self) -> u64 {
        self.rv
    }

    /// The stored object, if any.
    pub(crate) fn get(&self, kind: &ResourceKind, ns: &str, name: &str) -> Option<Arc<Value>> {
        self.objects
            .get(&res_key(kind))
            .and_then(|m| m.get(&(ns.to_string(), name.to_string())))
            .cloned()
    }

    /// All objects of a resource, sorted by (namespace, name).
    pub(crate) fn iter(&self, kind: &ResourceKind) -> impl Iterator<Item = (&ObjKey, &Arc<Value>)> {
        self.objects.get(&res_key(kind)).into_iter().flatten()
    }

    /// Every object of every resource, by resource (group, plural) and
    /// key, for a run's digest.
    pub(crate) fn digest_objects(&self, digest: &mut super::digest::Fnv) {
        for ((group, plural), objects) in &self.objects {
            let resource = format!("{group}/{plural}");
            for object in objects.values() {
                digest.object(&resource, object);
            }
        }
    }

    /// The objects of a kind whose key sorts after `after` (all of them
    /// without one), in key order: the rest of a paged list, found without
    /// walking the pages already served.
    pub(crate) fn iter_after<'a>(
        &'a self,
        kind: &ResourceKind,
        after: Option<&ObjKey>,
    ) -> impl Iterator<Item = (&'a ObjKey, &'a Arc<Value>)> + 'a {
        use std::ops::Bound;
        let start = match after {
            Some(key) => Bound::Excluded(key.clone()),
            None => Bound::Unbounded,
        };
        self.objects
            .get(&res_key(kind))
            .into_iter()
            .flat_map(move |objects| objects.range((start.clone(), Bound::Unbounded)))
    }

    /// Up to `take` objects of a kind (all without a limit) that `keep`
    /// accepts and whose key sorts after `after`, in key order, as they
    /// were at version `at` (`None`: now): a page of a list, served from
    /// the snapshot of its first page as etcd serves it. The history is
    /// walked back from now to `at`; a version it no longer reaches (the
    /// history compacted past it) is 410 Expired, as an etcd compaction
    /// expires a continue token.
    pub(crate) fn page_at(
        &self,
        kind: &ResourceKind,
        at: Option<u64>,
        after: Option<&ObjKey>,
        take: Option<usize>,
        keep: impl Fn(&Value) -> bool,
    ) -> Result<Vec<Arc<Value>>, ApiError> {
        let take = take.unwrap_or(usize::MAX);
        let at = at.filter(|at| *at < self.rv);
        let Some(at) = at else {
            return Ok(self
                .iter_after(kind, after)
                .map(|(_, obj)| obj)
                .filter(|obj| keep(obj))
                .take(take)
                .cloned()
                .collect());
        };
        if at < self.compacted {
            return Err(ApiError::continue_expired());
        }
        // Each key changed since `at`, with what it was then (none: it
        // did not exist); the oldest change's previous state wins.
        let mut then: BTreeMap<ObjKey, Option<Arc<Value>>> = BTreeMap::new();
        for change in self.history.iter().rev().take_while(|c| c.rv > at) {
            if !std::ptr::eq(change.kind, kind) {
                continue;
            }
            let key = (
                object::namespace(&change.obj).to_string(),
                object::name(&change.obj).to_string(),
            );
            if after.is_some_and(|after| key <= *after) {
                continue;
            }
            then.insert(key, change.prev.clone());
        }
        let mut snapshot: BTreeMap<&ObjKey, &Arc<Value>> = self
            .iter_after(kind, after)
            .filter(|(key, _)| !then.contains_key(*key))
            .collect();
        for (key, obj) in &then {
            if let Some(obj) = obj {
                snapshot.insert(key, obj);
            }
        }
        Ok(snapshot
            .into_values()
            .filter(|obj| keep(obj))
            .take(take)
            .cloned()
            .collect())
    }

    /// Stores `obj` (created or replaced) under a new resourceVersion and
    /// notifies watchers. Returns the stored object.
    pub(crate) fn commit(&mut self, kind: &'static ResourceKind, mut obj: Value) -> Arc<Value> {
        self.rv += 1;
        object::set_at(
            &mut obj,
            "metadata.resourceVersion",
            json!(self.rv.to_string()),
        );
        let key = (
            object::namespace(&obj).to_string(),
            object::name(&obj).to_string(),
        );
        let obj = Arc::new(obj);
        let prev = self
            .objects
            .entry(res_key(kind))
            .or_default()
            .insert(key, obj.clone());
        let ty = if prev.is_some() {
            ChangeType::Modified
        } else {
            ChangeType::Added
        };
        self.record(Change {
            rv: self.rv,
            kind,
            ty,
            obj: obj.clone(),
            prev,
        });
        obj
    }

    /// Removes an object, recording `last` (its final state) under a new
    /// resourceVersion in the DELETED event. Returns the final state, or
    /// `None` when there was nothing to remove.
    pub(crate) fn commit_removal(
        &mut self,
        kind: &'static ResourceKind,
        mut last: Value,
    ) -> Option<Arc<Value>> {
        let key = (
            object::namespace(&last).to_string(),
            object::name(&last).to_string(),
        );
        let prev = self.objects.get_mut(&res_key(kind))?.remove(&key)?;
        self.rv += 1;
        object::set_at(
            &mut last,
            "metadata.resourceVersion",
            json!(self.rv.to_string()),
        );
        let last = Arc::new(last);
        self.record(Change {
            rv: self.rv,
            kind,
            ty: ChangeType::Deleted,
            obj: last.clone(),
            prev: Some(prev),
        });
        Some(last)
    }

    fn record(&mut self, change: Change) {
        let lost = match self.lost_events.get_mut(&res_key(change.kind)) {
            Some(count) if *count > 0 => {
                *count -= 1;
                true
            }
            _ => false,
        };
        self.watchers.retain(|w| {
            (lost && w.cuttable
                || w.event_for(&change)
                    .is_none_or(|item| w.tx.send(item).is_ok()))
                && !w.tx.is_closed()
        });
        self.history.push_back(change);
        while self.history.len() > self.history_limit {
            if let Some(old) = self.history.pop_front() {
                self.compacted = old.rv;
            }
        }
    }

    /// Registers a watcher for changes after `from` (`None`: from now).
    /// Changes already in the history are queued first, then live ones; a
    /// version older than the history yields 410 Expired.
    pub(crate) fn watch(
        &mut self,
        kind: &'static ResourceKind,
        filter: Filter,
        from: Option<u64>,
        initial_events: bool,
    ) -> Result<mpsc::UnboundedReceiver<WatchItem>, ApiError> {
        let (tx, rx) = mpsc::unbounded_channel();
        let sink = WatchSink {
            kind,
            filter,
            tx,
            cuttable: true,
        };
        if initial_events {
            for (_, obj) in self.iter(kind).filter(|(_, o)| sink.filter.matches(o)) {
                // The receiver is alive: `rx` is still in our hands.
                let _ = sink
                    .tx
                    .send(WatchItem::Event(ChangeType::Added, obj.clone()));
            }
            let _ = sink.tx.send(WatchItem::Bookmark(self.rv, true));
        } else if let Some(from) = from.filter(|f| *f < self.rv) {
            if from < self.compacted {
                return Err(ApiError::gone(from, self.compacted));
            }
            for item in self
                .history
                .iter()
                .filter(|c| c.rv > from)
                .filter_map(|c| sink.event_for(c))
            {
                let _ = sink.tx.send(item);
            }
        }
        self.watchers.push(sink);
        Ok(rx)
    }

    /// Forgets the whole history: a watch from any older version now gets 410.
    pub(crate) fn compact(&mut self) {
        self.history.clear();
        self.compacted = self.rv;
    }

    /// Breaks every open watch of the API (observers stay): each stream
    /// ends with a transport error after the events already queued.
    /// Returns how many streams were cut.
    pub(crate) fn cut_watches(&mut self) -> usize {
        let mut cut = 0;
        self.watchers.retain(|w| {
            if !w.cuttable {
                return true;
            }
            if w.tx.send(WatchItem::Cut).is_ok() {
                cut += 1;
            }
            false
        });
        cut
    }

    /// Ends every open watch of the API cleanly (observers stay), as a
    /// server does at `timeoutSeconds` or when it sheds watches: each
    /// stream ends without an error, losing what a lag held back. Returns
    /// how many streams were ended.
    pub(crate) fn end_watches(&mut self) -> usize {
        let mut ended = 0;
        self.watchers.retain(|w| {
            if !w.cuttable {
                return true;
            }
            if w.tx.send(WatchItem::End).is_ok() {
                ended += 1;
            }
            false
        });
        ended
    }

    /// Registers an observer of every change of a kind from now on: an
    /// unfiltered watcher that no cut affects.
    pub(crate) fn observe(
        &mut self,
        kind: &'static ResourceKind,
    ) -> mpsc::UnboundedReceiver<WatchItem> {
        let (tx, rx) = mpsc::unbounded_channel();
        self.watchers.push(WatchSink {
            kind,
            filter: Filter::default(),
            tx,
            cuttable: false,
        });
        rx
    }
}
