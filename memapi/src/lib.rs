//! memapi: an in-memory Kubernetes API server, the test bed the controller
//! is proven on.
//!
//! It is a crate of its own in the pv-controller workspace, so that the
//! rule "the test bed knows nothing of the controller, and the controller
//! nothing of how it is tested" is held by the compiler: memapi does not
//! depend on `pv-controller`, which takes it as a dev-dependency for its
//! tests and benchmark and, behind its default-on `embedded` feature, for
//! `--embedded-cluster` (the container image is built without it). The
//! only crate the two share is `quantity`.
//!
//! It is one level below client-go's fake clientset: a real `kube::Client`
//! talks to it (as a `tower::Service`, see [`MemApi::client`]), so the very
//! watchers, reflectors and typed `Api<K>` calls of production run against
//! it. It can also listen on a loopback TCP port ([`MemApi::serve`]) for
//! kubectl and the embedded mode, and be seeded from YAML
//! ([`MemApi::load_yaml`]).
//!
//! Semantics follow a Kubernetes 1.20 apiserver wherever a controller can
//! tell: one global resourceVersion, optimistic concurrency, the status
//! subresource, finalizers and deletionTimestamp, watches that resume from
//! a version and get an in-stream 410 when it is compacted, and:
//!
//! - the UID as a write names it: an update whose body names another UID
//!   than the stored object's fails its precondition (409, before the
//!   resourceVersion is looked at), a patch that would change it changes
//!   an immutable field (422, once a resourceVersion it names held), a
//!   delete whose preconditions name another UID or resourceVersion is
//!   refused (409), each in kube-apiserver 1.20.2's words (see `ops.rs`
//!   and `delete.rs`);
//!
//! - validation of events (core/v1 and events.k8s.io/v1, on create and
//!   update: an event about a cluster-scoped object must live in "default",
//!   or in "kube-system" when it has an eventTime; reporter, action, reason
//!   and note are required or limited) and of PV and PVC updates (a claim's
//!   spec is immutable but for `volumeName` set once and the storage request
//!   of a bound claim growing; a volume's source is immutable, its claimRef
//!   is not), refused with a 422 Invalid Status like the real one (see
//!   `validation/`);
//! - the update strategies: a main-resource write keeps the stored status,
//!   a `/status` write keeps the stored spec but takes metadata changes
//!   (see `ops.rs`);
//! - graceful deletion of pods scheduled to a node: a DELETE sets
//!   deletionTimestamp and deletionGracePeriodSeconds and the pod stays
//!   until a DELETE with `gracePeriodSeconds: 0` (what a kubelet sends) or
//!   [`MemApi::remove`]; finalizers hold every kind, pods included (see
//!   `delete.rs`);
//! - validation of resource.k8s.io/v1 ResourceSlices on create and update
//!   (node selection, device limits, names, immutable driver, pool and
//!   node; see `validation/slices.rs`; device taints without `timeAdded`
//!   get the time of the write), with field selectors on
//!   `spec.driver`, `spec.nodeName` (an empty value matches slices
//!   without one, as on the real server) and `spec.pool.name`; a server
//!   with feature gates off can be imitated with [`MemApi::drop_fields`];
//! - admission (see `admission.rs`): PersistentVolumeClaimResize (a claim
//!   grows only when Bound and its storage class allows expansion, else
//!   403), when [`MemApiConfig::protection_finalizers`] is set, the
//!   StorageObjectInUseProtection finalizers on new PVs and PVCs, and, when
//!   [`MemApiConfig::owner_references_permission_enforcement`] is set,
//!   OwnerReferencesPermissionEnforcement;
//! - RBAC (see `rbac.rs`): a request that names a user (a bearer token of
//!   [`MemApi::add_token`], or impersonation headers, which
//!   [`MemApi::service_as`] adds) is authorized by the roles and bindings
//!   of [`MemApi::load_rbac`]; one that names nobody may do anything.
//!
//! memapi has no schema: it keeps every field a write sends, also those
//! the client's compiled types do not know, so it stands in for an API
//! server newer than its client (a write that sends an object back whole
//! erases such fields; one that patches what it changed keeps them;
//! [`MemApi::get_value`] reads them).
//!
//! Validation and admission apply to requests through the API; the test
//! levers ([`MemApi::create`], [`MemApi::put`], [`MemApi::load_yaml`],
//! [`MemApi::remove`]) store and remove objects as the test wrote them.
//!
//! An API group version can be withheld and served again at run time
//! ([`MemApi::withhold`]), as across a control-plane upgrade.
//!
//! Reactors ([`Reactor`]) inject faults and latency, before a request is
//! served or, for writes, after the change is stored (the answer is lost);
//! [`MemApi::cut_watches`] breaks open watch streams, [`MemApi::end_watches`]
//! ends them cleanly and [`MemApi::compact`] expires old versions (watches
//! resumed from them, and the continue tokens of lists paged from them:
//! a continued page is served from the snapshot of the first); [`RequestStats`] counts every request by verb,
//! resource and code, and an [`Observer`] records every change of a kind
//! for a test, beyond the reach of all those faults.
//!
//! Simplifications: no validation of whole objects beyond the rules above
//! and names; no other admission plugin; RBAC roles are not served as
//! objects, and any caller may impersonate; only server-side apply
//! records field managers (updates and other patches do not, so they never
//! conflict with an apply), and keyed lists are merged by key only where
//! `apply.rs` knows the key; core/v1 and events.k8s.io/v1 events are stored apart; a strategic merge
//! patch behaves as a merge patch; `deletecollection` deletes the
//! matching objects one by one under one lock (no partial progress is
//! visible to other requests); no kubelet ends a pod's grace period;
//! namespaces need not exist.

mod admission;
mod apply;
mod body;
mod clock;
mod delete;
mod digest;
mod discovery;
mod error;
mod handler;
mod managed;
mod object;
mod observe;
mod ops;
mod patch;
mod rbac;
mod reactors;
mod resources;
mod reviews;
mod rng;
mod route;
mod seed;
mod selectors;
mod service;
mod stats;
mod status;
mod store;
mod table;
mod tcp;
mod validation;
mod watch;

pub use body::{ResponseBody, StreamCut};
pub use clock::{SimulatedClock, simulate_clock};
pub use digest::Digest;
pub use error::MemApiError;
pub use handler::{ConnectionDropped, MAX_BODY_BYTES};
pub use observe::{Observed, Observer};
pub use reactors::{Action, Reactor, ReactorId, Times, Verb};
pub use resources::{KINDS, ResourceKind};
pub use service::MemApiService;
pub use stats::{Preconditions, RequestLogEntry, RequestStats};
pub use status::{ApiError, Cause, Details};
pub use store::{ChangeType, DEFAULT_HISTORY};

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::sync::{Arc, Mutex, MutexGuard};
use store::Store;

/// Locks a mutex, carrying on after a panic elsewhere poisoned it: the
/// guarded data stays consistent because every write is a single step.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The state behind every handle, service and listener of one server.
#[derive(Debug)]
pub(crate) struct Shared {
    store: Arc<Mutex<Store>>,
    reactors: Mutex<reactors::Reactors>,
    stats: Mutex<RequestStats>,
    access: Mutex<reviews::Access>,
    /// The named group versions (`group/version`) not served now.
    withheld: Mutex<std::collections::BTreeSet<String>>,
    /// The writes being served, against [`MemApiConfig::max_mutating_in_flight`].
    mutating_in_flight: std::sync::atomic::AtomicUsize,
    /// [`MemApiConfig::max_mutating_in_flight`].
    max_mutating_in_flight: Option<usize>,
}

/// How to build a [`MemApi`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemApiConfig {
    /// Seed for names, UIDs and reactor probabilities (reproducible runs).
    pub seed: u64,
    /// How many changes are kept for watches that resume from the past.
    pub history_limit: usize,
    /// Whether PVs and PVCs created through the API get the
    /// `kubernetes.io/pv-protection` / `kubernetes.io/pvc-protection`
    /// finalizer, as the StorageObjectInUseProtection admission plugin of a
    /// real cluster adds them (nothing removes them here: no
    /// controller-manager runs). Off by default, so that tests that delete
    /// volumes and claims see them go. Seeded objects are stored as written
    /// either way.
    pub protection_finalizers: bool,
    /// Whether the OwnerReferencesPermissionEnforcement admission plugin
    /// runs, as on a server started with
    /// `--enable-admission-plugins=OwnerReferencesPermissionEnforcement`:
    /// a named user's request that sets `blockOwnerDeletion: true` on an
    /// ownerReference needs `update` on the owner's `finalizers`, one that
    /// changes an existing object's ownerReferences needs `delete` on it
    /// (see `admission.rs`). Off by default, as on a default server.
    pub owner_references_permission_enforcement: bool,
    /// The most writes (create, update, patch, delete) served at once, as
    /// kube-apiserver's `--max-mutating-requests-inflight` with API
    /// Priority and Fairness off: a write past it is answered 429 Too Many
    /// Requests with `Retry-After: 1` and not served. A write counts while
    /// it is served, its reactors' delays included. `None` (the default):
    /// no limit.
    pub max_mutating_in_flight: Option<usize>,
}

impl Default for MemApiConfig {
    fn default() -> Self {
        Self {
            seed: 0x5eed_1234_abcd_0001,
            history_limit: DEFAULT_HISTORY,
            protection_finalizers: false,
            owner_references_permission_enforcement: false,
            max_mutating_in_flight: None,
        }
    }
}

/// An in-memory Kubernetes API server. Cheap to clone: clones share state.
#[derive(Debug, Clone)]
pub struct MemApi {
    shared: Arc<Shared>,
}

impl Default for MemApi {
    fn default() -> Self {
        Self::new()
    }
}

/// The kinds-table row of a typed resource, or a 404 error.
fn kind_of<K: kube::Resource<DynamicType = ()>>() -> Result<&'static ResourceKind, ApiError> {
    let api_version = K::api_version(&());
    let kind = K::kind(&());
    resources::by_type(&api_version, &kind).ok_or_else(|| {
        ApiError::from_code(
            404,
            format!("memapi does not serve {kind} of {api_version}"),
        )
    })
}

fn to_value<K: Serialize>(obj: &K) -> Result<Value, MemApiError> {
    serde_json::to_value(obj).map_err(|source| MemApiError::Json {
        what: std::any::type_name::<K>().to_string(),
        source,
    })
}

fn from_value<K: DeserializeOwned>(v: &Value) -> Result<K, MemApiError> {
    K::deserialize(v).map_err(|source| MemApiError::Json {
        what: std::any::type_name::<K>().to_string(),
        source,
    })
}

impl MemApi {
    /// An empty server with the default seed and history size.
    pub fn new() -> Self {
        Self::with_config(MemApiConfig::default())
    }

    /// An empty server with the given configuration.
    pub fn with_config(config: MemApiConfig) -> Self {
        let mut store = Store::new(config.seed, config.history_limit);
        store.protection_finalizers = config.protection_finalizers;
        store.owner_references_permission_enforcement =
            config.owner_references_permission_enforcement;
        Self {
            shared: Arc::new(Shared {
                store: Arc::new(Mutex::new(store)),
                reactors: Mutex::new(reactors::Reactors::new(config.seed ^ 0xa5a5_a5a5)),
                stats: Mutex::new(RequestStats::default()),
                access: Mutex::new(reviews::Access::default()),
                withheld: Mutex::new(std::collections::BTreeSet::new()),
                mutating_in_flight: std::sync::atomic::AtomicUsize::new(0),
                max_mutating_in_flight: config.max_mutating_in_flight,
            }),
        }
    }

    /// The tower service a `kube::Client` can be built on.
    pub fn service(&self) -> MemApiService {
        MemApiService::new(self.shared.clone())
    }

    /// The tower service of requests made as `user` in `groups`: each
    /// request carries impersonation headers, as a kubeconfig's `as:`
    /// sends them, and is authorized by the roles of [`MemApi::load_rbac`].
    pub fn service_as(&self, user: &str, groups: &[&str]) -> MemApiService {
        MemApiService::new(self.shared.clone()).impersonating(user, groups)
    }

    /// Takes in the Roles, ClusterRoles, RoleBindings and ClusterRoleBindings
    /// of a multi-document YAML stream (other kinds are skipped): they
    /// authorize every request that names a user (by a token of
    /// [`MemApi::add_token`] or by impersonation), as the RBAC authorizer
    /// does; a request naming nobody is allowed everything. Returns how
    /// many objects were taken.
    pub fn load_rbac(&self, text: &str) -> Result<usize, MemApiError> {
        let objects = seed::parse(text)?;
        lock(&self.shared.store).rbac.load(&objects)
    }

    /// A `kube::Client` talking to this server (default namespace "default").
    /// No retry layer: injected errors reach the caller. Needs a tokio runtime.
    pub fn client(&self) -> kube::Client {
        kube::Client::new(self.service(), "default")
    }

    /// Makes the bearer token `token` stand for `username` in `groups`
    /// (and `system:authenticated`) in TokenReviews.
    pub fn add_token(&self, token: &str, username: &str, groups: &[&str]) {
        lock(&self.shared.access).add_token(token, username, groups);
    }

    /// Lets the user or group `subject` use `verb` on the non-resource URL
    /// `path` (a trailing `*` matches any rest) in SubjectAccessReviews.
    pub fn grant(&self, subject: &str, path: &str, verb: &str) {
        lock(&self.shared.access).grant(subject, path, verb);
    }

    /// Stops (`withheld`) or resumes serving the named API group version
    /// `group_version` (e.g. `resource.k8s.io/v1`), as a control plane
    /// upgraded or downgraded across the release that added it: withheld,
    /// discovery leaves it out and its URLs answer a plain-text 404, as a
    /// real API server's mux does; stored objects stay and open watches
    /// are not cut. Takes effect at once, for every client.
    pub fn withhold(&self, group_version: &str, withheld: bool) {
        let mut set = lock(&self.shared.withheld);
        if withheld {
            set.insert(group_version.to_string());
        } else {
            set.remove(group_version);
        }
    }

    /// Listens on `addr` (port 0 allowed) with plain HTTP/1.1, for kubectl.
    /// Returns the bound address and the accept task (abort it to stop).
    pub async fn serve(
        &self,
        addr: std::net::SocketAddr,
    ) -> Result<(std::net::SocketAddr, tokio::task::JoinHandle<()>), MemApiError> {
        tcp::serve(self.shared.clone(), addr).await
    }

    /// Seeds objects from multi-document YAML, keeping their status.
    /// Returns how many objects were stored.
    pub fn load_yaml(&self, text: &str) -> Result<usize, MemApiError> {
        let objects = seed::parse(text)?;
        seed::load(&mut lock(&self.shared.store), objects)
    }

    /// Seeds one typed object, keeping its status (defaults still apply).
    pub fn create<K>(&self, obj: &K) -> Result<K, MemApiError>
    where
        K: kube::Resource<DynamicType = ()> + Serialize + DeserializeOwned,
    {
        let kind = kind_of::<K>()?;
        let stored = ops::create(
            &mut lock(&self.shared.store),
            kind,
            None,
            to_value(obj)?,
            ops::Origin::Seed,
        )?;
        from_value(&stored)
    }

    /// Replaces the whole object, status included, ignoring resourceVersion
    /// (or creates it): simulates another actor. Watchers are notified.
    pub fn put<K>(&self, obj: &K) -> Result<K, MemApiError>
    where
        K: kube::Resource<DynamicType = ()> + Serialize + DeserializeOwned,
    {
        let kind = kind_of::<K>()?;
        let stored = ops::put(&mut lock(&self.shared.store), kind, to_value(obj)?)?;
        from_value(&stored)
    }

    /// The stored object, if any (`namespace` is ignored for cluster kinds).
    pub fn get<K>(&self, namespace: Option<&str>, name: &str) -> Option<K>
    where
        K: kube::Resource<DynamicType = ()> + DeserializeOwned,
    {
        let kind = kind_of::<K>().ok()?;
        let ns = if kind.namespaced {
            namespace.unwrap_or("default")
        } else {
            ""
        };
        let obj = lock(&self.shared.store).get(kind, ns, name)?;
        from_value(&obj).ok()
    }

    /// The stored object of the resource `plural` as JSON, every field
    /// included: also those the client's compiled types do not know (memapi
    /// has no schema and keeps whatever a write sends, as a server newer
    /// than its clients keeps its new fields), which a typed read drops.
    /// `namespace` is ignored for cluster kinds.
    pub fn get_value(&self, plural: &str, namespace: Option<&str>, name: &str) -> Option<Value> {
        let kind = KINDS.iter().find(|k| k.plural == plural)?;
        let ns = if kind.namespaced {
            namespace.unwrap_or("default")
        } else {
            ""
        };
        let obj = lock(&self.shared.store).get(kind, ns, name)?;
        Some((*obj).clone())
    }

    /// All stored objects of a kind, in all namespaces, sorted by namespace/name.
    pub fn list<K>(&self) -> Vec<K>
    where
        K: kube::Resource<DynamicType = ()> + DeserializeOwned,
    {
        let Ok(kind) = kind_of::<K>() else {
            return Vec::new();
        };
        let objects: Vec<Arc<Value>> = lock(&self.shared.store)
            .iter(kind)
            .map(|(_, o)| o.clone())
            .collect();
        objects.iter().filter_map(|o| from_value(o).ok()).collect()
    }

    /// Removes an object whatever its finalizers or grace period; watchers
    /// see DELETED. Returns whether it existed. For a pod in graceful
    /// deletion, this is the kubelet confirming it has stopped.
    pub fn remove<K>(&self, namespace: Option<&str>, name: &str) -> bool
    where
        K: kube::Resource<DynamicType = ()>,
    {
        let Ok(kind) = kind_of::<K>() else {
            return false;
        };
        let ns = if kind.namespaced {
            namespace.unwrap_or("default")
        } else {
            ""
        };
        ops::remove(&mut lock(&self.shared.store), kind, ns, name)
    }

    /// Deletes an object as a DELETE request without options does:
    /// finalizers hold it (it gets a deletionTimestamp) and a pod on a node
    /// gets its grace period; no reactor is consulted and nothing is
    /// counted. Returns what the request would answer: the object marked
    /// for deletion, or its last state.
    pub fn delete<K>(&self, namespace: Option<&str>, name: &str) -> Result<K, MemApiError>
    where
        K: kube::Resource<DynamicType = ()> + DeserializeOwned,
    {
        let kind = kind_of::<K>()?;
        let ns = if kind.namespaced {
            namespace.unwrap_or("default")
        } else {
            ""
        };
        let answer = delete::delete(&mut lock(&self.shared.store), kind, ns, name, None)?;
        from_value(&answer)
    }

    /// Starts recording every change of a kind from now on; see
    /// [`Observer`].
    pub fn observe<K>(&self) -> Result<Observer<K>, MemApiError>
    where
        K: kube::Resource<DynamicType = ()> + DeserializeOwned,
    {
        let kind = kind_of::<K>()?;
        Ok(Observer::new(lock(&self.shared.store).observe(kind)))
    }

    /// Breaks every open watch stream of the API, as a network failure or
    /// an apiserver restart does: each ends with a transport error after
    /// the events already sent, and its client must watch again (from its
    /// last version, which [`MemApi::compact`] may have expired). Returns
    /// how many streams were cut; observers are not affected.
    pub fn cut_watches(&self) -> usize {
        lock(&self.shared.store).cut_watches()
    }

    /// Ends every open watch stream of the API cleanly, as a server does
    /// at a watch's `timeoutSeconds` or when it sheds watches: each ends
    /// without an error (a lag's undelivered events are not sent), and its
    /// client must watch again from its last version. Returns how many
    /// streams were ended; observers are not affected.
    pub fn end_watches(&self) -> usize {
        lock(&self.shared.store).end_watches()
    }

    /// Installs a reactor (consulted after those already installed);
    /// returns its id, for [`MemApi::reactor_fired`] and
    /// [`MemApi::remove_reactor`].
    pub fn add_reactor(&self, r: Reactor) -> ReactorId {
        lock(&self.shared.reactors).add(r)
    }

    /// How many times an installed reactor has fired (`None` once removed).
    pub fn reactor_fired(&self, id: ReactorId) -> Option<u32> {
        lock(&self.shared.reactors).get(id).map(Reactor::fired)
    }

    /// Removes one reactor; returns it (with its count) if it was installed.
    pub fn remove_reactor(&self, id: ReactorId) -> Option<Reactor> {
        lock(&self.shared.reactors).remove(id)
    }

    /// Removes every reactor.
    pub fn clear_reactors(&self) {
        lock(&self.shared.reactors).clear();
    }

    /// A snapshot of the request log and counters.
    pub fn requests(&self) -> RequestStats {
        lock(&self.shared.stats).clone()
    }

    /// The digest of the run so far: every request in the order it was
    /// answered, then every object held now (see [`Digest`]).
    pub fn digest(&self) -> Digest {
        let mut digest = digest::Fnv::new();
        for entry in lock(&self.shared.stats).log() {
            digest.request(entry);
        }
        lock(&self.shared.store).digest_objects(&mut digest);
        digest.finish()
    }

    /// Forgets the request log and counters.
    pub fn reset_requests(&self) {
        *lock(&self.shared.stats) = RequestStats::default();
    }

    /// Forgets the change history: a watch from any older version gets an
    /// in-stream 410, as after an etcd compaction.
    pub fn compact(&self) {
        lock(&self.shared.store).compact();
    }

    /// Makes every create and update through the API of the resource
    /// `plural` (e.g. "resourceslices") drop the fields at `paths`, as a
    /// server with a feature gate off drops the fields that gate guards:
    /// the write succeeds and the stored object lacks them. A path is
    /// dotted, and a segment ending in `[]` stands for each element of
    /// that array: `spec.devices[].taints` (DRADeviceTaints),
    /// `spec.sharedCounters` and `spec.devices[].consumesCounters`
    /// (DRAPartitionableDevices), `spec.devices[].bindingConditions`
    /// (DRADeviceBindingConditions), `spec.devices[].allowMultipleAllocations`
    /// (DRAConsumableCapacity). Replaces the paths set before for that
    /// resource; an empty list drops nothing. The test levers store
    /// objects as given.
    pub fn drop_fields(&self, plural: &str, paths: &[&str]) -> Result<(), MemApiError> {
        let kind = KINDS
            .iter()
            .find(|k| k.plural == plural)
            .ok_or_else(|| ApiError::from_code(404, format!("memapi does not serve {plural}")))?;
        lock(&self.shared.store)
            .set_dropped_fields(kind, paths.iter().map(ToString::to_string).collect());
        Ok(())
    }

    /// Makes the open and future watches of the API miss the next `count`
    /// changes of the resource `plural` (e.g. "persistentvolumes"), as a
    /// watch stream that loses events: the changes are stored and the
    /// history keeps them (a watch resumed from an older version gets
    /// them), but no watch open meanwhile is told. Observers are told.
    pub fn lose_events(&self, plural: &str, count: usize) -> Result<(), MemApiError> {
        let kind = KINDS
            .iter()
            .find(|k| k.plural == plural)
            .ok_or_else(|| ApiError::from_code(404, format!("memapi does not serve {plural}")))?;
        lock(&self.shared.store).lose_events(kind, count);
        Ok(())
    }

    /// Makes the watches of the API of the resource `plural` (e.g.
    /// "persistentvolumeclaims") deliver each event `lag` late (zero: at
    /// once), open watches too, as an API server whose watch cache lags
    /// behind its storage: the events of one resource keep their order
    /// (and bookmarks come after the events they follow), while one
    /// resource's watches may run ahead of another's and the answers to
    /// writes are never late. A cut stream breaks at once, losing what it
    /// had not delivered (a watch resumed from its last version gets it).
    pub fn lag_watches(&self, plural: &str, lag: std::time::Duration) -> Result<(), MemApiError> {
        let kind = KINDS
            .iter()
            .find(|k| k.plural == plural)
            .ok_or_else(|| ApiError::from_code(404, format!("memapi does not serve {plural}")))?;
        lock(&self.shared.store).set_lag(kind, lag);
        Ok(())
    }

    /// The current (latest) resourceVersion.
    pub fn resource_version(&self) -> u64 {
        lock(&self.shared.store).rv()
    }
}
