//! What a decision asks to read before it decides again (one object of a
//! kind, from the API server), and what the reads found.

use std::any::Any;
use std::collections::HashMap;
use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;

use futures::future::BoxFuture;

use super::{Target, target};
use crate::keys::ObjectKey;
use crate::kinds::Kind;
use crate::plan::Copies;
use crate::write::{WriteError, WriterSet};

/// A read a decision asks for before it decides again: one object of a
/// kind, from the API server.
pub trait Read: fmt::Display + Send + Sync {
    /// The object to read.
    fn target(&self) -> Target;

    /// Reads it through the writer of its kind (stored on the way).
    fn read<'a>(&'a self, writers: &'a WriterSet) -> BoxFuture<'a, Result<Found, WriteError>>;

    /// Reads it from `copies` instead.
    fn on_copies(&self, copies: &Copies) -> Found;
}

/// An object as a read found it; `None`: it does not exist.
pub type Found = Option<Arc<dyn Any + Send + Sync>>;

/// A read of the object `key` of kind `K`.
pub(super) struct ReadOne<K> {
    pub(super) key: ObjectKey,
    pub(super) kind: PhantomData<fn() -> K>,
}

impl<K: Kind> Read for ReadOne<K> {
    fn target(&self) -> Target {
        target::<K>(self.key.clone())
    }

    fn read<'a>(&'a self, writers: &'a WriterSet) -> BoxFuture<'a, Result<Found, WriteError>> {
        Box::pin(async move {
            let found = writers.get::<K>()?.read(&self.key).await?;
            Ok(found.map(|found| found as Arc<dyn Any + Send + Sync>))
        })
    }

    fn on_copies(&self, copies: &Copies) -> Found {
        copies
            .get::<K>(&self.key)
            .map(|found| Arc::new(found.clone()) as Arc<dyn Any + Send + Sync>)
    }
}

impl<K: Kind> fmt::Display for ReadOne<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "read {} {}", K::kind(&()), self.key)
    }
}

/// What the reads a decision asked for found, by object.
#[derive(Clone, Default)]
pub struct Reads {
    found: HashMap<Target, Found>,
}

impl fmt::Debug for Reads {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set()
            .entries(self.found.keys().map(|(_, key)| key))
            .finish()
    }
}

impl Reads {
    /// Nothing read.
    pub fn none() -> Self {
        Self::default()
    }

    /// What the read of the object `key` of kind `K` found (`Some(None)`:
    /// it does not exist); `None` when it was not read.
    pub fn get<K: Kind>(&self, key: &ObjectKey) -> Option<Option<Arc<K>>> {
        let found = self.found.get(&target::<K>(key.clone()))?;
        Some(
            found
                .as_ref()
                .and_then(|found| Arc::clone(found).downcast::<K>().ok()),
        )
    }

    /// Keeps what the read of `target` found.
    pub fn insert(&mut self, target: Target, found: Found) {
        self.found.insert(target, found);
    }

    /// Whether the object of `target` was read.
    pub fn has(&self, target: &Target) -> bool {
        self.found.contains_key(target)
    }
}
