//! What the process knows of a kind's incarnations (an object's UID:
//! one re-created under the same name is another) beyond its store:
//!
//! - those seen deleted lately, so that a version of one still on the way
//!   (the answer to a write or a read sent before the delete, which may
//!   come after the watch's delete event) does not bring it back into the
//!   store, where nothing would ever remove it again;
//! - those this process created and the watch has not shown yet, so that
//!   a relist whose snapshot is older than such an object does not take
//!   it for gone (the watch that follows the list brings it).
//!
//! A record is kept for [`INCARNATIONS_KEPT`] at most, longer than any
//! request is let run and any watch lags.

use std::time::Duration;

use moka::sync::Cache;

/// How long a deletion, or a creation the watch has not shown, is
/// remembered.
pub const INCARNATIONS_KEPT: Duration = Duration::from_secs(600);

/// A kind's incarnations seen deleted, and created but not yet shown by
/// the watch. Cheap to clone: the clones share one record.
#[derive(Clone)]
pub struct Incarnations {
    deleted: Cache<String, ()>,
    unseen: Cache<String, ()>,
}

impl Default for Incarnations {
    fn default() -> Self {
        let cache = || Cache::builder().time_to_live(INCARNATIONS_KEPT).build();
        Self {
            deleted: cache(),
            unseen: cache(),
        }
    }
}

impl Incarnations {
    /// Records that the incarnation `uid` is gone.
    pub fn deleted(&self, uid: &str) {
        self.unseen.invalidate(uid);
        self.deleted.insert(uid.to_string(), ());
    }

    /// Whether the incarnation `uid` was seen deleted lately.
    pub fn is_deleted(&self, uid: &str) -> bool {
        self.deleted.contains_key(uid)
    }

    /// Records that this process created the incarnation `uid`.
    pub fn created(&self, uid: &str) {
        self.unseen.insert(uid.to_string(), ());
    }

    /// Records that the watch (or a list) showed the incarnation `uid`.
    pub fn shown(&self, uid: &str) {
        self.unseen.invalidate(uid);
    }

    /// Whether this process created the incarnation `uid` and the watch
    /// has not shown it yet.
    pub fn is_unseen(&self, uid: &str) -> bool {
        self.unseen.contains_key(uid)
    }
}

impl std::fmt::Debug for Incarnations {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Incarnations {{ deleted: {}, unseen: {} }}",
            self.deleted.entry_count(),
            self.unseen.entry_count()
        )
    }
}
