//! What the binder remembers of each claim still unbound: how its last
//! sync ended (for `/explain`), and the last binding event it was told, with
//! what that event was made from, so that a claim that stays Pending
//! through many resyncs is told again only when something changed.
//!
//! Decisions read it; their plans say what to remember
//! ([`crate::pv::controller::PvEffect`]), and the wiring remembers it when
//! the executor reaches that step, and how each sync ended.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use k8s_openapi::jiff::Timestamp;
use serde::Serialize;

use crate::runtime::keys::ObjectKey;

/// How a claim's last sync ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LastSync {
    /// `waiting for a volume`, `synced`, or the error.
    pub outcome: String,
    /// When.
    pub at: Timestamp,
}

/// What the binder remembers of each claim still unbound: its last sync,
/// and the last binding message its events carried (a Pending claim's
/// event is written again only when the message changes).
#[derive(Debug, Default)]
pub(crate) struct ClaimMemory {
    claims: Mutex<HashMap<ObjectKey, Remembered>>,
}

#[derive(Debug, Default)]
struct Remembered {
    last_sync: Option<LastSync>,
    message: Option<(String, String)>,
    /// What the last binding event was made from: its reason and first
    /// words, the index's change count and the claim's resourceVersion.
    made_from: Option<MadeFrom>,
}

/// What a binding event's message was made from: its reason and first
/// words, the volume index's change count and the claim's resourceVersion.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MadeFrom {
    pub(crate) reason: String,
    pub(crate) base: String,
    pub(crate) changes: u64,
    pub(crate) version: Option<String>,
}

impl ClaimMemory {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<ObjectKey, Remembered>> {
        // No code panics while holding the lock.
        self.claims.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether the claim was told `reason` with `message` last.
    pub(crate) fn was_told(&self, key: &ObjectKey, reason: &str, message: &str) -> bool {
        self.lock()
            .get(key)
            .and_then(|remembered| remembered.message.as_ref())
            .is_some_and(|(r, m)| r == reason && m == message)
    }

    /// Whether the claim's last binding event was made from the same.
    pub(crate) fn made_from(&self, key: &ObjectKey, made_from: &MadeFrom) -> bool {
        self.lock()
            .get(key)
            .and_then(|remembered| remembered.made_from.as_ref())
            .is_some_and(|last| last == made_from)
    }

    /// How the claim's last sync ended.
    pub(crate) fn last_sync(&self, key: &ObjectKey) -> Option<LastSync> {
        self.lock().get(key).and_then(|n| n.last_sync.clone())
    }

    /// Remembers that the claim was told `reason` with `message`.
    pub(crate) fn told(&self, key: &ObjectKey, reason: &str, message: &str) {
        self.lock().entry(key.clone()).or_default().message =
            Some((reason.to_string(), message.to_string()));
    }

    /// Remembers what the claim's last binding event was made from.
    pub(crate) fn set_made_from(&self, key: &ObjectKey, made_from: MadeFrom) {
        self.lock().entry(key.clone()).or_default().made_from = Some(made_from);
    }

    /// Remembers how the claim's sync ended; a claim that no longer waits
    /// is forgotten.
    pub(crate) fn synced(&self, key: &ObjectKey, waits: bool, outcome: String) {
        let mut claims = self.lock();
        if !waits && outcome == SYNCED {
            claims.remove(key);
            return;
        }
        claims.entry(key.clone()).or_default().last_sync = Some(LastSync {
            outcome,
            at: crate::runtime::ambient::now(),
        });
    }

    /// Forgets a deleted claim.
    pub(crate) fn forget(&self, key: &ObjectKey) {
        self.lock().remove(key);
    }
}

/// The outcome of a sync that left nothing to wait for.
pub(crate) const SYNCED: &str = "synced";

/// The outcome of a sync that left the claim waiting for a volume.
pub(crate) const WAITING: &str = "waiting for a volume";
