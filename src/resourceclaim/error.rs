//! Why one sync of a pod or claim failed; the worker retries the key with
//! backoff, and a pod's failure is also a Warning event on the pod.

/// A failed sync.
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    /// A request to the API server failed.
    #[error("{action}: {source}")]
    Api {
        /// What the request was for (`create ResourceClaim for pod ns/p`).
        action: String,
        /// The client's error.
        #[source]
        source: kube::Error,
    },
    /// The template a pod's entry names does not exist (yet).
    #[error("resource claim template {0:?}: not found")]
    MissingTemplate(String),
    /// An entry of `pod.spec.resourceClaims` names neither a claim nor a
    /// template: an API this controller does not know.
    #[error(
        "spec.resourceClaims {0:?}: neither a claim name nor a template name (unsupported API)"
    )]
    Unsupported(String),
}

impl SyncError {
    /// A short label for the sync-duration metric's `result`.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Self::Api { .. } if self.is_conflict() => "conflict",
            Self::Api { .. } => "api_error",
            Self::MissingTemplate(_) => "missing_template",
            Self::Unsupported(_) => "unsupported",
        }
    }

    /// Whether the API server refused a write with 409 (a stale version, or
    /// a name taken): retried at once, without a warning.
    pub fn is_conflict(&self) -> bool {
        matches!(self, Self::Api { source: kube::Error::Api(status), .. } if status.code == 409)
    }

    /// An API error with what the request was for.
    pub(crate) fn api(action: impl Into<String>, source: kube::Error) -> Self {
        Self::Api {
            action: action.into(),
            source,
        }
    }
}

/// The result of a sync.
pub(crate) type Result<T> = std::result::Result<T, SyncError>;
