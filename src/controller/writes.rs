//! The controller's writes to the API server. Every successful write's answer
//! goes into the shadow cache before the function returns, so the next
//! decision sees it even when its watch event has not arrived yet.

use std::sync::Arc;

use crate::events::EventType;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use kube::api::PostParams;
use kube::{Api, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::Controller;
use crate::error::{Result, api as api_error};
use crate::events::reference_of;
use crate::keys::{ClaimKey, VolumeName};
use crate::metrics::WriteOutcome;

impl Controller {
    pub(super) fn volumes_api(&self) -> Api<PersistentVolume> {
        Api::all(self.client.clone())
    }

    pub(super) fn claims_api(&self, namespace: &str) -> Api<PersistentVolumeClaim> {
        Api::namespaced(self.client.clone(), namespace)
    }

    /// Writes a volume's spec and metadata, and stores the answer.
    pub(super) async fn update_volume(
        &self,
        volume: &PersistentVolume,
    ) -> Result<Arc<PersistentVolume>> {
        let name = VolumeName::of(volume);
        let what = || format!("updating volume {name:?}");
        let stored = self
            .replace(self.volumes_api(), &name.0, volume, Part::Spec, what)
            .await?;
        self.store_volume(stored)
    }

    /// Writes a volume's status, and stores the answer.
    pub(super) async fn update_volume_status(
        &self,
        volume: &PersistentVolume,
    ) -> Result<Arc<PersistentVolume>> {
        let name = VolumeName::of(volume);
        let what = || format!("updating status of volume {name:?}");
        let stored = self
            .replace(self.volumes_api(), &name.0, volume, Part::Status, what)
            .await?;
        self.store_volume(stored)
    }

    /// Writes a claim's spec and metadata, and stores the answer.
    pub(super) async fn update_claim(
        &self,
        claim: &PersistentVolumeClaim,
    ) -> Result<Arc<PersistentVolumeClaim>> {
        let key = ClaimKey::of(claim);
        let what = || format!("updating claim {key}");
        let api = self.claims_api(&key.namespace);
        let stored = self
            .replace(api, &key.name, claim, Part::Spec, what)
            .await?;
        self.store_claim(stored)
    }

    /// Writes a claim's status, and stores the answer.
    pub(super) async fn update_claim_status(
        &self,
        claim: &PersistentVolumeClaim,
    ) -> Result<Arc<PersistentVolumeClaim>> {
        let key = ClaimKey::of(claim);
        let what = || format!("updating status of claim {key}");
        let api = self.claims_api(&key.namespace);
        let stored = self
            .replace(api, &key.name, claim, Part::Status, what)
            .await?;
        self.store_claim(stored)
    }

    /// Replaces one part of an object (PUT, with the object's
    /// resourceVersion) and counts the write by its outcome.
    async fn replace<K>(
        &self,
        api: Api<K>,
        name: &str,
        object: &K,
        part: Part,
        what: impl FnOnce() -> String,
    ) -> Result<K>
    where
        K: Resource<DynamicType = ()> + Clone + Serialize + DeserializeOwned + std::fmt::Debug,
    {
        let params = PostParams::default();
        let result = match part {
            Part::Spec => api.replace(name, &params, object).await,
            Part::Status => api.replace_status(name, &params, object).await,
        }
        .map_err(api_error(what));
        self.count_write(&K::plural(&()), part.subresource(), &result);
        result
    }

    /// Counts a write to a volume or claim by its outcome.
    fn count_write<T>(&self, resource: &str, subresource: &str, result: &Result<T>) {
        self.metrics
            .api_write(resource, subresource, WriteOutcome::of(result));
    }

    fn store_volume(&self, volume: PersistentVolume) -> Result<Arc<PersistentVolume>> {
        let volume = Arc::new(volume);
        self.cache.offer_volume(Arc::clone(&volume))?;
        Ok(volume)
    }

    fn store_claim(&self, claim: PersistentVolumeClaim) -> Result<Arc<PersistentVolumeClaim>> {
        let claim = Arc::new(claim);
        self.cache.offer_claim(Arc::clone(&claim))?;
        Ok(claim)
    }

    /// Sets a volume's phase (and message) when it differs; returns the
    /// volume as it now is.
    pub(super) async fn set_volume_phase(
        &self,
        volume: &Arc<PersistentVolume>,
        phase: &str,
        message: Option<String>,
    ) -> Result<Arc<PersistentVolume>> {
        if let Some(current) = self.volume_in_phase(volume, phase) {
            tracing::debug!(phase, "volume phase already set");
            return Ok(current);
        }
        let mut changed = PersistentVolume::clone(volume);
        let status = changed.status.get_or_insert_with(Default::default);
        status.phase = Some(phase.to_string());
        status.message = message;
        let stored = self.update_volume_status(&changed).await?;
        tracing::info!(phase, "volume entered phase");
        Ok(stored)
    }

    /// The volume as it is, if it (or a newer cached copy) is already in
    /// `phase`. The claim worker may have moved the volume on since this
    /// sync read it (binding sets the phase too); a write from the older copy
    /// would only meet a conflict.
    fn volume_in_phase(
        &self,
        volume: &Arc<PersistentVolume>,
        phase: &str,
    ) -> Option<Arc<PersistentVolume>> {
        if volume_phase(volume) == phase {
            return Some(Arc::clone(volume));
        }
        self.cache
            .volume(&VolumeName::of(volume).0)
            .filter(|newest| volume_phase(newest) == phase)
    }

    /// Sets a volume's phase and, only when the phase changes, records an
    /// event; the message also goes into the volume's status.
    pub(super) async fn set_volume_phase_with_event(
        &self,
        volume: &Arc<PersistentVolume>,
        phase: &str,
        event_type: EventType,
        reason: &str,
        message: String,
    ) -> Result<Arc<PersistentVolume>> {
        if let Some(current) = self.volume_in_phase(volume, phase) {
            return Ok(current);
        }
        let stored = self
            .set_volume_phase(volume, phase, Some(message.clone()))
            .await?;
        self.event(reference_of(stored.as_ref()), event_type, reason, message)
            .await;
        Ok(stored)
    }

    /// Records an event about an object. It is only queued: the sync never
    /// waits for it to be written.
    pub(super) async fn event(
        &self,
        regarding: k8s_openapi::api::core::v1::ObjectReference,
        event_type: EventType,
        reason: &str,
        message: String,
    ) {
        self.recorder.record(regarding, event_type, reason, message);
    }
}

/// The part of an object a write replaces.
#[derive(Clone, Copy)]
enum Part {
    /// Spec and metadata (the main resource).
    Spec,
    /// The status subresource.
    Status,
}

impl Part {
    /// The subresource label of the write metric ("" for the main resource).
    fn subresource(self) -> &'static str {
        match self {
            Part::Spec => "",
            Part::Status => "status",
        }
    }
}

/// The phase of a volume, "" when it has none yet.
pub(super) fn volume_phase(volume: &PersistentVolume) -> &str {
    volume
        .status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("")
}

/// The phase of a claim, "" when it has none yet.
pub(super) fn claim_phase(claim: &PersistentVolumeClaim) -> &str {
    claim
        .status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("")
}
