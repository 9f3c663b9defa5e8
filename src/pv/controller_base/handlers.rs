//! The controller's handlers of volume and claim changes. The process's
//! informers have already put each change into the shadow cache (the one
//! store of volumes and claims); the handlers queue what must be synced:
//! the object that changed, the claim of a deleted volume (so it becomes
//! Lost promptly), the volume of a deleted claim (so it becomes Released
//! promptly), and after a relist every object. Keys are queued only while
//! the process leads: a follower keeps its cache warm and collects no work.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};

use super::waiting::FollowUp;
use crate::pv::cache::ShadowCache;
use crate::pv::controller::Controller;
use crate::pv::keys::VolumeName;
use crate::pv::objects::claim_ref_key;
use crate::runtime::informer::Change;
use crate::runtime::keys::ObjectKey;
use crate::runtime::queue::WorkQueue;
use crate::runtime::runner::Leading;

/// What the handlers act on.
#[derive(Clone)]
pub(super) struct Handlers {
    pub(super) cache: Arc<ShadowCache>,
    pub(super) volume_queue: WorkQueue<VolumeName>,
    pub(super) claim_queue: WorkQueue<ObjectKey>,
    pub(super) leading: Leading,
    pub(super) follow_up: FollowUp,
    pub(super) controller: Arc<Controller>,
}

impl Handlers {
    /// A volume changed, was deleted, or a relist ended.
    pub(super) fn on_volume(&self, change: &Change<'_, PersistentVolume>) {
        match change {
            Change::Applied { listing: true, .. } => {}
            Change::Applied {
                object,
                listing: false,
            } => {
                if self.leading.get() {
                    self.volume_queue.add(VolumeName::of(object));
                }
            }
            Change::Deleted { key, last } => {
                tracing::info!(volume = %key, "volume deleted");
                let claim = last.and_then(|volume| claim_ref_key(volume));
                if let Some(claim) = claim
                    && self.leading.get()
                {
                    self.claim_queue.add(claim);
                }
            }
            Change::Listed => {
                if self.leading.get() {
                    for name in self.cache.volume_names() {
                        self.volume_queue.add(name);
                    }
                }
            }
        }
    }

    /// A claim changed, was deleted, or a relist ended.
    pub(super) fn on_claim(&self, change: &Change<'_, PersistentVolumeClaim>) {
        match change {
            Change::Applied { listing: true, .. } => {}
            Change::Applied {
                object,
                listing: false,
            } => {
                if self.leading.get() {
                    self.claim_queue.add(ObjectKey::of(object.as_ref()));
                }
            }
            Change::Deleted { key, last } => {
                self.follow_up.forget(key);
                self.controller.claim_memory().forget(key);
                tracing::info!(claim = %key, "claim deleted");
                let volume = last.and_then(|claim| volume_of_deleted_claim(claim));
                if let Some(volume) = volume
                    && self.leading.get()
                {
                    self.volume_queue.add(volume);
                }
            }
            Change::Listed => {
                if self.leading.get() {
                    for key in self.cache.claim_keys() {
                        self.claim_queue.add(key);
                    }
                }
            }
        }
    }
}

/// The volume a deleted claim was bound to.
fn volume_of_deleted_claim(claim: &PersistentVolumeClaim) -> Option<VolumeName> {
    let name = claim.spec.as_ref()?.volume_name.as_deref()?;
    (!name.is_empty()).then(|| VolumeName::new(name))
}
