//! The decision half of the ephemeral volume controller: a pod's sync
//! decides from the stores what its ephemeral volumes need ([`decide`]: a
//! plan of creates, and the Warning of a volume that cannot have its
//! claim), then carries the plan out through the process's executor.
//!
//! A claim this controller has just created is in the claim store as soon
//! as the API server answers the create (the write door puts it there), so
//! a pod decided again before the claim's watch event does not create it
//! twice and meet `AlreadyExists`. A claim the pod does not control is
//! never touched: the pod gets a `FailedBinding` Warning and the sync
//! fails, to be retried with backoff, as upstream's. So does a create the
//! API server refuses; the creates after it are not sent.

mod decide;
#[cfg(test)]
mod tests;

use std::sync::Arc;

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};

use super::metrics::EphemeralMetrics;
use crate::runtime::api_message::ApiMessage;
use crate::runtime::events::{EventRecorder, EventType, reference_of};
use crate::runtime::executor::Executor;
use crate::runtime::journal::Journal;
use crate::runtime::keys::ObjectKey;
use crate::runtime::operations::OperationTracker;
use crate::runtime::write::{WriteError, Writer, WriterSet};
pub(crate) use decide::{FAILED_BINDING, Known, PlannedClaim, PodEnd, PodPlan};

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

/// What the controller is built from (handed in by the wiring).
pub(crate) struct Parts {
    /// The stores the decisions read.
    pub(crate) known: Known,
    /// Carries the plans out (claim creates through the process's write
    /// door, events on pods).
    pub(crate) executor: Executor,
    /// Events on pods (the executor's recorder, for a failed create's
    /// Warning and for flushing).
    pub(crate) recorder: EventRecorder,
    /// Upstream's create counters.
    pub(crate) metrics: EphemeralMetrics,
}

impl Parts {
    /// The parts of a controller that decides from `known`, creates claims
    /// through `writer` (the process's write door), records events on
    /// `recorder` and counts its creates in `metrics`; with a `journal`,
    /// its plans go there instead of being carried out.
    pub(crate) fn new(
        known: Known,
        writer: Writer<PersistentVolumeClaim>,
        recorder: EventRecorder,
        metrics: EphemeralMetrics,
        journal: Option<Arc<dyn Journal>>,
    ) -> Self {
        let executor = Executor::new(
            writer.controller(),
            WriterSet::default().with(writer),
            recorder.clone(),
            // The controller starts no long operation.
            OperationTracker::new(),
            journal,
        );
        Self {
            known,
            executor,
            recorder,
            metrics,
        }
    }
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
    #[cfg(feature = "testing")]
    pub async fn flush_events(&self) {
        self.parts.recorder.flush().await;
    }

    /// Whether `pod` has a claim to create or a foreign claim in its way.
    pub(crate) fn needs_work(&self, pod: &Pod) -> bool {
        super::claims::needs_work(pod, |key| self.parts.known.claim(key))
    }

    /// Decides what the pod `key` needs, from the stores; sends nothing.
    pub(crate) fn decide(&self, key: &ObjectKey) -> PodPlan {
        self.parts.known.decide_pod(key)
    }

    /// Gives each ephemeral volume of the pod `key` its claim: decides,
    /// then carries the plan out. Stops at the first volume that cannot
    /// have one, with a Warning on the pod.
    pub async fn sync_pod(&self, key: &ObjectKey) -> Result<Synced, SyncError> {
        let plan = self.decide(key);
        self.execute(key, plan).await
    }

    /// Carries a pod's plan out, counts its creates, and says what the
    /// sync came to. A create the API server refused ends the plan, with
    /// a Warning on the pod naming the volume.
    pub(crate) async fn execute(
        &self,
        key: &ObjectKey,
        mut plan: PodPlan,
    ) -> Result<Synced, SyncError> {
        let creates = std::mem::take(&mut plan.after.creates);
        let pod = plan.after.pod.take();
        let result = self.parts.executor.execute(plan).await;
        self.count(key, &creates);
        match result.map(|after| after.end) {
            Ok(PodEnd::Gone) => Ok(Synced::PodGone),
            Ok(PodEnd::Deleting) => Ok(Synced::PodDeleting),
            Ok(PodEnd::Done) => Ok(Synced::Done {
                created: creates.len(),
            }),
            Ok(PodEnd::Refused { volume, reason }) => Err(SyncError {
                pod: key.clone(),
                volume,
                reason,
            }),
            Err(error) => Err(self.create_failed(key, pod.as_deref(), &creates, &error)),
        }
    }

    /// Counts the creates that were sent, and logs those that went through.
    fn count(&self, key: &ObjectKey, creates: &[PlannedClaim]) {
        for create in creates {
            if create.answer.answered().is_some() {
                self.parts.metrics.create_attempted();
                tracing::info!(pod = %key, claim = %create.claim, "created the claim of an ephemeral volume");
            } else if create.answer.failed() {
                self.parts.metrics.create_attempted();
                self.parts.metrics.create_failed();
            }
        }
    }

    /// The failure of a plan that ended at a create (its only writes are
    /// creates), with the Warning on the pod that upstream records.
    fn create_failed(
        &self,
        key: &ObjectKey,
        pod: Option<&Pod>,
        creates: &[PlannedClaim],
        error: &WriteError,
    ) -> SyncError {
        let failed = creates.iter().find(|create| create.answer.failed());
        let (volume, claim) = failed
            .map(|create| (create.volume.clone(), create.claim.name.clone()))
            .unwrap_or_default();
        let reason = format!("create PVC {claim}: {}", api_reason(error));
        tracing::warn!(pod = %key, %claim, error = %reason, "could not create the claim of an ephemeral volume");
        if let Some(pod) = pod {
            self.parts.recorder.record(
                &reference_of(pod),
                EventType::Warning,
                FAILED_BINDING,
                format!("ephemeral volume {volume}: {reason}"),
            );
        }
        SyncError {
            pod: key.clone(),
            volume,
            reason,
        }
    }
}

/// What the API server said of a failed write, in its words, as upstream's
/// message has it (without the door's description of the request, and
/// without the client's debug form of the answer).
fn api_reason(error: &WriteError) -> String {
    match error {
        WriteError::Api { source, .. } => ApiMessage(source).to_string(),
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
