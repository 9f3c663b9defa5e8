//! The controller's writes of volumes and claims, through the process's
//! one write door ([`crate::runtime::write`]): every write edits the newest
//! copy of its object under the object's write lock, refuses when the
//! object moved on since the decision, skips what is already so, and puts
//! the server's answer into the shadow cache before the next writer runs.
//! These are the writes of the long operations (a plan's writes go through
//! the executor); the event helpers the decisions share are here too.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use kube::Resource;

use super::changes::PvPlan;
use super::{Controller, Next};
use crate::pv::error::Result;
use crate::pv::keys::VolumeName;
use crate::pv::objects::VolumePhase;
use crate::runtime::events::{EventType, reference_of};
pub(super) use crate::runtime::write::{Edit, Part};

impl Controller {
    /// Edits the newest copy of the volume `basis` and writes `part` of it
    /// when the edit changed it; returns the volume as it now is.
    pub(super) async fn write_volume(
        &self,
        basis: &Arc<PersistentVolume>,
        part: Part,
        edit: impl FnOnce(&mut PersistentVolume) -> Edit,
    ) -> Result<Arc<PersistentVolume>> {
        Ok(self.writers.volumes.update(basis, part, edit).await?)
    }

    /// Edits the newest copy of the claim `basis` and writes `part` of it
    /// when the edit changed it; returns the claim as it now is.
    pub(super) async fn write_claim(
        &self,
        basis: &Arc<PersistentVolumeClaim>,
        part: Part,
        edit: impl FnOnce(&mut PersistentVolumeClaim) -> Edit,
    ) -> Result<Arc<PersistentVolumeClaim>> {
        Ok(self.writers.claims.update(basis, part, edit).await?)
    }

    /// Creates a volume (a provisioned one) and stores the answer.
    pub(super) async fn create_volume(
        &self,
        volume: &PersistentVolume,
    ) -> Result<Arc<PersistentVolume>> {
        Ok(self.writers.volumes.create(volume).await?)
    }

    /// Deletes the volume object `volume` names, and only that incarnation:
    /// the request carries its UID as a precondition, so a volume re-created
    /// under the same name since is never deleted in its place (the server
    /// answers 409). A volume already gone counts as deleted.
    pub(super) async fn delete_volume(&self, volume: &PersistentVolume) -> Result<()> {
        let name = VolumeName::of(volume);
        self.writers
            .volumes
            .delete(&name.key(), volume.metadata.uid.as_deref())
            .await?;
        Ok(())
    }

    /// Makes a volume Failed, with an event saying why: the end of a
    /// reclaim operation that could not reclaim it.
    pub(super) async fn fail_volume(
        &self,
        volume: &Arc<PersistentVolume>,
        reason: &str,
        message: String,
    ) -> Result<()> {
        let mut plan = PvPlan::default();
        self.set_volume_phase_with_event(
            &mut plan,
            volume,
            VolumePhase::Failed,
            EventType::Warning,
            reason,
            message,
        )?;
        self.carry_out(plan).await.map(drop)
    }

    /// Carries `plan` out and returns what follows it.
    pub(super) async fn carry_out(&self, plan: PvPlan) -> Result<Next> {
        Ok(self.executor.execute(plan).await?)
    }

    /// Records a Warning event about `object`: something went wrong or
    /// needs attention. Never waits for the write.
    pub(super) fn warn<K: Resource<DynamicType = ()>>(
        &self,
        object: &K,
        reason: &str,
        message: String,
    ) {
        self.record(object, EventType::Warning, reason, message);
    }

    /// Records a Normal event about `object`: something worth knowing.
    /// Never waits for the write.
    pub(super) fn note<K: Resource<DynamicType = ()>>(
        &self,
        object: &K,
        reason: &str,
        message: String,
    ) {
        self.record(object, EventType::Normal, reason, message);
    }

    /// Records an event of `event_type` about `object`.
    pub(super) fn record<K: Resource<DynamicType = ()>>(
        &self,
        object: &K,
        event_type: EventType,
        reason: &str,
        message: String,
    ) {
        self.recorder
            .record(&reference_of(object), event_type, reason, message);
    }
}

#[cfg(test)]
mod tests;
