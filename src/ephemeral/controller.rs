//! The decisions of the ephemeral volume controller: what one pod's
//! ephemeral volumes need, and the creates that give it to them.
//!
//! A sync reads the pod from the lister and each claim from the lister or,
//! for a claim this controller has just created and whose watch event has
//! not come yet, from the record of its own creates (so a pod synced again
//! in that window does not create the claim twice and meet
//! `AlreadyExists`). A claim the pod does not control is never touched: the
//! pod gets a `FailedBinding` Warning and the sync fails, to be retried
//! with backoff, as upstream's.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::api::PostParams;
use kube::runtime::reflector::Store;
use kube::{Api, Client};

use super::claims::{self, EphemeralVolume};
use super::metrics::EphemeralMetrics;
use crate::runtime::events::{EventRecorder, EventType, reference_of};
use crate::runtime::keys::ObjectKey;

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

/// What the decisions are built from (handed in by the base).
pub(crate) struct Parts {
    pub(crate) client: Client,
    pub(crate) pods: Store<Pod>,
    pub(crate) claims: Store<PersistentVolumeClaim>,
    pub(crate) recorder: EventRecorder,
    pub(crate) metrics: EphemeralMetrics,
}

/// The decision half of the ephemeral volume controller.
pub struct EphemeralController {
    client: Client,
    pods: Store<Pod>,
    claims: Store<PersistentVolumeClaim>,
    /// Claims this controller created whose watch event has not come yet.
    created: Mutex<HashMap<ObjectKey, Arc<PersistentVolumeClaim>>>,
    recorder: EventRecorder,
    metrics: EphemeralMetrics,
}

impl std::fmt::Debug for EphemeralController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EphemeralController")
            .field("recorder", &self.recorder)
            .finish_non_exhaustive()
    }
}

impl EphemeralController {
    pub(crate) fn new(parts: Parts) -> Self {
        Self {
            client: parts.client,
            pods: parts.pods,
            claims: parts.claims,
            created: Mutex::default(),
            recorder: parts.recorder,
            metrics: parts.metrics,
        }
    }

    /// The event recorder, for the base's flush at shutdown.
    pub(crate) fn recorder(&self) -> &EventRecorder {
        &self.recorder
    }

    /// Waits until every event recorded so far is written (for callers
    /// that sync pods themselves and read the events).
    pub async fn flush_events(&self) {
        self.recorder.flush().await;
    }

    /// The pod lister.
    pub(crate) fn pods(&self) -> &Store<Pod> {
        &self.pods
    }

    /// The claim of `key`: from the lister, else from this controller's own
    /// creates that the watch has not delivered yet.
    pub(crate) fn claim(&self, key: &ObjectKey) -> Option<Arc<PersistentVolumeClaim>> {
        self.claims
            .get(&key.object_ref())
            .or_else(|| self.created_claims().get(key).cloned())
    }

    /// Forgets a created claim once the watch has delivered it (or its
    /// deletion): the lister is the truth from then on.
    pub(crate) fn claim_seen(&self, key: &ObjectKey) {
        self.created_claims().remove(key);
    }

    /// Forgets every created claim after a relist: the lister holds what
    /// the server listed, and a created claim missing from it was deleted
    /// meanwhile (a claim created after the list was taken is met as
    /// `AlreadyExists` at worst, and retried).
    pub(crate) fn relisted(&self) {
        self.created_claims().clear();
    }

    /// Whether `pod` has a claim to create or a foreign claim in its way.
    pub(crate) fn needs_work(&self, pod: &Pod) -> bool {
        claims::needs_work(pod, |key| self.claim(key))
    }

    fn created_claims(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<ObjectKey, Arc<PersistentVolumeClaim>>> {
        self.created.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Gives each ephemeral volume of the pod `key` its claim. Stops at the
    /// first volume that cannot have one, with a Warning on the pod.
    pub async fn sync_pod(&self, key: &ObjectKey) -> Result<Synced, SyncError> {
        let Some(pod) = self.pods.get(&key.object_ref()) else {
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
                    self.recorder.record(
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
        self.metrics.create_attempted();
        let api: Api<PersistentVolumeClaim> = Api::namespaced(self.client.clone(), &key.namespace);
        match api.create(&PostParams::default(), &claim).await {
            Ok(stored) => {
                tracing::info!(pod = %pod_key, claim = %key, "created the claim of an ephemeral volume");
                self.created_claims().insert(key, Arc::new(stored));
                Ok(true)
            }
            Err(error) => {
                self.metrics.create_failed();
                tracing::warn!(pod = %pod_key, claim = %key, %error, "could not create the claim of an ephemeral volume");
                Err(format!("create PVC {}: {error}", key.name))
            }
        }
    }
}
