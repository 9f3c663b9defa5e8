//! The incarnations of a kind the process has seen deleted, so that a
//! version of one still on the way (the answer to a write or a read sent
//! before the delete, which may come after the watch's delete event) does
//! not bring it back into the store, where nothing would ever remove it
//! again.
//!
//! An incarnation is its UID: an object re-created under the same name
//! has another, and is stored as usual. A record is kept for
//! [`DELETIONS_KEPT`], longer than any request is let run.

use std::time::Duration;

use moka::sync::Cache;

/// How long a deletion is remembered.
pub const DELETIONS_KEPT: Duration = Duration::from_secs(600);

/// The UIDs of a kind's objects seen deleted lately. Cheap to clone: the
/// clones share one record.
#[derive(Clone)]
pub struct Deletions(Cache<String, ()>);

impl Default for Deletions {
    fn default() -> Self {
        Self(Cache::builder().time_to_live(DELETIONS_KEPT).build())
    }
}

impl Deletions {
    /// Records that the incarnation `uid` is gone.
    pub fn record(&self, uid: &str) {
        self.0.insert(uid.to_string(), ());
    }

    /// Whether the incarnation `uid` was seen deleted lately.
    pub fn contains(&self, uid: &str) -> bool {
        self.0.contains_key(uid)
    }
}

impl std::fmt::Debug for Deletions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Deletions({})", self.0.entry_count())
    }
}
