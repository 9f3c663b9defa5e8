//! The controller's error type: what went wrong while syncing one object,
//! with enough context (object, operation) to act on a log line.

use crate::pv::index::MatchError;
use crate::runtime::api_message::ApiMessage;
use crate::runtime::informer::StoreError;
use crate::runtime::plan::Failure;
use crate::runtime::write::WriteError;

/// Why a sync of a volume or claim did not finish. A failed sync is retried
/// with per-key backoff; none of these stops the controller.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Error {
    /// An API request failed; `action` says which write or read it was.
    /// Shown with the server's message, as upstream's events and logs
    /// carry it.
    #[error("{action}: {}", ApiMessage(source))]
    Api {
        /// What the controller was doing, e.g. `updating status of volume "pv1"`.
        action: String,
        /// The client's error.
        #[source]
        source: kube::Error,
    },
    /// The store refused the answer to a write (an unparsable
    /// resourceVersion).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A claim could not be matched against volumes (invalid request).
    #[error(transparent)]
    Match(#[from] MatchError),
    /// A StorageClass is unusable as it stands.
    #[error("{0}")]
    StorageClass(String),
    /// Two objects disagree in a way the controller must not paper over.
    #[error("{0}")]
    Inconsistent(String),
    /// The object changed since the sync decided what to write (another
    /// task of this process wrote it first); the write was not sent and the
    /// sync is retried from the newer copy.
    #[error("{object} changed since the decision: {reason}")]
    Stale {
        /// The object, e.g. `volume "pv1"`.
        object: String,
        /// What changed.
        reason: String,
    },
    /// The object must wait for a long operation on another object to end
    /// before it can be decided on; the sync is retried with backoff.
    #[error("{object} waits: {reason}")]
    Waiting {
        /// The object, e.g. `volume "pv1"`.
        object: String,
        /// What it waits for.
        reason: String,
    },
    /// A volume plugin failed to provision, delete or recycle storage;
    /// `action` says which, for which object.
    #[error("{action}: {source}")]
    Plugin {
        /// What the controller asked of the plugin, e.g. `deleting volume "pv1"`.
        action: String,
        /// The plugin's error.
        #[source]
        source: crate::pv::plugins::PluginError,
    },
}

impl Error {
    /// A short, stable label for metrics, one per kind of failure.
    pub(crate) fn metric_label(&self) -> &'static str {
        match self {
            Error::Api { source, .. } => match source {
                kube::Error::Api(status) if status.is_conflict() => "conflict",
                kube::Error::Api(status) if status.is_not_found() => "not_found",
                kube::Error::Api(_) => "api",
                _ => "transport",
            },
            Error::Store(_) => "store",
            Error::Match(_) => "match",
            Error::StorageClass(_) => "storage_class",
            Error::Inconsistent(_) => "inconsistent",
            Error::Stale { .. } => "stale",
            Error::Waiting { .. } => "waiting",
            Error::Plugin { .. } => "plugin",
        }
    }

    /// Whether the error is an optimistic-concurrency conflict or a write
    /// refused because the object moved on: both are expected now and then,
    /// are retried at once from fresh data, and are logged more quietly.
    pub(crate) fn is_conflict(&self) -> bool {
        matches!(self, Error::Api { source: kube::Error::Api(status), .. } if status.is_conflict())
            || matches!(self, Error::Stale { .. })
    }

    /// Whether the write gate refused the request: this replica lost the
    /// lease, and the server never saw the request.
    pub(crate) fn is_refused_as_follower(&self) -> bool {
        matches!(self, Error::Api { source, .. } if crate::runtime::client::refused_as_follower(source))
    }

    /// Whether the sync only waits for another operation to end: no
    /// failure at all, retried with backoff and logged quietly.
    pub(crate) fn is_waiting(&self) -> bool {
        matches!(self, Error::Waiting { .. })
    }
}

impl Error {
    /// The failure a decision's plan ends with, for the runtime to log,
    /// count and retry: expected (logged quietly) for a conflict or a
    /// wait for another operation.
    pub(crate) fn failure(&self) -> Failure {
        Failure {
            reason: self.to_string(),
            label: self.metric_label(),
            expected: self.is_conflict() || self.is_waiting(),
        }
    }
}

impl From<WriteError> for Error {
    fn from(error: WriteError) -> Self {
        match error {
            WriteError::Api { action, source } => Self::Api { action, source },
            WriteError::Stale { object, reason } => Self::Stale { object, reason },
            WriteError::Store(error) => Self::Store(error),
            error @ WriteError::NoWriter(_) => Self::Inconsistent(error.to_string()),
        }
    }
}

/// The controller's result type.
pub(crate) type Result<T, E = Error> = std::result::Result<T, E>;
