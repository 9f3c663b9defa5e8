//! The workers: each takes one key at a time off the controller's queue,
//! syncs it, and retries a failed key with backoff.

use std::sync::Arc;

use crate::resourceclaim::controller::ResourceClaimController;
use crate::resourceclaim::keys::WorkKey;
use crate::runtime::metrics::Metrics;
use crate::runtime::queue::WorkQueue;

/// Syncs keys until the queue shuts down.
pub(super) async fn worker(
    controller: Arc<ResourceClaimController>,
    queue: WorkQueue<WorkKey>,
    metrics: Arc<Metrics>,
) {
    while let Some(key) = queue.get().await {
        let started = tokio::time::Instant::now();
        let result = controller.sync(&key).await;
        let kind = match key {
            WorkKey::Pod(_) => "resourceclaim_pod",
            WorkKey::Claim(_) => "resourceclaim",
        };
        let label = match &result {
            Ok(()) => "ok",
            Err(error) => error.metric_label(),
        };
        metrics.sync_finished(kind, label, started.elapsed());
        match result {
            Ok(()) => queue.forget(&key),
            Err(error) if error.is_conflict() => {
                tracing::debug!(%key, %error, "conflict, will retry");
                queue.add_rate_limited(key.clone());
            }
            Err(error) => {
                tracing::warn!(%key, %error, "sync failed, will retry");
                queue.add_rate_limited(key.clone());
            }
        }
        queue.done(&key);
    }
}
