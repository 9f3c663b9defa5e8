//! What the wiring does with volume and claim keys, from the change that
//! queues one to the plan carried out for it.
//!
//! - The handlers: the process's informers have already put each change
//!   into the shadow cache (the one store of volumes and claims); the
//!   handlers queue what must be synced: the object that changed, the
//!   claim of a deleted volume (so it becomes Lost promptly), the volume of
//!   a deleted claim (so it becomes Released promptly), and after a relist
//!   every object. Keys are queued only while the process leads: a
//!   follower keeps its cache warm and collects no work.
//! - The work: claims are decided one at a time, in queue order, by the
//!   claim lane, and their plans carried out beside each other on the
//!   executor; volumes are decided and carried out by their workers. The
//!   queue never hands one key out twice before it is done, so two
//!   decisions (or plans) of one object never run at once; what two plans
//!   for different objects could still race for is kept apart by the
//!   decisions' own guards: a volume is reserved for one claim in the
//!   shadow cache while that claim's plan runs, and every write takes its
//!   object's write lock and edits the newest copy.
//! - The periodic resync.

use std::sync::Arc;

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};

use super::parking::Parking;
use super::waiting::FollowUp;
use crate::pv::cache::ShadowCache;
use crate::pv::controller::{Controller, Decided, Next, PvPlan, SYNCED, WAITING, binding_order};
use crate::pv::error::{Error, Result};
use crate::pv::keys::VolumeName;
use crate::pv::objects::claim_ref_key;
use crate::runtime::informer::Change;
use crate::runtime::keys::ObjectKey;
use crate::runtime::queue::WorkQueue;
use crate::runtime::runner::Leading;
use crate::runtime::workload::Outcome;

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

/// What a volume worker works with.
pub(super) struct VolumeWork {
    pub(super) controller: Arc<Controller>,
    pub(super) follow_up: FollowUp,
    pub(super) parking: Parking,
}

impl VolumeWork {
    /// Syncs the newest cached version of the volume and does what the
    /// decision says should follow; a key no watch shows (any more) was a
    /// deletion, which the handlers already took care of. A new volume may
    /// first wait for the claims queued before it ([`Parking`]).
    pub(super) async fn sync(self: Arc<Self>, name: VolumeName) -> Result<Outcome> {
        let Some(newest) = self.controller.cache().listed_volume(&name) else {
            self.parking.forget(&name);
            return Ok(Outcome::Synced);
        };
        if self.parking.hold(&name, &newest) {
            // Queued again once the claims ahead had their turn.
            return Ok(Outcome::Passed);
        }
        let next = sync_volume(&self.controller, &newest).await?;
        self.follow_up.apply(next);
        Ok(Outcome::Synced)
    }
}

/// What the claim lane works with.
pub(super) struct ClaimWork {
    pub(super) controller: Arc<Controller>,
    pub(super) follow_up: FollowUp,
}

impl ClaimWork {
    /// Decides about the newest cached version of the claim, at once (the
    /// lane decides one claim at a time, in the order claims left the
    /// queue, so a volume one decision reserves is not offered to the
    /// next), and returns the plan's execution, which keeps the set of
    /// claims waiting for a volume up to date and does what the decision
    /// says should follow. The epoch of freed volumes is noted before the
    /// decision, so a volume freed while the plan runs is not missed.
    pub(super) fn decide(self: &Arc<Self>, key: ObjectKey) -> BoxFuture<'static, Result<Outcome>> {
        let cache = self.controller.cache();
        let epoch = self.follow_up.epoch();
        let newest = cache
            .is_listed_claim(&key)
            .then(|| cache.claim(&key))
            .flatten();
        let decided = match newest {
            Some(newest) => self.controller.decide_claim(&newest),
            None => Ok(PvPlan::default()),
        };
        let this = Arc::clone(self);
        Box::pin(async move {
            let result = match decided {
                Ok(plan) => execute(&this.controller, plan).await,
                Err(error) => Err(error),
            };
            let outcome = match &result {
                Ok(next) if next.claim_waits => WAITING.to_string(),
                Ok(_) => SYNCED.to_string(),
                Err(error) => error.to_string(),
            };
            let waits = result.as_ref().map_or(true, |next| next.claim_waits);
            this.controller.claim_memory().synced(&key, waits, outcome);
            let next = result?;
            this.follow_up.claim_synced(&key, next.claim_waits, epoch);
            this.follow_up.apply(next);
            Ok(Outcome::Synced)
        })
    }
}

/// Syncs one volume: decides (reading its claim from the API server when
/// the decision asks) and carries the plan out; says what should follow.
pub async fn sync_volume(controller: &Controller, volume: &Arc<PersistentVolume>) -> Result<Next> {
    let plan = match controller.decide_volume(volume, None)? {
        Decided::Plan(plan) => plan,
        Decided::ReadClaim(key) => {
            let read = controller.read_claim(&key).await?;
            match controller.decide_volume(volume, Some(read))? {
                Decided::Plan(plan) => plan,
                Decided::ReadClaim(key) => {
                    return Err(Error::Inconsistent(format!(
                        "volume {} asked twice for claim {key}",
                        VolumeName::of(volume)
                    )));
                }
            }
        }
    };
    execute(controller, plan).await
}

/// Syncs one claim: decides and carries the plan out; says what should
/// follow.
#[cfg(feature = "testing")]
pub async fn sync_claim(
    controller: &Controller,
    claim: &Arc<PersistentVolumeClaim>,
) -> Result<Next> {
    let plan = controller.decide_claim(claim)?;
    execute(controller, plan).await
}

/// Executes a decision's plan on the controller's executor, then hands
/// its end to the controller ([`Controller::ended`]).
async fn execute(controller: &Controller, plan: PvPlan) -> Result<Next> {
    let assigns_default_class = plan.after.assigns_default_class;
    let result = controller.executor().execute(plan).await;
    controller.ended(assigns_default_class, result)
}

/// Enqueues every claim, in binding order, then every volume, in name
/// order (the first time at once, so a replica that starts leading syncs
/// everything), behind any change that comes in meanwhile. The shadow cache
/// holds exactly the listed objects (deletions are removed as they are
/// seen), in a stable order, so runs are repeatable. Passed by: a claim or
/// volume that a sync found settled in its binding, with neither object
/// changed since, whose sync would find nothing to do
/// ([`ShadowCache::unsettled`]); a key still waiting in its queue, which
/// keeps its place anyway; and a parked new volume, queued again when the
/// claims ahead of it had their turn ([`Parking`]).
pub(super) fn resync(
    cache: &ShadowCache,
    volume_queue: &WorkQueue<VolumeName>,
    claim_queue: &WorkQueue<ObjectKey>,
    parking: &Parking,
) {
    let (claims, volumes) = cache.unsettled(
        |key| !claim_queue.is_waiting(key),
        |name| !volume_queue.is_waiting(name) && !parking.is_parked(name.as_str()),
    );
    tracing::debug!(
        claims = claims.len(),
        volumes = volumes.len(),
        "resync queues the unsettled claims and volumes"
    );
    for key in binding_order(cache.claims_of(claims)) {
        claim_queue.add_resync(key);
    }
    for name in volumes {
        volume_queue.add_resync(name);
    }
}
