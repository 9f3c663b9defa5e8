//! What a worker does with one volume or claim key, and the periodic
//! resync; the runner's pools run them.
//!
//! The queue never hands one key out twice before it is done, so two
//! decisions (or plans) of one object never run at once. Claims are decided
//! one at a time, in queue order, and their plans run beside each other;
//! what two plans for different objects could still race for is kept apart
//! by the decisions' own guards: a volume is reserved for one claim in the
//! shadow cache while that claim's plan runs, and every write takes its
//! object's write lock and edits the newest copy.

use std::sync::Arc;

use futures::future::BoxFuture;

use super::parking::Parking;
use super::waiting::FollowUp;
use crate::pv::cache::ShadowCache;
use crate::pv::controller::{Controller, PvPlan, SYNCED, WAITING, binding_order};
use crate::pv::error::Result;
use crate::pv::keys::VolumeName;
use crate::runtime::keys::ObjectKey;
use crate::runtime::queue::WorkQueue;
use crate::runtime::workload::Outcome;

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
        let next = self.controller.sync_volume(&newest).await?;
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
                Ok(plan) => this.controller.execute(plan).await,
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
