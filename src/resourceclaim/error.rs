//! Why one sync of a pod or claim failed; the worker retries the key with
//! backoff, and a pod's failure is also a Warning event on the pod.

use crate::runtime::api_message::ApiMessage;

/// A failed sync.
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    /// A request to the API server failed; shown with the server's
    /// message, as upstream's events and logs carry it.
    #[error("{action}: {}", ApiMessage(source))]
    Api {
        /// What the request was for (`create ResourceClaim for pod ns/p`).
        action: String,
        /// The client's error.
        #[source]
        source: kube::Error,
    },
    /// The claim changed since the sync read it; nothing was sent.
    #[error("{0}")]
    Stale(String),
    /// The answer to a write could not be stored.
    #[error(transparent)]
    Store(#[from] crate::runtime::informer::StoreError),
    /// A write the controller's wiring has no writer for.
    #[error("{0}")]
    Wiring(String),
    /// The template a pod's entry names does not exist (yet).
    #[error("resource claim template {0:?}: resourceclaimtemplate.resource.k8s.io {0:?} not found")]
    MissingTemplate(String),
    /// The template asks for what a feature gate switched off (upstream's
    /// messages).
    #[error("{0}")]
    FeatureDisabled(&'static str),
    /// An entry of `pod.spec.resourceClaims` names neither a claim nor a
    /// template: an API this controller does not know (upstream's text).
    #[error(
        "checking for claim before creating it: pod \"{pod}\", spec.resourceClaim {entry:?}: none of the supported fields are set"
    )]
    Unsupported {
        /// The pod.
        pod: crate::runtime::keys::ObjectKey,
        /// The entry's name.
        entry: String,
    },
}

impl SyncError {
    /// A short label for the sync-duration metric's `result`.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Self::Api { .. } | Self::Stale(_) if self.is_conflict() => "conflict",
            Self::Api { .. } | Self::Stale(_) => "api_error",
            Self::Store(_) => "cache",
            Self::Wiring(_) => "wiring",
            Self::MissingTemplate(_) => "missing_template",
            Self::FeatureDisabled(_) => "feature_disabled",
            Self::Unsupported { .. } => "unsupported",
        }
    }

    /// Whether the API server refused a write with 409 (a stale version, or
    /// a name taken): retried at once, without a warning.
    pub fn is_conflict(&self) -> bool {
        match self {
            Self::Api {
                source: kube::Error::Api(status),
                ..
            } => status.is_conflict(),
            Self::Stale(_) => true,
            _ => false,
        }
    }

    /// An API error with what the request was for.
    pub(crate) fn api(action: impl Into<String>, source: kube::Error) -> Self {
        Self::Api {
            action: action.into(),
            source,
        }
    }
}

impl From<crate::runtime::write::WriteError> for SyncError {
    fn from(error: crate::runtime::write::WriteError) -> Self {
        use crate::runtime::write::WriteError;
        match error {
            WriteError::Api { action, source } => Self::Api { action, source },
            WriteError::Stale { object, reason } => Self::Stale(format!("{object}: {reason}")),
            WriteError::Store(error) => Self::Store(error),
            error @ WriteError::NoWriter(_) => Self::Wiring(error.to_string()),
        }
    }
}

impl crate::runtime::workload::SyncFailure for SyncError {
    fn metric_label(&self) -> &'static str {
        SyncError::metric_label(self)
    }

    fn is_expected(&self) -> bool {
        self.is_conflict()
    }
}

/// The result of a sync.
pub(crate) type Result<T> = std::result::Result<T, SyncError>;
