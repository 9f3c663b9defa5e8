//! What a worker does with one volume or claim key, and the periodic
//! resync; the runner's pools run them.
//!
//! The queue never hands one key to two workers, so two syncs of one object
//! never run at once; what two workers syncing different objects could
//! still race for is kept apart by the decisions' own guards: a volume is
//! reserved for one claim in the shadow cache while that claim is bound,
//! and every write takes its object's write lock and edits the newest copy.

use std::sync::Arc;

use super::in_order::InOrder;
use super::parking::Parking;
use super::waiting::FollowUp;
use crate::pv::cache::ShadowCache;
use crate::pv::controller::{Controller, SYNCED, WAITING, binding_order};
use crate::pv::error::Result;
use crate::pv::keys::VolumeName;
use crate::runtime::keys::ObjectKey;
use crate::runtime::queue::{Turn, WorkQueue};
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

/// What a claim worker works with.
pub(super) struct ClaimWork {
    pub(super) controller: Arc<Controller>,
    pub(super) follow_up: FollowUp,
    pub(super) in_order: InOrder,
}

impl ClaimWork {
    /// Syncs the newest cached version of the claim, keeps the set of
    /// claims waiting for a volume up to date, and does what the decision
    /// says should follow. Before the sync of a claim that searches for a
    /// volume, in the order claims left the queue, it notes the epoch of
    /// freed volumes and reserves the volume the sync will bind
    /// ([`InOrder`]), so that several workers reserve as one would; the
    /// reservation is held until the sync ends. Any other claim skips its
    /// turn.
    pub(super) async fn sync(self: Arc<Self>, key: ObjectKey, turn: Turn) -> Result<Outcome> {
        let cache = self.controller.cache();
        let (epoch, reservation) = if self.controller.searches_in_order(&key) {
            let _going = self.in_order.wait(turn).await;
            let epoch = self.follow_up.epoch();
            let reservation = cache
                .is_listed_claim(&key)
                .then(|| self.controller.reserve_in_order(&key))
                .flatten();
            (epoch, reservation)
        } else {
            self.in_order.skip(turn);
            (self.follow_up.epoch(), None)
        };
        let newest = cache
            .is_listed_claim(&key)
            .then(|| cache.claim(&key))
            .flatten();
        let result = match newest {
            Some(newest) => self.controller.sync_claim(&newest).await,
            None => Ok(crate::pv::controller::Next::nothing()),
        };
        drop(reservation);
        let outcome = match &result {
            Ok(next) if next.claim_waits => WAITING.to_string(),
            Ok(_) => SYNCED.to_string(),
            Err(error) => error.to_string(),
        };
        let waits = result.as_ref().map_or(true, |next| next.claim_waits);
        self.controller.notes().synced(&key, waits, outcome);
        let next = result?;
        self.follow_up.claim_synced(&key, next.claim_waits, epoch);
        self.follow_up.apply(next);
        Ok(Outcome::Synced)
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
