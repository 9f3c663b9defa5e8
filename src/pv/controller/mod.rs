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
//! [`crate::pv::store::PvStore::reserve_best_match`]) until the plan
//! ends, and claims are decided one at a time, so no two plans pick one
//! volume; step 1's re-check of the claimRef on the newest copy stays the
//! guard against everyone else.
//!
//! # Why a store of the controller's own
//!
//! The four writes come back as watch events in any order and late. If the
//! controller decided from the watch stream alone, it would offer a volume it
//! has just reserved to the next claim, or plan a status write on a copy
//! older than the spec it has just written (and meet a 409). So every
//! write's answer goes into the store at once, and the store keeps the
//! newest version of each object by resourceVersion; decisions read only
//! from it ([`crate::pv::store`]).
//!
//! # How decisions are written
//!
//! A decision is a function of what the controller knows ([`Binder`]: the
//! store of volumes and claims, the other kinds' stores, the operations
//! running, what it remembers of each claim) that returns a plan
//! ([`crate::runtime::plan`]): the writes (edits of named fields, made on
//! the copy it read, see [`changes`]), events, operations to start and
//! effects of its own ([`PvEffect`]) it decided on, in order, the volume it
//! reserves while the plan runs, and what follows. It sends nothing,
//! awaits nothing and changes nothing; the executor carries the plan out,
//! every write conditional on the copy it was decided on. Each decision
//! first classifies the object into a situation enum (see [`claim`] and
//! [`volume`]), then plans for it with an exhaustive `match`, so that every
//! case is accounted for, including those where nothing is done.
//!
//! # Long operations
//!
//! Provisioning, deleting and recycling touch storage and can take minutes.
//! A decision never waits for them: its plan starts them, by name, on the
//! operation tracker: a name made of the object's name and UID
//! (`provision-<ns>/<claim>[<uid>]`, `delete-<pv>[<uid>]`,
//! `recycle-<pv>[<uid>]`). The tracker refuses a second start of a running
//! name and holds back a failed one for its backoff, so the syncs that keep
//! asking (every resync, every event) never run one object's operation
//! twice at once. The operations themselves ([`crate::pv::operations`])
//! re-read their object from the API server before acting, because the
//! decision that started them may have been made from a view that is
//! already stale, and carry their own writes and events out as plans this
//! module makes. What is created has a deterministic name (the volume
//! `pvc-<claim uid>`, the pod `recycler-for-<pv>`), so a second run, in
//! this process or after a restart, finds the first run's result instead of
//! making another.

mod binds_elsewhere;
pub(crate) mod changes;
mod claim;
mod explain;
mod finalizers;
mod foresight;
mod provision;
mod reclaim;
#[cfg(feature = "testing")]
mod rehearse;
mod volume;

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;

use crate::pv::error::Error;
use crate::pv::memory::{ClaimMemory, MadeFrom};
use crate::pv::plugins::VolumePlugins;
use crate::pv::store::PvStore;
use crate::runtime::informer::{MemStore, StoreRef};
use crate::runtime::keys::ObjectKey;
use crate::runtime::operations::Running;
use crate::runtime::plan::Plan;
pub(crate) use claim::binding_order;
pub(crate) use explain::{Explanation, explain_listed};
pub(crate) use foresight::{FirstSign, Foreseen};
pub(crate) use provision::{Provisioner, hand_to_provisioner, provisioned_volume_name};
#[cfg(feature = "testing")]
pub use rehearse::{Rehearsed, Server};

/// The plan of one decision of the controller.
pub(crate) type PvPlan = Plan<PvEffect>;

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

/// What the binder's decisions read, and nothing else: the store of
/// volumes and claims, the stores of the kinds it consults, which long
/// operations run, what it remembers of each unbound claim, and its
/// settings. Cheap to clone: every part is shared.
#[derive(Clone)]
pub struct Binder {
    /// The newest volumes and claims.
    pub(crate) store: Arc<PvStore>,
    /// StorageClasses, for binding mode, provisioner and default class.
    pub(crate) classes: Arc<MemStore<StorageClass>>,
    /// Pods, filed by the claims they use, to tell which claims wait for
    /// scheduling and which volumes are still in use.
    pub(crate) pods: Arc<MemStore<Pod>>,
    /// Nodes, for provisioning on a selected node.
    pub(crate) nodes: StoreRef<Node>,
    /// Which long operations run.
    pub(crate) running: Running,
    /// What the binder remembers of each unbound claim.
    pub(crate) memory: Arc<ClaimMemory>,
    /// What it decides by.
    pub(crate) settings: Settings,
}

/// An effect of a plan of the binder's own, applied by the wiring when the
/// executor reaches it (`controller_base`).
#[derive(Debug)]
pub(crate) enum PvEffect {
    /// A binding event was told the claim: the same is not told again.
    Told {
        /// The claim.
        claim: ObjectKey,
        /// The event's reason.
        reason: String,
        /// Its message.
        message: String,
    },
    /// What the claim's last binding event was made from: while it stays
    /// so, the event is not even made again.
    MadeFrom {
        /// The claim.
        claim: ObjectKey,
        /// What the event was made from.
        made_from: MadeFrom,
    },
    /// This claim is to be synced soon (a volume is bound to it on the
    /// volume's side only).
    SyncClaim(ObjectKey),
    /// A binding found complete: until either object changes, the resync
    /// passes it by.
    Complete(Complete),
    /// The claim was given the default StorageClass (counted in the
    /// retroactive-class series, with whether the write failed).
    DefaultClass {
        /// Whether the write failed.
        failed: bool,
    },
}

/// A binding a decision found complete, with nothing to write.
#[derive(Debug)]
pub(crate) enum Complete {
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

/// A decision's plan, or the plan of a decision that failed with `error`.
pub(crate) fn plan_or_failure(decided: Result<PvPlan, Error>) -> PvPlan {
    decided.unwrap_or_else(|error| PvPlan::failed(error.failure()))
}

#[cfg(test)]
mod tests;
