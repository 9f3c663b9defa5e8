//! Why a pod's entry cannot have its claim: the decision says so with a
//! Warning on the pod, and the pod's turn fails, to be retried with
//! backoff.

use crate::runtime::plan::Failure;

/// Why a pod's entry cannot have its claim.
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
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
        /// The entry.
        entry: String,
    },
}

impl SyncError {
    /// The failure the pod's turn ends with.
    pub(crate) fn failure(&self) -> Failure {
        let label = match self {
            Self::MissingTemplate(_) => "missing_template",
            Self::FeatureDisabled(_) => "feature_disabled",
            Self::Unsupported { .. } => "unsupported",
        };
        Failure {
            reason: self.to_string(),
            label,
            expected: false,
        }
    }
}

/// The result of a step of a decision.
pub(crate) type Result<T> = std::result::Result<T, SyncError>;
