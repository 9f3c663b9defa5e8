//! What the process keeps of one kind: the newest version of each object,
//! whether a watch showed it or the API server answered it to a write of
//! this process, ordered by resourceVersion so that an older version never
//! replaces a newer one.
//!
//! Every kind has exactly one store, which every controller reads. A kind
//! whose controller needs more than objects by key brings its own
//! implementation of [`Store`] (a cache with indexes of its own); every
//! other kind is kept in a [`MemStore`], with the indexes controllers asked
//! for.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, OnceLock, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use kube::Resource;

use super::Incarnations;
use crate::keys::ObjectKey;
use crate::kinds::Shape;
use crate::version::{Age, age};

/// Why the answer to a write could not be stored (a resourceVersion that
/// is not a number, an object that cannot be packed).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{object} could not be stored: {reason}")]
pub struct StoreError {
    /// The object, e.g. `volume "pv1"`.
    pub object: String,
    /// Why.
    pub reason: String,
}

/// The newest version of each object of one kind; see the module
/// documentation.
pub trait Store<K>: Send + Sync {
    /// Takes in a version a watch showed (a change, or an object of a
    /// list), unless a newer one is held.
    fn watched(&self, object: &Arc<K>);

    /// Takes in the API server's answer to a write of this process, unless
    /// a newer version is held.
    fn written(&self, object: Arc<K>) -> Result<(), StoreError>;

    /// Forgets an object the watch shows gone (deleted, or missing from a
    /// relist); returns the last version held.
    fn forget(&self, key: &ObjectKey) -> Option<Arc<K>>;

    /// Takes in that a delete of this process, of the incarnation `uid`
    /// names when given, found the object gone. By default nothing: the
    /// watch tells when the object is gone. A store that must not take a
    /// late version of it back in the meantime says so here.
    fn deleted_by_write(&self, _key: &ObjectKey, _uid: Option<&str>) {}

    /// The newest version held of the object `key`.
    fn get(&self, key: &ObjectKey) -> Option<Arc<K>>;

    /// The key of every object held, in order.
    fn keys(&self) -> Vec<ObjectKey>;
}

/// A handle on the store of a kind, usable from the moment a controller is
/// built; it reads nothing until the informers start, when the kind's one
/// store (a controller's own, or a [`MemStore`]) is fixed. It carries the
/// kind's [`Shape`], which the watch and the writers of the kind apply.
/// Cheap to clone.
pub struct StoreRef<K: 'static> {
    shape: &'static Shape<K>,
    store: Arc<OnceLock<Arc<dyn Store<K>>>>,
    incarnations: Incarnations,
}

impl<K> Clone for StoreRef<K> {
    fn clone(&self) -> Self {
        Self {
            shape: self.shape,
            store: Arc::clone(&self.store),
            incarnations: self.incarnations.clone(),
        }
    }
}

impl<K> StoreRef<K> {
    /// A handle on the store of the kind `shape` describes, not fixed yet.
    pub fn new(shape: &'static Shape<K>) -> Self {
        Self {
            shape,
            store: Arc::default(),
            incarnations: Incarnations::default(),
        }
    }

    /// The kind's incarnations seen deleted lately, or created by this
    /// process and not yet shown by the watch: the informer and the
    /// writers record them, and keep late versions of deleted ones out of
    /// the store and unseen ones in it through a relist.
    pub fn incarnations(&self) -> &Incarnations {
        &self.incarnations
    }

    /// The kind's shape.
    pub fn shape(&self) -> &'static Shape<K> {
        self.shape
    }

    /// Fixes the store; a second call changes nothing.
    pub fn fix(&self, store: Arc<dyn Store<K>>) {
        let _ = self.store.set(store);
    }

    /// The store, once fixed.
    pub fn store(&self) -> Option<&Arc<dyn Store<K>>> {
        self.store.get()
    }

    /// The newest version held of the object `key`.
    pub fn get(&self, key: &ObjectKey) -> Option<Arc<K>> {
        self.store()?.get(key)
    }
}

/// What an index files an object under: the keys of the objects it names
/// (for example the objects it uses).
pub type IndexFn<K> = fn(&K) -> Vec<ObjectKey>;

/// One index of a [`MemStore`]: which objects name each key.
struct Index<K> {
    name: &'static str,
    values: IndexFn<K>,
    objects: HashMap<ObjectKey, BTreeSet<ObjectKey>>,
}

impl<K> Index<K> {
    fn add(&mut self, key: &ObjectKey, object: &K) {
        for value in (self.values)(object) {
            self.objects.entry(value).or_default().insert(key.clone());
        }
    }

    fn remove(&mut self, key: &ObjectKey, object: &K) {
        for value in (self.values)(object) {
            if let Some(keys) = self.objects.get_mut(&value) {
                keys.remove(key);
                if keys.is_empty() {
                    self.objects.remove(&value);
                }
            }
        }
    }
}

struct Inner<K> {
    objects: BTreeMap<ObjectKey, Arc<K>>,
    indexes: Vec<Index<K>>,
}

/// A store of whole (trimmed) objects by key, with indexes. Cheap to
/// share: wrap it in an `Arc`.
pub struct MemStore<K> {
    inner: RwLock<Inner<K>>,
}

impl<K> Default for MemStore<K> {
    fn default() -> Self {
        Self {
            inner: RwLock::new(Inner {
                objects: BTreeMap::new(),
                indexes: Vec::new(),
            }),
        }
    }
}

impl<K> std::fmt::Debug for MemStore<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemStore")
            .field("objects", &self.read().objects.len())
            .finish()
    }
}

impl<K> MemStore<K> {
    /// Every change replaces whole entries, so a poisoned lock still guards
    /// consistent maps.
    fn read(&self) -> RwLockReadGuard<'_, Inner<K>> {
        self.inner.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> RwLockWriteGuard<'_, Inner<K>> {
        self.inner.write().unwrap_or_else(PoisonError::into_inner)
    }

    /// Adds the index `name` (once: a second index of the same name is
    /// the same index), filing every object held under it.
    pub fn add_index(&self, name: &'static str, values: IndexFn<K>) {
        let mut inner = self.write();
        if inner.indexes.iter().any(|index| index.name == name) {
            return;
        }
        let mut index = Index {
            name,
            values,
            objects: HashMap::new(),
        };
        for (key, object) in &inner.objects {
            index.add(key, object);
        }
        inner.indexes.push(index);
    }

    /// The objects the index `name` files under `value`, in key order.
    pub fn indexed(&self, name: &str, value: &ObjectKey) -> Vec<Arc<K>> {
        let inner = self.read();
        let Some(index) = inner.indexes.iter().find(|index| index.name == name) else {
            return Vec::new();
        };
        index
            .objects
            .get(value)
            .into_iter()
            .flatten()
            .filter_map(|key| inner.objects.get(key).cloned())
            .collect()
    }

    /// The object `key`, if held.
    pub fn get(&self, key: &ObjectKey) -> Option<Arc<K>> {
        self.read().objects.get(key).cloned()
    }

    /// Every object held, in key order.
    pub fn list(&self) -> Vec<Arc<K>> {
        self.read().objects.values().cloned().collect()
    }
}

impl<K: Resource> MemStore<K> {
    /// Stores `object` unless a newer version is held; returns whether it
    /// was stored.
    pub fn offer(&self, object: Arc<K>) -> bool {
        let key = ObjectKey::of(object.as_ref());
        let mut inner = self.write();
        let Inner { objects, indexes } = &mut *inner;
        if let Some(held) = objects.get(&key) {
            if age(held.meta(), object.meta()) == Age::Older {
                return false;
            }
            for index in indexes.iter_mut() {
                index.remove(&key, held);
            }
        }
        for index in indexes.iter_mut() {
            index.add(&key, &object);
        }
        objects.insert(key, object);
        true
    }
}

impl<K: Resource + Send + Sync> Store<K> for MemStore<K> {
    fn watched(&self, object: &Arc<K>) {
        self.offer(Arc::clone(object));
    }

    fn written(&self, object: Arc<K>) -> Result<(), StoreError> {
        self.offer(object);
        Ok(())
    }

    fn forget(&self, key: &ObjectKey) -> Option<Arc<K>> {
        let mut inner = self.write();
        let Inner { objects, indexes } = &mut *inner;
        let last = objects.remove(key)?;
        for index in indexes.iter_mut() {
            index.remove(key, &last);
        }
        Some(last)
    }

    fn get(&self, key: &ObjectKey) -> Option<Arc<K>> {
        MemStore::get(self, key)
    }

    fn keys(&self) -> Vec<ObjectKey> {
        self.read().objects.keys().cloned().collect()
    }
}

#[cfg(test)]
mod tests;
