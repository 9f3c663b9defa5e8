//! The decisions of the PersistentVolume controller: what to do with one
//! volume or one claim, given the newest state the controller knows.
//!
//! # What the controller guarantees
//!
//! A claim (PVC) asks for storage; a volume (PV) is storage. Binding links
//! them both ways: the volume's `spec.claimRef` names the claim (with its
//! UID), and the claim's `spec.volumeName` names the volume. The controller
//! keeps these invariants, under faults and restarts:
//!
//! - a volume's claimRef names at most one claim, and a Bound claim's volume
//!   points back at it by name and UID;
//! - a pending claim for which a fitting Available volume exists gets bound,
//!   and is never left Pending because of the controller's own stale view;
//! - bad input (an unparsable quantity, an unknown access mode, a claimRef to
//!   a missing namespace) gets a Warning event and a log line, and the
//!   controller goes on serving every other object.
//!
//! # States
//!
//! A volume is `Pending` when created, `Available` while no claim holds it,
//! `Bound` while its claim exists, `Released` once its claim is gone (and the
//! reclaim policy runs), and `Failed` when reclaiming went wrong. A claim is
//! `Pending` until bound, `Bound`, and `Lost` when its volume vanished or was
//! given to someone else; a Lost claim is bound again if its volume returns.
//!
//! The annotation `pv.kubernetes.io/bind-completed` on a claim separates the
//! two halves of claim handling: without it the claim is unbound (maybe
//! half-bound after a crash) and the controller finds or finishes a binding;
//! with it the claim was bound once and the controller only checks that the
//! binding still holds. `pv.kubernetes.io/bound-by-controller` marks a
//! binding the controller made itself (and may undo), as opposed to one a
//! user pre-set by writing `claimRef` or `volumeName`.
//!
//! # The order of the four binding writes, and why
//!
//! Binding takes four writes, each of which can fail or be overtaken:
//! 1. the volume's spec gets the claimRef (this is the reservation: once it
//!    is stored, no other claim can take the volume, because a volume whose
//!    claimRef names another claim never matches);
//! 2. the claim's spec gets `volumeName` and the annotations;
//! 3. the volume's status becomes Bound;
//! 4. the claim's status becomes Bound, with the volume's capacity and modes.
//!
//! The volume goes first because it is the shared resource; a crash after
//! any step leaves a state that the next sync recognises and completes
//! ("complete bind after crash"), and a crash before step 1 leaves nothing.
//! The two objects take turns so that no object is written twice in a row:
//! the API server checks an update against its watch cache, which under
//! load is often a version behind an object written one round trip
//! earlier; the server then reads the object from etcd and runs the whole
//! update a second time. Upstream writes the volume's spec and status, then
//! the claim's.
//!
//! Four writes, not five: a new volume (Pending, no claimRef) is offered to
//! claims at once, without waiting for its own Pending -> Available write,
//! and a volume bound before that write never gets it (step 3 makes it
//! Bound). Within the process, the volume a claim is about to bind is
//! reserved in the volume index under the index's lock (see
//! [`crate::pv::cache::ShadowCache::reserve_best_match`]) until the plan
//! ends, and claims are decided one at a time, so no two plans pick one
//! volume; step 1's re-check of the claimRef on the newest copy stays the
//! guard against everyone else.
//!
//! # Why a second cache
//!
//! The four writes come back as watch events in any order and late. If the
//! controller decided from the watch stream alone, it would offer a volume it
//! has just reserved to the next claim, or write a status onto a spec it has
//! already replaced (and get a conflict). So every successful write's answer
//! goes into the shadow cache at once, and the cache keeps the newest version
//! of each object by resourceVersion; decisions read only from it.
//!
//! # How decisions are written
//!
//! A decision reads what the controller knows and returns a plan
//! ([`crate::runtime::plan`]): the writes (changes of named fields, see
//! [`changes`]), events and operations it decided on, in order, and what
//! should follow ([`Next`]). It sends nothing and awaits nothing; the
//! executor carries the plan out. Each decision first classifies the
//! object into a situation enum (see [`claim`] and [`volume`]), then plans
//! for it with an exhaustive `match`, so that every case is accounted for,
//! including those where nothing is done.
//!
//! # Long operations
//!
//! Provisioning, deleting and recycling touch storage and can take minutes.
//! A sync never waits for them: its plan starts them on the operation tracker under
//! a name made of the object's name and UID (`provision-<ns>/<claim>[<uid>]`,
//! `delete-<pv>[<uid>]`, `recycle-<pv>[<uid>]`). The tracker refuses a second
//! start of a running name and holds back a failed one for its backoff, so
//! the syncs that keep asking (every resync, every event) never run one
//! object's operation twice at once. Each operation re-reads its object from
//! the API server before acting, because the sync that started it may have
//! decided from a view that is already stale. What is created has a
//! deterministic name (the volume `pvc-<claim uid>`, the pod
//! `recycler-for-<pv>`), so a second run, in this process or after a
//! restart, finds the first run's result instead of making another.

mod changes;
mod claim;
mod delete;
mod explain;
pub(crate) use explain::explain_listed;
pub(crate) use explain::{ClaimMemory, SYNCED, WAITING};
mod finalizers;
mod provision;
mod provision_in_tree;
mod reclaim;
mod recycle;
#[cfg(feature = "testing")]
mod rehearse;
#[cfg(feature = "testing")]
pub use rehearse::{Rehearsed, Server};
mod binds_elsewhere;
mod foresight;
pub(crate) use foresight::{FirstSign, Foreseen};
mod volume;
mod writes;

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::Client;

use crate::pv::cache::ShadowCache;
use crate::pv::error::Result;
use crate::pv::keys::VolumeName;
use crate::pv::metrics::PvMetrics;
use crate::pv::plugins::VolumePlugins;
use crate::runtime::events::EventRecorder;
use crate::runtime::executor::Executor;
use crate::runtime::informer::{MemStore, StoreRef};
use crate::runtime::journal::Journal;
use crate::runtime::keys::ObjectKey;
use crate::runtime::operations::OperationTracker;
use crate::runtime::write::{WriteError, Writer, WriterSet};
pub(crate) use changes::PvPlan;
pub(crate) use volume::Decided;

pub(crate) use claim::binding_order;

/// Settings that change what the controller decides (as opposed to how it is
/// wired).
#[derive(Clone, Debug)]
pub struct Settings {
    /// Whether claims with a storage class get handed to a provisioner
    /// (`--enable-dynamic-provisioning`).
    pub enable_dynamic_provisioning: bool,
    /// The volume plugins that provision, delete and recycle in process.
    pub plugins: VolumePlugins,
    /// How often, and how far apart, a provisioned volume's object is
    /// created (and, when that fails, its storage deleted again).
    pub provision_retry: RetryPolicy,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            enable_dynamic_provisioning: true,
            plugins: VolumePlugins::default(),
            provision_retry: RetryPolicy::default(),
        }
    }
}

/// A fixed number of attempts a fixed interval apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in all (at least one is made).
    pub attempts: u32,
    /// Pause after a failed attempt before the next.
    pub interval: Duration,
}

impl Default for RetryPolicy {
    /// Upstream's 5 attempts, 10 s apart.
    fn default() -> Self {
        Self {
            attempts: 5,
            interval: Duration::from_secs(10),
        }
    }
}

/// The stores of the objects the controller consults but does not own.
#[derive(Clone)]
pub(crate) struct Listers {
    /// StorageClasses, for binding mode, provisioner and default class.
    pub(crate) classes: Arc<MemStore<StorageClass>>,
    /// Pods, filed by the claims they use, to tell which claims wait for
    /// scheduling and which volumes are still in use.
    pub(crate) pods: Arc<MemStore<Pod>>,
    /// Nodes, for provisioning on a selected node.
    pub(crate) nodes: StoreRef<Node>,
}

/// The controller's writers, one per kind it writes, through the process's
/// write door.
#[derive(Clone)]
pub(crate) struct Writers {
    /// Volumes (bind, phases, provisioned volumes, deletes).
    pub(crate) volumes: Writer<PersistentVolume>,
    /// Claims (bind, phases, annotations, the default class).
    pub(crate) claims: Writer<PersistentVolumeClaim>,
    /// Recycler pods.
    pub(crate) pods: Writer<Pod>,
}

/// What should happen after a decision's plan went through, besides its
/// steps: the decisions say it, the wiring (`controller_base`) does it. A
/// volume that becomes free for every claim needs no word here: the shadow
/// cache reports it to the wiring itself, whoever made it free.
#[derive(Debug, Default, PartialEq)]
pub struct Next {
    /// Claims to sync soon: a volume is bound to them on its side only.
    pub sync_claims: Vec<ObjectKey>,
    /// The claim synced found no volume: it waits for one to become free
    /// (and is tried again at once when one does).
    pub claim_waits: bool,
    /// The plan gives the claim the default StorageClass (counted in the
    /// retroactive-class metric, with the write's outcome).
    pub(crate) assigns_default_class: bool,
    /// A binding found settled (see [`Settle`]).
    pub(crate) settle: Option<Settle>,
    /// The two objects disagree in a way the controller must not paper
    /// over: once its steps (the events saying so) went through, the sync
    /// fails with this ([`crate::pv::error::Error::Inconsistent`]) and is
    /// retried with backoff.
    pub(crate) inconsistent: Option<String>,
}

/// A binding a decision found settled: until the claim or the volume
/// changes, the resync may pass it by
/// ([`crate::pv::cache::ShadowCache::unsettled`]).
#[derive(Debug, PartialEq)]
pub(crate) enum Settle {
    /// A bound claim whose volume points back at it.
    Claim {
        /// The claim, as decided on.
        claim: Arc<PersistentVolumeClaim>,
        /// Its volume.
        volume: Arc<PersistentVolume>,
    },
    /// A bound volume whose claim names it.
    Volume {
        /// The volume, as decided on.
        volume: Arc<PersistentVolume>,
        /// Its claim.
        claim: Arc<PersistentVolumeClaim>,
    },
    /// A free volume already Available.
    FreeVolume(Arc<PersistentVolume>),
}

impl Next {
    /// Nothing more to do.
    #[cfg(feature = "testing")]
    pub fn nothing() -> Self {
        Self::default()
    }
}

/// What a controller is made of. The wiring builds the parts (a test may
/// build them from a shadow cache and stores alone) and hands them in.
pub(crate) struct Parts {
    /// For the controller's reads.
    pub(crate) client: Client,
    /// The newest volumes and claims the controller knows.
    pub(crate) cache: Arc<ShadowCache>,
    /// StorageClasses, pods and nodes.
    pub(crate) listers: Listers,
    /// Where writes go.
    pub(crate) writers: Writers,
    /// Where events go.
    pub(crate) recorder: EventRecorder,
    /// Runs the long operations, one per object at a time.
    pub(crate) operations: OperationTracker,
    /// What the controller decides.
    pub(crate) settings: Settings,
    /// The controller's own series.
    pub(crate) pv_metrics: PvMetrics,
    /// Where the executor hands plans instead of carrying them out, when
    /// the process must not act on the cluster.
    pub(crate) journal: Option<Arc<dyn Journal>>,
}

impl Writers {
    /// The writers as the executor finds them, by kind.
    fn set(&self) -> WriterSet {
        WriterSet::default()
            .with(self.volumes.clone())
            .with(self.claims.clone())
            .with(self.pods.clone())
    }
}

/// The decision half of the PersistentVolume controller: everything a sync
/// needs (the client for reads, the shadow cache, the other kinds' stores,
/// the writers, the event recorder and the operation tracker). Cloning is
/// cheap and shares all of it; an operation runs on a clone.
#[derive(Clone)]
pub struct Controller {
    client: Client,
    cache: Arc<ShadowCache>,
    listers: Listers,
    writers: Writers,
    recorder: EventRecorder,
    settings: Settings,
    operations: OperationTracker,
    pv_metrics: PvMetrics,
    executor: Executor,
    memory: Arc<ClaimMemory>,
}

impl std::fmt::Debug for Controller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Controller")
            .field("recorder", &self.recorder)
            .finish_non_exhaustive()
    }
}

impl Controller {
    /// A controller made of `parts`.
    pub(crate) fn new(parts: Parts) -> Self {
        let executor = Executor::new(
            k8s_names::PERSISTENTVOLUME_BINDER_CONTROLLER,
            parts.writers.set(),
            parts.recorder.clone(),
            parts.operations.clone(),
            parts.journal,
        );
        Self {
            executor,
            client: parts.client,
            cache: parts.cache,
            listers: parts.listers,
            writers: parts.writers,
            recorder: parts.recorder,
            settings: parts.settings,
            operations: parts.operations,
            pv_metrics: parts.pv_metrics,
            memory: Arc::default(),
        }
    }

    /// What the binder remembers of each unbound claim.
    pub(crate) fn claim_memory(&self) -> &ClaimMemory {
        &self.memory
    }

    /// The tracker of running provision, delete and recycle operations.
    pub fn operations(&self) -> &OperationTracker {
        &self.operations
    }

    /// The event recorder, to flush the events of a sync (tests, shutdown).
    #[cfg(feature = "testing")]
    pub fn recorder(&self) -> &EventRecorder {
        &self.recorder
    }

    /// The shadow cache the controller decides from.
    pub fn cache(&self) -> &Arc<ShadowCache> {
        &self.cache
    }

    /// Decides about one volume: keep its phase in line with its claim,
    /// release it when the claim is gone, run its reclaim policy. Sends
    /// nothing; may ask for the volume's claim to be read from the API
    /// server first (`read` is the answer, once read).
    #[tracing::instrument(skip_all, fields(volume = %VolumeName::of(volume)))]
    pub(crate) fn decide_volume(
        &self,
        volume: &Arc<PersistentVolume>,
        read: Option<Option<Arc<PersistentVolumeClaim>>>,
    ) -> Result<Decided> {
        self.decide_volume_inner(volume, read)
    }

    /// The executor of the controller's plans.
    pub(crate) fn executor(&self) -> &Executor {
        &self.executor
    }

    /// What the end of a decision's plan (`result`) means to the binder:
    /// counts the default class it assigned the claim (`assigns_default_class`)
    /// with the write's outcome, keeps the binding it found settled, and
    /// fails on an inconsistency it reported; says what should follow.
    pub(crate) fn ended(
        &self,
        assigns_default_class: bool,
        result: std::result::Result<Next, WriteError>,
    ) -> Result<Next> {
        if assigns_default_class {
            self.pv_metrics.retroactive_storage_class(result.is_err());
        }
        let next = result?;
        if let Some(problem) = next.inconsistent {
            return Err(crate::pv::error::Error::Inconsistent(problem));
        }
        match &next.settle {
            Some(Settle::Claim { claim, volume }) => self.cache.settle_claim(claim, volume),
            Some(Settle::Volume { volume, claim }) => self.cache.settle_volume(volume, claim),
            Some(Settle::FreeVolume(volume)) => self.cache.settle_free_volume(volume),
            None => {}
        }
        Ok(next)
    }
}

/// A controller on an in-memory API server, with empty stores and an empty
/// shadow cache, for unit tests of the decisions and writes.
#[cfg(test)]
pub(crate) mod testing {
    use std::sync::Arc;

    use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
    use memapi::MemApi;

    use super::{Controller, Listers, Parts, Settings, Writers};
    use crate::kinds::{NODE, PERSISTENT_VOLUME, PERSISTENT_VOLUME_CLAIM, POD};
    use crate::pv::cache::ShadowCache;
    use crate::pv::constants::CONTROLLER_NAME;
    use crate::pv::metrics::PvMetrics;
    use crate::runtime::events::EventRecorder;
    use crate::runtime::informer::{MemStore, Store, StoreRef};
    use crate::runtime::kinds::Shape;
    use crate::runtime::metrics::Metrics;
    use crate::runtime::operations::OperationTracker;
    use crate::runtime::write::Door;

    /// The controller; the caller fills its shadow cache.
    pub(crate) fn controller(api: &MemApi) -> Controller {
        controller_with(api.client(), Settings::default())
    }

    /// A store handle of the kind `shape` describes, fixed to `store`.
    fn fixed<K>(shape: &'static Shape<K>, store: Arc<dyn Store<K>>) -> StoreRef<K> {
        let handle = StoreRef::new(shape);
        handle.fix(store);
        handle
    }

    /// The controller on `client` with `settings`; the caller fills its
    /// shadow cache.
    pub(crate) fn controller_with(client: kube::Client, settings: Settings) -> Controller {
        let metrics = Arc::new(Metrics::new().expect("metrics"));
        let cache = Arc::new(ShadowCache::default());
        let door = Door::new(client.clone(), Arc::clone(&metrics));
        let pods = Arc::new(MemStore::<Pod>::default());
        Controller::new(Parts {
            client: client.clone(),
            listers: Listers {
                classes: Arc::default(),
                pods: Arc::clone(&pods),
                nodes: fixed(&NODE, Arc::new(MemStore::default())),
            },
            writers: Writers {
                volumes: door.writer(
                    "test",
                    fixed(
                        &PERSISTENT_VOLUME,
                        Arc::clone(&cache) as Arc<dyn Store<PersistentVolume>>,
                    ),
                ),
                claims: door.writer(
                    "test",
                    fixed(
                        &PERSISTENT_VOLUME_CLAIM,
                        Arc::clone(&cache) as Arc<dyn Store<PersistentVolumeClaim>>,
                    ),
                ),
                pods: door.writer("test", fixed(&POD, pods)),
            },
            cache,
            recorder: EventRecorder::new(client, Arc::clone(&metrics), CONTROLLER_NAME, "test")
                .expect("recorder"),
            operations: OperationTracker::new(),
            settings,
            pv_metrics: PvMetrics::new(&metrics).expect("pv metrics"),
            journal: None,
        })
    }
}

#[cfg(test)]
mod tests;
