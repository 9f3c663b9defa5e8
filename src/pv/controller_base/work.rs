//! What the wiring does with volume and claim keys: the handlers that
//! queue them, what the binder's plans ask of the process besides writes
//! (its effects, its reservations), and the periodic resync.
//!
//! - The handlers: the process's informers have already put each change
//!   into the store (the one store of volumes and claims); the handlers
//!   queue what must be synced: the object that changed, the claim of a
//!   deleted volume (so it becomes Lost promptly), the volume of a deleted
//!   claim (so it becomes Released promptly), and after a relist every
//!   object. Keys are queued only while the process leads: a follower
//!   keeps its store warm and collects no work.
//! - The effects: what the binder remembers of a claim, the claims a
//!   volume's decision queues, the bindings found complete, the default
//!   class counted; and the reservation of a volume for the claim a plan
//!   binds to it, which the executor takes before the plan's first write.
//! - The periodic resync.

use std::any::Any;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};

use super::parking::Parking;
use crate::pv::controller::{Complete, PvEffect, binding_order};
use crate::pv::keys::VolumeName;
use crate::pv::memory::{ClaimMemory, SYNCED, WAITING};
use crate::pv::metrics::PvMetrics;
use crate::pv::objects::claim_ref_key;
use crate::pv::store::PvStore;
use crate::runtime::executor::{Effects, Reserver};
use crate::runtime::informer::Change;
use crate::runtime::keys::ObjectKey;
use crate::runtime::plan::Reservation;
use crate::runtime::queue::WorkQueue;
use crate::runtime::runner::Leading;
use crate::runtime::waiting::Waiting;
use crate::runtime::workload::Ended;

/// What the handlers act on.
#[derive(Clone)]
pub(super) struct Handlers {
    pub(super) store: Arc<PvStore>,
    pub(super) volume_queue: WorkQueue<VolumeName>,
    pub(super) claim_queue: WorkQueue<ObjectKey>,
    pub(super) leading: Leading,
    pub(super) waiting: Waiting<ObjectKey>,
    pub(super) memory: Arc<ClaimMemory>,
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
                    for name in self.store.volume_names() {
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
                self.waiting.forget(key);
                self.memory.forget(key);
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
                    for key in self.store.claim_keys() {
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

/// Applies the binder's effects, as its plans reach them.
pub(super) struct Applier {
    pub(super) store: Arc<PvStore>,
    pub(super) memory: Arc<ClaimMemory>,
    pub(super) claim_queue: WorkQueue<ObjectKey>,
    pub(super) metrics: PvMetrics,
}

impl Effects<PvEffect> for Applier {
    fn apply(&self, effect: &PvEffect) {
        match effect {
            PvEffect::Told {
                claim,
                reason,
                message,
            } => self.memory.told(claim, reason, message),
            PvEffect::MadeFrom { claim, made_from } => {
                self.memory.set_made_from(claim, made_from.clone());
            }
            PvEffect::SyncClaim(claim) => self.claim_queue.add(claim.clone()),
            PvEffect::Complete(Complete::Claim { claim, volume }) => {
                self.store.complete_claim(claim, volume);
            }
            PvEffect::Complete(Complete::Volume { volume, claim }) => {
                self.store.complete_volume(volume, claim);
            }
            PvEffect::Complete(Complete::FreeVolume(volume)) => {
                self.store.complete_free_volume(volume);
            }
            PvEffect::DefaultClass { failed } => self.metrics.retroactive_storage_class(*failed),
        }
    }
}

/// Reserves volumes in the store for the claims the binder's plans bind.
pub(super) struct Reservations(pub(super) Arc<PvStore>);

impl Reserver for Reservations {
    fn reserve(&self, reservation: &Reservation) -> Result<Box<dyn Any + Send>, String> {
        match self.0.reserve(&reservation.reserved, &reservation.for_key) {
            Some(reserved) => Ok(Box::new(reserved)),
            None => Err(format!(
                "volume {} is reserved for another claim",
                reservation.reserved
            )),
        }
    }
}

/// The end of a claim's turn: the claim's memory keeps how it ended (what
/// `explain` shows as its last sync), and the parked volumes whose claims
/// ahead have all had their turn are queued again.
pub(super) fn claim_turn_ended(
    memory: &ClaimMemory,
    parking: &Parking,
    key: &ObjectKey,
    ended: &Ended,
) {
    let (waits, outcome) = match ended {
        Ended::Passed => return,
        Ended::Done => (false, SYNCED.to_string()),
        Ended::Waits => (true, WAITING.to_string()),
        Ended::Failed(failure) => (true, failure.reason.clone()),
    };
    memory.synced(key, waits, outcome);
    parking.release_passed();
}

/// Enqueues every claim, in binding order, then every volume, in name
/// order (the first time at once, so a replica that starts leading syncs
/// everything), behind any change that comes in meanwhile. The store holds
/// exactly the listed objects (deletions are removed as they are seen), in
/// a stable order, so runs are repeatable. Passed by: a claim or volume
/// whose binding a sync found complete, with neither object changed since,
/// whose sync would find nothing to do ([`PvStore::to_resync`]); a key
/// still waiting in its queue, which keeps its place anyway; and a parked
/// new volume, queued again when the claims ahead of it had their turn
/// ([`Parking`]).
pub(super) fn resync(
    store: &PvStore,
    volume_queue: &WorkQueue<VolumeName>,
    claim_queue: &WorkQueue<ObjectKey>,
    parking: &Parking,
) {
    let (claims, volumes) = store.to_resync(
        |key| !claim_queue.is_waiting(key),
        |name| !volume_queue.is_waiting(name) && !parking.is_parked(name.as_str()),
    );
    tracing::debug!(
        claims = claims.len(),
        volumes = volumes.len(),
        "resync queues the claims and volumes not found complete"
    );
    for key in binding_order(store.claims_of(claims)) {
        claim_queue.add_resync(key);
    }
    for name in volumes {
        volume_queue.add_resync(name);
    }
}
