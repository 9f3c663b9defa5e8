//! The recycle operation: scrubs a released volume with its plugin (a
//! recycler pod for hostPath and NFS) and makes it Available again. A volume
//! still mounted by a pod is not touched; a volume no plugin can recycle, or
//! whose scrub failed, is marked Failed.
//!
//! What the plugin writes and records (its pod, the pod's UID on the
//! volume, the pod's events relayed onto the volume) goes through the same
//! executor as every plan ([`RecycleWrites`]).

use std::sync::Arc;

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::{PersistentVolume, Pod};

use super::{Operations, PvExecutor, another_incarnation, carry_out, read_volume};
use crate::pv::constants::reasons;
use crate::pv::controller::{PvPlan, changes};
use crate::pv::error::{Error, Result};
use crate::pv::keys::VolumeName;
use crate::pv::objects::{VolumePhase, claim_ref_key, claim_ref_uid, volume_phase};
use crate::pv::plugins::{RecycleContext, RecycleWrites};
use crate::runtime::events::EventType;
use crate::runtime::keys::ObjectKey;
use crate::runtime::kinds::Part;
use crate::runtime::operations::OperationName;
use crate::runtime::write::WriteError;

impl Operations {
    /// Recycles a released volume: re-reads it, checks it is the one the
    /// operation was started for, still released and unused, scrubs it and
    /// unbinds it. A failed scrub is an error, so the next attempt waits out
    /// the tracker's backoff.
    #[tracing::instrument(skip_all, fields(volume = %name.object().name, operation = "recycle"))]
    pub(super) async fn recycle(&self, name: &OperationName, executor: &PvExecutor) -> Result<()> {
        let volume_name = VolumeName::new(&name.object().name);
        let Some(volume) = read_volume(executor, &volume_name).await? else {
            tracing::debug!("volume deleted, nothing to recycle");
            return Ok(());
        };
        if another_incarnation(name, volume.metadata.uid.as_deref()) {
            tracing::debug!("volume re-created under its name, not recycling the new one");
            return Ok(());
        }
        if !self.binder.is_volume_released(&volume) {
            tracing::debug!("volume is not released any more, not recycling");
            return Ok(());
        }
        let users = self.pods_using_old_claim(&volume);
        if !users.is_empty() {
            tracing::info!(pods = ?users, "volume still used by pods, recycle postponed");
            let mut plan = PvPlan::default();
            plan.event(
                volume.as_ref(),
                EventType::Normal,
                reasons::VOLUME_FAILED_RECYCLE,
                format!("Volume is used by pods: {}", users.join(",")),
            );
            carry_out(executor, plan).await?;
            return Ok(());
        }
        let Some(plugin) = self.binder.settings.plugins.recycler_for(&volume) else {
            tracing::warn!("no plugin can recycle the volume");
            fail(
                executor,
                &volume,
                "No recycler plugin found for the volume!".to_string(),
            )
            .await?;
            return Ok(());
        };
        let writes = Arc::new(Writes {
            executor: executor.clone(),
            volume: Arc::clone(&volume),
        });
        let context = RecycleContext::new(self.client.clone(), writes);
        tracing::info!(plugin = plugin.name(), "recycling volume");
        let recycled = plugin.recycle(&volume, &context).await;
        // The recycle wrote the volume (its pod's record): what follows is
        // planned on the volume as it is now, as long as it is the same
        // release.
        let Some(now) = same_release(executor, &volume).await? else {
            tracing::info!("volume changed during the recycle, left as it is now");
            return Ok(());
        };
        match recycled {
            Ok(()) => {
                tracing::info!("volume recycled");
                let mut plan = PvPlan::default();
                plan.event(
                    now.as_ref(),
                    EventType::Normal,
                    reasons::VOLUME_RECYCLED,
                    "Volume recycled".to_string(),
                );
                changes::unbind_volume(&mut plan, &now);
                if let Err(error) = carry_out(executor, plan).await {
                    // Another write may have freed the volume on this very
                    // scrub's proof first (a sync of the volume): then the
                    // recycle is over all the same, and its pod must go.
                    if !freed_since(executor, &now).await? {
                        return Err(error);
                    }
                    tracing::info!(%error, "volume made Available by another write first");
                }
                // Only now: until the volume is Available, the plugin's
                // proof of the scrub must stay for a retry to find.
                if let Err(error) = plugin.finish_recycle(&volume, &context).await {
                    tracing::warn!(%error, "cleaning up after the recycle failed");
                }
                Ok(())
            }
            Err(error) => {
                tracing::warn!(%error, "recycling failed");
                fail(executor, &now, format!("Recycle failed: {error}")).await?;
                Err(Error::Plugin {
                    action: format!("recycling volume {:?}", volume_name.as_str()),
                    source: error,
                })
            }
        }
    }

    /// The running pods (`ns/name`, sorted) that mount the claim the volume
    /// was bound to. Ignored when a claim of that name exists again: the pods
    /// then use the new claim, not this volume.
    fn pods_using_old_claim(&self, volume: &PersistentVolume) -> Vec<String> {
        let Some(key) = claim_ref_key(volume) else {
            return vec![];
        };
        if self.binder.store.claim(&key).is_some() {
            return vec![];
        }
        let mut users: Vec<String> = self
            .binder
            .active_pods_using(&key)
            .iter()
            .map(|pod| {
                format!(
                    "{}/{}",
                    key.namespace,
                    pod.metadata.name.as_deref().unwrap_or("")
                )
            })
            .collect();
        users.sort();
        users
    }
}

/// The volume as the API server has it now, if it is still the release
/// `volume` was read in: the same incarnation, bound to the same claim.
async fn same_release(
    executor: &PvExecutor,
    volume: &PersistentVolume,
) -> Result<Option<Arc<PersistentVolume>>> {
    let now = read_volume(executor, &VolumeName::of(volume)).await?;
    Ok(now.filter(|now| {
        now.metadata.uid == volume.metadata.uid && claim_ref_uid(now) == claim_ref_uid(volume)
    }))
}

/// Whether the volume `released`, as the recycle last read it, is now
/// Available and bound to no claim of that release: freed by another write.
async fn freed_since(executor: &PvExecutor, released: &PersistentVolume) -> Result<bool> {
    let Some(now) = read_volume(executor, &VolumeName::of(released)).await? else {
        return Ok(false);
    };
    Ok(now.metadata.uid == released.metadata.uid
        && claim_ref_uid(&now) != claim_ref_uid(released)
        && volume_phase(&now) == Some(VolumePhase::Available))
}

/// Makes the volume Failed with a Warning saying why: the end of a recycle
/// that could not scrub it.
async fn fail(
    executor: &PvExecutor,
    volume: &Arc<PersistentVolume>,
    message: String,
) -> Result<()> {
    let mut plan = PvPlan::default();
    changes::set_volume_phase_with_event(
        &mut plan,
        volume,
        VolumePhase::Failed,
        EventType::Warning,
        reasons::VOLUME_FAILED_RECYCLE,
        message,
    );
    carry_out(executor, plan).await.map(drop)
}

/// How often a record on the volume refused with a 409 is decided again
/// on the server's copy before the recycle gives up.
const RECORD_ATTEMPTS: usize = 3;

/// A recycle's writes and events, each a plan of one step on the binder's
/// executor.
struct Writes {
    executor: PvExecutor,
    /// The volume recycled, as the operation read it.
    volume: Arc<PersistentVolume>,
}

impl Writes {
    async fn one(&self, plan: PvPlan) -> std::result::Result<(), WriteError> {
        self.executor.execute(plan).await.map(drop)
    }
}

impl RecycleWrites for Writes {
    fn create_pod<'a>(&'a self, pod: &'a Pod) -> BoxFuture<'a, Result<Arc<Pod>, WriteError>> {
        Box::pin(async move {
            let mut plan = PvPlan::default();
            let answer = plan.create(pod.clone());
            self.one(plan).await?;
            answer.answered().cloned().ok_or_else(|| WriteError::Stale {
                object: format!("Pod {}", ObjectKey::of(pod)),
                reason: "the create was not answered".to_string(),
            })
        })
    }

    fn delete_pod<'a>(
        &'a self,
        key: &'a ObjectKey,
        uid: Option<&'a str>,
    ) -> BoxFuture<'a, Result<(), WriteError>> {
        Box::pin(async move {
            let mut plan = PvPlan::default();
            plan.delete::<Pod>(key.clone(), uid.map(str::to_string));
            self.one(plan).await
        })
    }

    fn record_on_volume<'a>(
        &'a self,
        key: &'a str,
        value: &'a str,
    ) -> BoxFuture<'a, Result<(), WriteError>> {
        Box::pin(async move {
            let mut basis = Arc::clone(&self.volume);
            let mut attempt = 1;
            loop {
                let mut plan = PvPlan::default();
                plan.update(&basis, Part::Spec, format!("annotation {key}"), |volume| {
                    let annotations = volume
                        .metadata
                        .annotations
                        .get_or_insert_with(Default::default);
                    annotations
                        .insert(key.to_string(), value.to_string())
                        .as_deref()
                        != Some(value)
                });
                match self.one(plan).await {
                    Err(error) if error.is_conflict() && attempt < RECORD_ATTEMPTS => {
                        // Decided again on the server's copy, as long as it
                        // is still the release this recycle is for.
                        attempt += 1;
                        let writer = self.executor.writers().get::<PersistentVolume>()?;
                        let key = ObjectKey::of(basis.as_ref());
                        let Some(fresh) = writer.read(&key).await? else {
                            return Err(error);
                        };
                        if claim_ref_uid(&fresh) != claim_ref_uid(&self.volume) {
                            return Err(WriteError::Stale {
                                object: format!("PersistentVolume {key}"),
                                reason: "it was bound to another claim".to_string(),
                            });
                        }
                        basis = fresh;
                    }
                    other => return other,
                }
            }
        })
    }

    fn relay<'a>(&'a self, event_type: EventType, message: &'a str) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let mut plan = PvPlan::default();
            plan.event(
                self.volume.as_ref(),
                event_type,
                reasons::RECYCLER_POD,
                format!("Recycler pod: {message}"),
            );
            if let Err(error) = self.one(plan).await {
                tracing::debug!(%error, "relaying a recycler pod's event failed");
            }
        })
    }
}
