//! The errors of the publisher and the kubelet clean-up. A publisher
//! reports them to its error handler (see
//! [`Options::on_error`](crate::Options::on_error)) and goes on: it
//! retries failed writes itself.

use crate::validate::ValidationError;
use std::fmt;

/// Some fields of a slice were dropped by the API server: probably
/// feature gates it has off. The publisher keeps what the server stored
/// as its desired state for that slice, so it does not rewrite it forever.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error(
    "pool {pool:?}, slice #{slice}: some fields were dropped by the apiserver, probably because these features are disabled: {}",
    features.join(" ")
)]
pub struct DroppedFieldsError {
    /// The pool.
    pub pool: String,
    /// The slice's index in the pool.
    pub slice: usize,
    /// The feature gates probably off ("unknown" when no guess fits).
    pub features: Vec<&'static str>,
}

/// A write the publisher makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Write {
    /// Creating a slice.
    Create,
    /// Updating a slice.
    Update,
    /// Deleting a slice.
    Delete,
}

impl fmt::Display for Write {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Create => "create",
            Self::Update => "update",
            Self::Delete => "delete",
        })
    }
}

/// What went wrong.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The publisher was started without a driver name.
    #[error("the DRA driver name is empty")]
    NoDriver,
    /// A desired pool is invalid: nothing of it was written.
    #[error("pool validation failed: {0}")]
    Validation(#[from] ValidationError),
    /// The server stored a slice without some of the fields sent.
    #[error("{write} ResourceSlice: {source}")]
    DroppedFields {
        /// The write whose answer lacked them.
        write: Write,
        /// Which slice, and the probable feature gates.
        #[source]
        source: DroppedFieldsError,
    },
    /// A write failed; the pool is retried after a backoff.
    #[error("{write} ResourceSlice {slice:?} of pool {pool:?}: {source}")]
    Api {
        /// The write.
        write: Write,
        /// The pool.
        pool: String,
        /// The slice's name (its `generateName` for a create).
        slice: String,
        /// The client's error.
        #[source]
        source: kube::Error,
    },
    /// The owner Node could not be read for its UID.
    #[error("retrieve node {node:?}: {source}")]
    Node {
        /// The node.
        node: String,
        /// The client's error.
        #[source]
        source: kube::Error,
    },
    /// The watch of the publisher's slices failed; it is restarted.
    #[error("watch ResourceSlices: {0}")]
    Watch(#[source] kube::runtime::watcher::Error),
    /// An update listed other pools than the one the publisher is limited
    /// to; it was ignored.
    #[error(
        "reconcile_pool_with_name={pool:?}, but found {count} pools; expected exactly one pool with this name"
    )]
    OtherPools {
        /// The pool the publisher is limited to.
        pool: String,
        /// How many pools the update listed.
        count: usize,
    },
    /// Deleting the slices of a node failed, after every retry.
    #[error("delete the ResourceSlices of node {node:?}: {source}")]
    Wipe {
        /// The node.
        node: String,
        /// The client's last error.
        #[source]
        source: kube::Error,
    },
}
