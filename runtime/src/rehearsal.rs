//! A rehearsal: a plan carried out on copies of objects, with no server.
//! The executor's journaling mode makes each plan's writes this way.
//! Each update is made on the rehearsal's copy (or on the copy the decision
//! read, when the rehearsal has none) and stored back with a new
//! resourceVersion, each create stored, each delete dropped; events and
//! operation starts are noted as lines. What a plan would do, shown without
//! doing it: the scenario tables run every row's decision this way too.

use std::any::{Any, TypeId};
use std::collections::BTreeMap;

use crate::keys::ObjectKey;
use crate::kinds::Kind;

/// The objects of a rehearsal and what it noted besides writes.
#[derive(Default)]
pub struct Rehearsal {
    objects: BTreeMap<(TypeId, ObjectKey), Box<dyn Any + Send + Sync>>,
    version: u64,
    /// The events the plans recorded, as "Type Reason message".
    pub events: Vec<String>,
    /// The operations the plans started, by name.
    pub started: Vec<String>,
}

impl std::fmt::Debug for Rehearsal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Rehearsal")
            .field("objects", &self.objects.len())
            .field("events", &self.events)
            .field("started", &self.started)
            .finish()
    }
}

impl Rehearsal {
    /// Puts `object` as the newest copy of its key.
    pub fn put<K: Kind>(&mut self, object: K) {
        let key = (TypeId::of::<K>(), ObjectKey::of(&object));
        self.objects.insert(key, Box::new(object));
    }

    /// The newest copy of the object `key` of kind `K`.
    pub fn get<K: Kind>(&self, key: &ObjectKey) -> Option<&K> {
        self.objects
            .get(&(TypeId::of::<K>(), key.clone()))
            .and_then(|object| object.downcast_ref::<K>())
    }

    /// Every object of kind `K`, by key.
    #[cfg(any(test, feature = "testing"))]
    pub fn list<K: Kind>(&self) -> Vec<K> {
        self.objects
            .iter()
            .filter(|((kind, _), _)| *kind == TypeId::of::<K>())
            .filter_map(|(_, object)| object.downcast_ref::<K>().cloned())
            .collect()
    }

    /// Drops the object `key` of kind `K`; returns it.
    pub fn remove<K: Kind>(&mut self, key: &ObjectKey) -> Option<K> {
        self.objects
            .remove(&(TypeId::of::<K>(), key.clone()))
            .and_then(|object| object.downcast::<K>().ok())
            .map(|object| *object)
    }

    /// A resourceVersion no copy of the rehearsal had before.
    pub fn next_version(&mut self) -> String {
        self.version += 1;
        format!("rehearsed-{}", self.version)
    }
}
