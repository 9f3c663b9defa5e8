//! Observers: a test's own record of every change of a kind, in order.
//!
//! An observer is registered with the store like a watch, but it is no
//! request: no reactor fails it, no cut breaks it, and a compaction does
//! not expire it. A test that checks what happened over a whole run (a
//! chaos run: which volume went through which phases, which pods were
//! created for which release) reads it instead of watching through the API
//! it is busy breaking.

use super::store::{ChangeType, WatchItem};
use serde::de::DeserializeOwned;
use std::marker::PhantomData;
use tokio::sync::mpsc;

/// One change an [`Observer`] saw.
#[derive(Debug, Clone, PartialEq)]
pub struct Observed<K> {
    /// Created, changed or removed.
    pub change: ChangeType,
    /// The global resourceVersion of the change: changes of every kind are
    /// ordered by it.
    pub resource_version: u64,
    /// The object after the change (its last state for a removal).
    pub object: K,
}

/// Every change of one kind since the observer was made; see
/// [`MemApi::observe`](crate::MemApi::observe).
#[derive(Debug)]
pub struct Observer<K> {
    rx: mpsc::UnboundedReceiver<WatchItem>,
    kind: PhantomData<fn() -> K>,
}

impl<K: DeserializeOwned> Observer<K> {
    pub(crate) fn new(rx: mpsc::UnboundedReceiver<WatchItem>) -> Self {
        Self {
            rx,
            kind: PhantomData,
        }
    }

    /// The changes made since the last call, oldest first. An object that
    /// does not decode as `K` is skipped (memapi stores what the API took,
    /// which the typed form may refuse).
    pub fn drain(&mut self) -> Vec<Observed<K>> {
        let mut changes = Vec::new();
        while let Ok(item) = self.rx.try_recv() {
            let WatchItem::Event(change, object) = item else {
                continue;
            };
            let resource_version = super::object::str_at(&object, "metadata.resourceVersion")
                .and_then(|v| v.parse().ok())
                .unwrap_or_default();
            if let Ok(object) = K::deserialize(object.as_ref()) {
                changes.push(Observed {
                    change,
                    resource_version,
                    object,
                });
            }
        }
        changes
    }
}
