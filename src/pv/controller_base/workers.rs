//! The workers: several per queue, each taking a key at a time and syncing
//! the newest cached version of its object; and the periodic resync.
//!
//! The queue never hands one key to two workers, so two syncs of one object
//! never run at once; what two workers syncing different objects could
//! still race for is kept apart by the decisions' own guards: a volume is
//! reserved for one claim in the shadow cache while that claim is bound,
//! and every write takes its object's write lock and edits the newest copy.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::BaseError;
use super::parking::Parking;
use super::waiting::FollowUp;
use crate::pv::cache::ShadowCache;
use crate::pv::controller::{Controller, Next, binding_order};
use crate::pv::keys::{ClaimKey, VolumeName};
use crate::runtime::queue::WorkQueue;

/// What a volume worker works with.
#[derive(Clone)]
pub(super) struct VolumeWork {
    pub(super) controller: Arc<Controller>,
    pub(super) queue: WorkQueue<VolumeName>,
    pub(super) follow_up: FollowUp,
    pub(super) parking: Parking,
}

/// Takes volume keys off the queue one at a time, syncs the newest cached
/// version of each and does what the decision says should follow; a key
/// no watch shows (any more) was a deletion, which the event handlers
/// already took care of. A new volume may first wait for the claims queued before
/// it ([`Parking`]). Returns when the queue shuts down.
pub(super) async fn volume_worker(work: VolumeWork) -> Result<(), BaseError> {
    let VolumeWork {
        controller,
        queue,
        follow_up,
        parking,
    } = work;
    while let Some(key) = queue.get().await {
        let started = tokio::time::Instant::now();
        let newest = controller.cache().listed_volume(&key.0);
        let result = match newest {
            Some(newest) if parking.hold(&key, &newest) => {
                queue.forget(&key);
                queue.done(&key);
                continue;
            }
            Some(newest) => controller.sync_volume(&newest).await,
            None => {
                parking.forget(&key);
                Ok(Next::nothing())
            }
        }
        .map(|next| follow_up.apply(next));
        controller
            .metrics()
            .sync_finished("volume", result_label(&result), started.elapsed());
        finish(&queue, &key, result, "volume");
    }
    Ok(())
}

/// What a claim worker works with.
#[derive(Clone)]
pub(super) struct ClaimWork {
    pub(super) controller: Arc<Controller>,
    pub(super) queue: WorkQueue<ClaimKey>,
    pub(super) follow_up: FollowUp,
    pub(super) parking: Parking,
}

/// Takes claim keys off the queue one at a time, like [`volume_worker`],
/// keeps the set of claims waiting for a volume up to date, and lets parked
/// new volumes go once the claims ahead of them had their turn.
pub(super) async fn claim_worker(work: ClaimWork) -> Result<(), BaseError> {
    let ClaimWork {
        controller,
        queue,
        follow_up,
        parking,
    } = work;
    // As a key leaves the queue (no other worker takes one meanwhile): note
    // the epoch of freed volumes and reserve what the claim's sync will
    // bind, so that several workers reserve in queue order as one would.
    let take = |key: &ClaimKey| {
        let epoch = follow_up.epoch();
        let exists = controller.cache().is_listed_claim(key);
        let reservation = exists.then(|| controller.reserve_in_order(key)).flatten();
        (epoch, exists, reservation)
    };
    while let Some((key, (epoch, exists, reservation))) = queue.get_with(take).await {
        let started = tokio::time::Instant::now();
        let newest = exists.then(|| controller.cache().claim(&key)).flatten();
        let result = match newest {
            Some(newest) => controller.sync_claim(&newest).await,
            None => Ok(Next::nothing()),
        }
        .map(|next| {
            follow_up.claim_synced(&key, next.claim_waits, epoch);
            follow_up.apply(next);
        });
        drop(reservation);
        controller
            .metrics()
            .sync_finished("claim", result_label(&result), started.elapsed());
        finish(&queue, &key, result, "claim");
        parking.release_passed();
    }
    Ok(())
}

/// The `result` label of a sync: `ok` or the error's metric label.
fn result_label(result: &crate::pv::error::Result<()>) -> &'static str {
    match result {
        Ok(()) => "ok",
        Err(error) => error.metric_label(),
    }
}

/// Ends one key's turn: success forgets its failures, an error retries it
/// with backoff.
fn finish<K>(queue: &WorkQueue<K>, key: &K, result: crate::pv::error::Result<()>, kind: &str)
where
    K: Clone + Eq + std::hash::Hash + std::fmt::Display + Send + Sync + 'static,
{
    match result {
        Ok(()) => queue.forget(key),
        Err(error) if error.is_conflict() => {
            tracing::debug!(%key, kind, %error, "conflict, will retry");
            queue.add_rate_limited(key.clone());
        }
        Err(error) if error.is_waiting() => {
            tracing::debug!(%key, kind, %error, "will retry");
            queue.add_rate_limited(key.clone());
        }
        Err(error) => {
            tracing::warn!(%key, kind, %error, "sync failed, will retry");
            queue.add_rate_limited(key.clone());
        }
    }
    queue.done(key);
}

/// Enqueues every claim, in binding order, then every volume, in name order,
/// each period (the first at once, so a replica that starts leading syncs
/// everything) until `stop`, behind any change that comes in meanwhile. The
/// shadow cache holds exactly the listed objects (deletions are removed as
/// they are seen), in a stable order, so runs are repeatable. Passed by: a
/// claim or volume that a sync found settled in its binding, with neither
/// object changed since, whose sync would find nothing to do
/// ([`ShadowCache::unsettled`]); a key still waiting in its queue, which
/// keeps its place anyway; and a parked new volume, queued again when the
/// claims ahead of it had their turn ([`Parking`]).
pub(super) async fn resync(
    cache: Arc<ShadowCache>,
    volume_queue: WorkQueue<VolumeName>,
    claim_queue: WorkQueue<ClaimKey>,
    parking: Parking,
    period: Duration,
    stop: CancellationToken,
) -> Result<(), BaseError> {
    let mut ticker = tokio::time::interval(period);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = stop.cancelled() => return Ok(()),
            _ = ticker.tick() => {
                let (claims, volumes) = cache.unsettled();
                let claims = claim_queue.not_waiting(claims);
                let volumes = volume_queue.not_waiting(parking.not_parked(volumes));
                for key in binding_order(cache.claims_of(claims)) {
                    claim_queue.add_resync(key);
                }
                for name in volumes {
                    volume_queue.add_resync(name);
                }
            }
        }
    }
}
