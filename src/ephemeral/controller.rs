//! The decisions of the ephemeral volume controller: what one pod's
//! ephemeral volumes need, and the creates that give it to them.
//!
//! A sync reads the pod and each claim from the process's stores. A claim
//! this controller has just created is in the claim store as soon as the
//! API server answers the create (the write door puts it there), so a pod
//! synced again before the claim's watch event does not create it twice
//! and meet `AlreadyExists`. A claim the pod does not control is never
//! touched: the pod gets a `FailedBinding` Warning and the sync fails, to
//! be retried with backoff, as upstream's.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};

use super::claims::{self, EphemeralVolume};
use super::metrics::EphemeralMetrics;
use crate::runtime::api_message::ApiMessage;
use crate::runtime::events::{EventRecorder, EventType, reference_of};
use crate::runtime::informer::{MemStore, StoreRef};
use crate::runtime::keys::ObjectKey;
use crate::runtime::write::Writer;

/// Reason of the Warning a pod gets when one of its ephemeral volumes
/// cannot have its claim (upstream's `events.FailedBinding`).
pub(crate) const FAILED_BINDING: &str = "FailedBinding";

/// What a sync of one pod found or did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Synced {
    /// The pod is gone: nothing to do (its claims go with it, by the
    /// garbage collector).
    PodGone,
    /// The pod is being deleted: nothing to do.
    PodDeleting,
    /// Every ephemeral volume of the pod has its claim; `created` of them
    /// were created by this sync.
    Done {
        /// How many claims this sync created.
        created: usize,
    },
}

/// Why a pod's sync failed (it is retried with backoff).
#[derive(Debug, thiserror::Error)]
#[error("pod {pod}, ephemeral volume {volume}: {reason}")]
pub struct SyncError {
    /// The pod.
    pub pod: ObjectKey,
    /// Its volume whose claim could not be had.
    pub volume: String,
    /// Why, as the pod's Warning says it.
    pub reason: String,
}

/// What the decisions are built from (handed in by the wiring).
pub(crate) struct Parts {
    /// Pods, filed by the claims they use.
    pub(crate) pods: Arc<MemStore<Pod>>,
    /// The process's one store of claims.
    pub(crate) claims: StoreRef<PersistentVolumeClaim>,
    /// Creates claims through the process's write door.
    pub(crate) writer: Writer<PersistentVolumeClaim>,
    /// Events on pods.
    pub(crate) recorder: EventRecorder,
    /// Upstream's create counters.
    pub(crate) metrics: EphemeralMetrics,
}

/// The decision half of the ephemeral volume controller.
pub struct Controller {
    parts: Parts,
}

impl std::fmt::Debug for Controller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Controller")
            .field("recorder", &self.parts.recorder)
            .finish_non_exhaustive()
    }
}

impl Controller {
    pub(crate) fn new(parts: Parts) -> Self {
        Self { parts }
    }

    /// Waits until every event recorded so far is written (for callers
    /// that sync pods themselves and read the events).
    pub async fn flush_events(&self) {
        self.parts.recorder.flush().await;
    }

    /// The claim of `key`, as the claim store holds it.
    pub(crate) fn claim(&self, key: &ObjectKey) -> Option<Arc<PersistentVolumeClaim>> {
        self.parts.claims.get(key)
    }

    /// Whether `pod` has a claim to create or a foreign claim in its way.
    pub(crate) fn needs_work(&self, pod: &Pod) -> bool {
        claims::needs_work(pod, |key| self.claim(key))
    }

    /// Gives each ephemeral volume of the pod `key` its claim. Stops at the
    /// first volume that cannot have one, with a Warning on the pod.
    pub async fn sync_pod(&self, key: &ObjectKey) -> Result<Synced, SyncError> {
        let Some(pod) = self.parts.pods.get(key) else {
            tracing::debug!(pod = %key, "pod gone, nothing to do");
            return Ok(Synced::PodGone);
        };
        if pod.metadata.deletion_timestamp.is_some() {
            tracing::debug!(pod = %key, "pod being deleted, nothing to do");
            return Ok(Synced::PodDeleting);
        }
        let mut created = 0;
        for volume in claims::ephemeral_volumes(&pod) {
            match self.handle_volume(&pod, key, volume).await {
                Ok(made) => created += usize::from(made),
                Err(reason) => {
                    self.parts.recorder.record(
                        &reference_of(pod.as_ref()),
                        EventType::Warning,
                        FAILED_BINDING,
                        format!("ephemeral volume {}: {reason}", volume.volume),
                    );
                    return Err(SyncError {
                        pod: key.clone(),
                        volume: volume.volume.to_string(),
                        reason,
                    });
                }
            }
        }
        Ok(Synced::Done { created })
    }

    /// Makes sure `volume` of `pod` has its claim; `true` when this call
    /// created it.
    async fn handle_volume(
        &self,
        pod: &Pod,
        pod_key: &ObjectKey,
        volume: EphemeralVolume<'_>,
    ) -> Result<bool, String> {
        let key = ObjectKey::new(
            pod_key.namespace.clone(),
            claims::claim_name(pod, volume.volume),
        );
        if let Some(existing) = self.claim(&key) {
            return match claims::not_for_pod(pod, &existing) {
                Some(reason) => Err(reason),
                None => Ok(false),
            };
        }
        let Some(template) = volume.template else {
            return Err("no volumeClaimTemplate".to_string());
        };
        let claim = claims::claim_for(pod, volume.volume, template);
        self.parts.metrics.create_attempted();
        match self.parts.writer.create(&claim).await {
            Ok(_) => {
                tracing::info!(pod = %pod_key, claim = %key, "created the claim of an ephemeral volume");
                Ok(true)
            }
            Err(error) => {
                self.parts.metrics.create_failed();
                let reason = format!("create PVC {}: {}", key.name, api_reason(&error));
                tracing::warn!(pod = %pod_key, claim = %key, error = %reason, "could not create the claim of an ephemeral volume");
                Err(reason)
            }
        }
    }
}

/// What the API server said of a failed write, in its words, as upstream's
/// message has it (without the door's description of the request, and
/// without the client's debug form of the answer).
fn api_reason(error: &crate::runtime::write::WriteError) -> String {
    match error {
        crate::runtime::write::WriteError::Api { source, .. } => ApiMessage(source).to_string(),
        other => other.to_string(),
    }
}

impl crate::runtime::workload::SyncFailure for SyncError {
    fn metric_label(&self) -> &'static str {
        "failed"
    }

    fn is_expected(&self) -> bool {
        false
    }
}
