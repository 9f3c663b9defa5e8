//! Why a write did not happen, in the API server's words, and how each
//! ending is counted.

use crate::api_message::ApiMessage;
use crate::informer::StoreError;
use crate::metrics::WriteOutcome;

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
    /// What the API server said, in its words (or why nothing was sent),
    /// without the description of the request: what an event about the
    /// failed write carries.
    pub fn server_words(&self) -> String {
        match self {
            Self::Api { source, .. } => ApiMessage(source).to_string(),
            other => other.to_string(),
        }
    }

    /// The `result` label of the sync metric for a plan this ended.
    pub fn metric_label(&self) -> &'static str {
        match self {
            _ if self.is_conflict() => "conflict",
            Self::Api {
                source: kube::Error::Api(status),
                ..
            } if status.is_not_found() => "not_found",
            Self::Api {
                source: kube::Error::Api(_),
                ..
            } => "api",
            Self::Api { .. } => "transport",
            Self::Stale { .. } => "stale",
            Self::Store(_) => "store",
            Self::NoWriter(_) => "wiring",
        }
    }

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
pub(super) fn outcome<T>(result: &Result<T, kube::Error>) -> WriteOutcome {
    match result {
        Ok(_) => WriteOutcome::Ok,
        Err(kube::Error::Api(status)) if status.is_conflict() => WriteOutcome::Conflict,
        Err(_) => WriteOutcome::Error,
    }
}
