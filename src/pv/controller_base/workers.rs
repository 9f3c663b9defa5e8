//! The workers: one per queue, each taking a key at a time and syncing the
//! newest cached version of its object; and the periodic resync.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use kube::runtime::reflector::{ObjectRef, Store};
use tokio_util::sync::CancellationToken;

use super::BaseError;
use super::informers::offer_logged;
use super::waiting::FollowUp;
use crate::pv::cache::ShadowCache;
use crate::pv::controller::{Controller, Next};
use crate::pv::keys::{ClaimKey, VolumeName};
use crate::runtime::queue::WorkQueue;

/// Takes volume keys off the queue one at a time, syncs the newest cached
/// version of each and does what the decision says should follow; a key
/// gone from the lister was a deletion, which the event handlers already
/// took care of. Returns when the queue shuts down.
pub(super) async fn volume_worker(
    controller: Arc<Controller>,
    store: Store<PersistentVolume>,
    queue: WorkQueue<VolumeName>,
    follow_up: FollowUp,
) -> Result<(), BaseError> {
    while let Some(key) = queue.get().await {
        let started = tokio::time::Instant::now();
        let result = match store.get(&ObjectRef::new(&key.0)) {
            Some(listed) => {
                offer_logged(controller.cache().offer_volume(listed));
                match controller.cache().volume(&key.0) {
                    Some(newest) => controller.sync_volume(&newest).await,
                    None => Ok(Next::nothing()),
                }
            }
            None => Ok(Next::nothing()),
        }
        .map(|next| follow_up.apply(next));
        controller
            .metrics()
            .sync_finished("volume", result_label(&result), started.elapsed());
        finish(&queue, &key, result, "volume");
    }
    Ok(())
}

/// Takes claim keys off the queue one at a time, like [`volume_worker`],
/// and keeps the set of claims waiting for a volume up to date.
pub(super) async fn claim_worker(
    controller: Arc<Controller>,
    store: Store<PersistentVolumeClaim>,
    queue: WorkQueue<ClaimKey>,
    follow_up: FollowUp,
) -> Result<(), BaseError> {
    while let Some(key) = queue.get().await {
        let started = tokio::time::Instant::now();
        let epoch = follow_up.epoch();
        let result = match store.get(&ObjectRef::new(&key.name).within(&key.namespace)) {
            Some(listed) => {
                offer_logged(controller.cache().offer_claim(listed));
                match controller.cache().claim(&key) {
                    Some(newest) => controller.sync_claim(&newest).await,
                    None => Ok(Next::nothing()),
                }
            }
            None => Ok(Next::nothing()),
        }
        .map(|next| {
            follow_up.claim_synced(&key, next.claim_waits, epoch);
            follow_up.apply(next);
        });
        controller
            .metrics()
            .sync_finished("claim", result_label(&result), started.elapsed());
        finish(&queue, &key, result, "claim");
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
        Err(error) => {
            tracing::warn!(%key, kind, %error, "sync failed, will retry");
            queue.add_rate_limited(key.clone());
        }
    }
    queue.done(key);
}

/// Enqueues every claim, then every volume, in name order, each period (the
/// first at once, so a replica that starts leading syncs everything) until
/// `stop`. The shadow cache holds exactly the listed objects (deletions are
/// removed as they are seen), in a stable order, so runs are repeatable.
pub(super) async fn resync(
    cache: Arc<ShadowCache>,
    volume_queue: WorkQueue<VolumeName>,
    claim_queue: WorkQueue<ClaimKey>,
    period: Duration,
    stop: CancellationToken,
) -> Result<(), BaseError> {
    let mut ticker = tokio::time::interval(period);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = stop.cancelled() => return Ok(()),
            _ = ticker.tick() => {
                for key in cache.claim_keys() {
                    claim_queue.add(key);
                }
                for name in cache.volume_names() {
                    volume_queue.add(name);
                }
            }
        }
    }
}
