//! The wiring of the ephemeral volume controller: what it asks of the
//! process's informers (pods filed by the claims they use, and the one
//! claim store), its handlers, and its workload (one queue of pods and its
//! workers). Decisions live in [`super::controller`].
//!
//! A pod is queued only when it needs work (a claim missing, or a claim of
//! someone else in the way); a deleted claim, seen as such or gone during
//! a relist, queues the pods that use it; the start of leadership queues
//! every pod that needs work. Followers keep the stores warm but queue
//! nothing.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};

use super::controller::{Counted, Known};
use super::metrics::EphemeralMetrics;
use crate::kinds::pod::{PODS_BY_CLAIM, claims_of_pod};
use crate::kinds::{PERSISTENT_VOLUME_CLAIM, POD};
use crate::runtime::executor::{Effects, Executor, Parts};
use crate::runtime::informer::{Change, MemStore};
use crate::runtime::keys::ObjectKey;
use crate::runtime::queue::WorkQueue;
use crate::runtime::runner::Leading;
use crate::runtime::shared::{BuildError, Shared};
#[cfg(feature = "testing")]
use crate::runtime::workload::{Ended, turn};
use crate::runtime::workload::{Pool, Workload};
use crate::runtime::write::WriterSet;

/// The controller's name in `--controllers` and in the metrics, as
/// kube-controller-manager's.
pub(crate) const NAME: &str = k8s_names::EPHEMERAL_VOLUME_CONTROLLER;

/// The component of its events (upstream's `EventSource`).
pub(crate) const COMPONENT: &str = "ephemeral_volume";

/// The controller's own settings.
#[derive(Clone, Debug)]
pub struct Config {
    /// How many pods are synced at once
    /// (`--concurrent-ephemeralvolume-syncs`, at least one).
    pub workers: usize,
}

/// Default of [`Config::workers`], kube-controller-manager's.
pub(crate) const DEFAULT_WORKERS: usize = 5;

impl Default for Config {
    fn default() -> Self {
        Self {
            workers: DEFAULT_WORKERS,
        }
    }
}

/// The ephemeral volume controller as the process and its tests hold it:
/// what it decides by and the executor of its plans.
pub struct Controller {
    #[cfg(feature = "testing")]
    known: Known,
    #[cfg(feature = "testing")]
    executor: Executor<Counted>,
}

impl std::fmt::Debug for Controller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Controller").finish_non_exhaustive()
    }
}

impl Controller {
    /// Decides about the pod `key` and carries the plan out, as the pod's
    /// turn does.
    #[cfg(feature = "testing")]
    pub async fn sync_pod(&self, key: &ObjectKey) -> Ended {
        turn(&self.executor, |_| self.known.decide_pod(key)).await
    }
}

/// Counts the creates as upstream's two counters do, as the plans reach
/// them.
struct Counter(EphemeralMetrics);

impl Effects<Counted> for Counter {
    fn apply(&self, effect: &Counted) {
        self.0.create_attempted();
        match effect {
            Counted::Created(claim) => {
                tracing::info!(%claim, "created the claim of an ephemeral volume");
            }
            Counted::CreateFailed => self.0.create_failed(),
        }
    }
}

/// What the handlers act on.
#[derive(Clone)]
struct Handlers {
    known: Known,
    pods: Arc<MemStore<Pod>>,
    queue: WorkQueue<ObjectKey>,
    leading: Leading,
}

impl Handlers {
    /// Queues `pod` if the process leads and the pod needs work.
    fn enqueue(&self, pod: &Pod) {
        if self.leading.get() && self.known.needs_work(pod) {
            self.queue.add(ObjectKey::of(pod));
        }
    }

    /// Queues every pod that needs work.
    fn enqueue_all(&self) {
        for pod in self.pods.list() {
            self.enqueue(&pod);
        }
    }

    fn on_pod(&self, change: &Change<'_, Pod>) {
        if let Change::Applied { object, .. } = change {
            self.enqueue(object);
        }
    }

    fn on_claim(&self, change: &Change<'_, PersistentVolumeClaim>) {
        if let Change::Deleted { key, .. } = change {
            for pod in self.pods.indexed(PODS_BY_CLAIM, key) {
                self.enqueue(&pod);
            }
        }
    }
}

/// Builds the controller on the process's parts and returns its workload.
pub(crate) fn build(
    shared: &mut Shared,
    config: &Config,
) -> Result<(Arc<Controller>, Workload), BuildError> {
    let pods = shared.informers.index(&POD, PODS_BY_CLAIM, claims_of_pod)?;
    let claims = shared.informers.store(&PERSISTENT_VOLUME_CLAIM)?;
    let known = Known {
        pods: Arc::clone(&pods),
        claims: claims.clone(),
    };
    let executor = Executor::new(Parts {
        controller: NAME,
        writers: WriterSet::default().with(shared.writes.writer(NAME, claims)),
        recorder: shared.recorder.for_component(COMPONENT),
        effects: Arc::new(Counter(EphemeralMetrics::new(&shared.metrics)?)),
        reserver: None,
        operations: None,
        shadow: shared.shadow.clone(),
    });
    let handlers = Handlers {
        known: known.clone(),
        pods,
        queue: WorkQueue::new(),
        leading: shared.leading.clone(),
    };
    let (on_pods, on_claims, on_lead) = (handlers.clone(), handlers.clone(), handlers.clone());
    shared
        .informers
        .on(&POD, move |change| on_pods.on_pod(change))?;
    shared
        .informers
        .on(&PERSISTENT_VOLUME_CLAIM, move |change| {
            on_claims.on_claim(change);
        })?;
    let mut workload = Workload::new(NAME);
    workload.on_lead(move || on_lead.enqueue_all());
    let deciding = known.clone();
    workload.pool(Pool::new(
        handlers.queue,
        config.workers,
        |_| "pod",
        move |key: &ObjectKey, _| deciding.decide_pod(key),
        executor.clone(),
    ));
    let controller = Arc::new(Controller {
        #[cfg(feature = "testing")]
        known,
        #[cfg(feature = "testing")]
        executor,
    });
    Ok((controller, workload))
}

#[cfg(test)]
mod tests;
