//! The event handlers: pod and claim events keep the claim cache and the
//! index of pods by claim up to date, and queue only the pods and claims
//! that have work (upstream's `enqueuePod` and `enqueueResourceClaim`).
//! An object missing from a relist vanished without a delete event and is
//! handled as deleted.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::ResourceClaim;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher::Event;

use crate::resourceclaim::claims::ClaimCache;
use crate::resourceclaim::controller::triage::{claims_to_release, named_claims, pod_needs_work};
use crate::resourceclaim::deleted::DeletedPods;
use crate::resourceclaim::keys::{ObjectKey, WorkKey};
use crate::resourceclaim::objects::{pod_claims, uid};
use crate::runtime::queue::WorkQueue;

/// The pods with resource claims, by key (their last seen version), and
/// which of them name each claim (upstream's pod-resource-claim index).
#[derive(Debug, Default)]
pub(super) struct PodIndex {
    pods: HashMap<ObjectKey, Arc<Pod>>,
    by_claim: HashMap<ObjectKey, BTreeSet<ObjectKey>>,
}

impl PodIndex {
    fn set(&mut self, pod: &Arc<Pod>) {
        let key = ObjectKey::of(pod.as_ref());
        self.remove(&key);
        for claim in named_claims(pod) {
            self.by_claim.entry(claim).or_default().insert(key.clone());
        }
        self.pods.insert(key, Arc::clone(pod));
    }

    fn remove(&mut self, key: &ObjectKey) -> Option<Arc<Pod>> {
        let old = self.pods.remove(key)?;
        for claim in named_claims(&old) {
            if let Some(pods) = self.by_claim.get_mut(&claim) {
                pods.remove(key);
                if pods.is_empty() {
                    self.by_claim.remove(&claim);
                }
            }
        }
        Some(old)
    }

    fn users(&self, claim: &ObjectKey) -> Vec<Arc<Pod>> {
        self.by_claim
            .get(claim)
            .into_iter()
            .flatten()
            .filter_map(|pod| self.pods.get(pod).cloned())
            .collect()
    }
}

/// What the handlers act on. Keys are queued only while the process
/// leads; a follower keeps its caches warm and queues nothing.
#[derive(Clone)]
pub(super) struct Handlers {
    pub(super) pods: Store<Pod>,
    pub(super) claim_store: Store<ResourceClaim>,
    pub(super) claims: Arc<ClaimCache>,
    pub(super) deleted: Arc<DeletedPods>,
    pub(super) queue: WorkQueue<WorkKey>,
    pub(super) leading: Arc<AtomicBool>,
    pub(super) index: Arc<Mutex<PodIndex>>,
}

impl Handlers {
    fn leading(&self) -> bool {
        self.leading.load(Ordering::Acquire)
    }

    fn index(&self) -> MutexGuard<'_, PodIndex> {
        self.index
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A pod event.
    pub(super) fn on_pod_event(&self, event: &Event<Pod>) {
        match event {
            Event::Apply(pod) => self.pod_changed(&ObjectKey::of(pod)),
            Event::Delete(pod) => self.pod_deleted(&ObjectKey::of(pod), Some(pod)),
            Event::Init | Event::InitApply(_) => {}
            Event::InitDone => {
                for pod in self.pods.state() {
                    self.pod_changed(&ObjectKey::of(pod.as_ref()));
                }
                let known: Vec<ObjectKey> = self.index().pods.keys().cloned().collect();
                for key in known {
                    if self.pods.get(&pod_ref(&key)).is_none() {
                        self.pod_deleted(&key, None);
                    }
                }
            }
        }
    }

    fn pod_changed(&self, key: &ObjectKey) {
        let Some(pod) = self.pods.get(&pod_ref(key)) else {
            return;
        };
        if pod_claims(&pod).is_empty() {
            self.index().remove(key);
            return;
        }
        self.index().set(&pod);
        self.enqueue_pod(&pod, false);
    }

    /// A pod deleted (seen as such, or missing from a relist): its UID is
    /// remembered so its reservations are dropped without a lookup, and its
    /// claims are queued.
    fn pod_deleted(&self, key: &ObjectKey, seen: Option<&Pod>) {
        let last = self.index().remove(key);
        let pod = match (seen, last.as_deref()) {
            (Some(pod), _) | (None, Some(pod)) => pod,
            (None, None) => return,
        };
        if pod_claims(pod).is_empty() {
            return;
        }
        tracing::debug!(pod = %key, "pod with resource claims deleted");
        self.deleted.add(uid(&pod.metadata));
        self.enqueue_pod(pod, true);
    }

    /// Queues the claims a pod that will not run releases, and the pod when
    /// it needs a sync.
    pub(super) fn enqueue_pod(&self, pod: &Pod, deleted: bool) {
        if !self.leading() || pod_claims(pod).is_empty() {
            return;
        }
        for claim in claims_to_release(pod, deleted) {
            self.queue.add(WorkKey::Claim(claim));
        }
        if !deleted && pod_needs_work(pod, &self.claims) {
            self.queue.add(WorkKey::Pod(ObjectKey::of(pod)));
        }
    }

    /// A claim event.
    pub(super) fn on_claim_event(&self, event: &Event<ResourceClaim>) {
        match event {
            Event::Apply(claim) => {
                let key = ObjectKey::of(claim);
                if let Some(shared) = self.claim_store.get(&claim_ref(&key)) {
                    self.claims.offer(shared);
                }
                self.claim_changed(&key, false);
            }
            Event::Delete(claim) => {
                let key = ObjectKey::of(claim);
                self.claims.remove(&key, claim.metadata.uid.as_deref());
                self.claim_changed(&key, true);
            }
            Event::Init | Event::InitApply(_) => {}
            Event::InitDone => self.claims_relisted(),
        }
    }

    /// After a relist: every listed claim is offered, and a cached claim
    /// not listed vanished while the watch was down, even one this
    /// controller created (deleted during the gap: its pod gets a new one).
    fn claims_relisted(&self) {
        let listed = self.claim_store.state();
        self.claims.relisted(&listed);
        for claim in &listed {
            self.claims.offer(Arc::clone(claim));
            self.claim_changed(&ObjectKey::of(claim.as_ref()), false);
        }
        for key in self.claims.keys() {
            if self.claim_store.get(&claim_ref(&key)).is_none() {
                self.claim_changed(&key, true);
            }
        }
    }

    /// A claim changed or was deleted: a deleted one is forgotten, a live
    /// one queued (its reservations may name pods gone meanwhile), and the
    /// pods that name it are checked for work.
    fn claim_changed(&self, key: &ObjectKey, deleted: bool) {
        if deleted {
            self.claims.remove(key, None);
        } else if self.leading() {
            self.queue.add(WorkKey::Claim(key.clone()));
        }
        let users = self.index().users(key);
        for pod in users {
            self.enqueue_pod(&pod, false);
        }
    }

    /// Queues every pod and claim with work: what a replica does when it
    /// starts leading.
    pub(super) fn enqueue_all(&self) {
        for pod in self.pods.state() {
            self.enqueue_pod(&pod, false);
        }
        for key in self.claims.keys() {
            self.queue.add(WorkKey::Claim(key));
        }
    }
}

fn pod_ref(key: &ObjectKey) -> ObjectRef<Pod> {
    ObjectRef::new(&key.name).within(&key.namespace)
}

fn claim_ref(key: &ObjectKey) -> ObjectRef<ResourceClaim> {
    ObjectRef::new(&key.name).within(&key.namespace)
}
