//! One chaos run, from a seed: a small cluster, two replicas listing in
//! pages of three, 90 s of faults (watches late by a lag per kind, slow
//! lists and writes, watch streams cut or ended cleanly among them), user
//! actions and kills, then up to 15 min (paused time) for the state to
//! settle and keep every invariant.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use k8s_names::{FINALIZER_PV_PROTECTION, FINALIZER_PVC_PROTECTION};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::resource::v1::ResourceClaim;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::jiff::Timestamp;
use memapi::{Digest, MemApi, MemApiConfig, Observer, Reactor, RequestLogEntry, Verb};
use tokio::time::Instant;

use super::claims;
use super::faults::{LIST_PAGE_SIZE, RequestFaults, Survived};
use super::history::History;
use super::kubelet::Kubelet;
use super::protection::Protection;
use super::replicas::Replica;
use super::sent::SentLog;
use super::settled::unsettled;
use super::steps::Steps;
use super::without::Without;
use super::world::{ChaosPlugin, Policy, Rng, chaos_class, pre_binding, static_volume, user_claim};

/// What each replica watches (one list to start each).
const WATCHED: [&str; 7] = [
    "persistentvolumes",
    "persistentvolumeclaims",
    "storageclasses",
    "pods",
    "nodes",
    "resourceclaims",
    "resourceclaimtemplates",
];

/// The label some volumes carry and some claims select.
const SELECTED: (&str, &str) = ("tier", "fast");

/// Share of requests that fail while the faults are on.
pub(crate) const FAULT_RATE: f64 = 0.10;
const CHAOS_PHASE: Duration = Duration::from_secs(90);
const STEP: Duration = Duration::from_millis(250);
/// The bound on settling once the faults stop.
const SETTLE_LIMIT: Duration = Duration::from_secs(900);
/// How long the state must stay settled to count.
const SETTLED_FOR: Duration = Duration::from_secs(30);

/// The wall-clock time a run starts at (2026-01-01T00:00:00Z): the server
/// and the replicas read a clock that starts here and moves with the run's
/// paused time, so every timestamp replays.
const START_SECOND: i64 = 1_767_225_600;

/// Mixed into the seed for the replicas' own random numbers (retry jitter),
/// so they are not the same draws as the server's.
const AMBIENT_SEED: u64 = 0xA3B1_95C4_D2E6_F708;

/// What one run found and survived.
pub(crate) struct Outcome {
    pub(crate) problems: Vec<String>,
    pub(crate) survived: Survived,
    /// The digest of every request and the final objects.
    pub(crate) digest: Digest,
    /// Every request, when the run was asked to keep them.
    pub(crate) requests: Option<Vec<RequestLogEntry>>,
}

/// The moving parts of one run.
struct Run {
    api: MemApi,
    rng: Rng,
    storage: Arc<ChaosPlugin>,
    replicas: Vec<Replica>,
    started: u64,
    kubelet: Kubelet,
    protection: Protection,
    /// Claims a user deleted to make again under the same name (and
    /// whether of the provisioned class), once the old one is gone.
    recreate: BTreeMap<String, bool>,
    history: History,
    leases: Observer<Lease>,
    holder: Option<String>,
    user_deleted: BTreeSet<String>,
    names: u64,
    pods_seen: usize,
    survived: Survived,
    /// The faults left out (`CHAOS_WITHOUT`).
    without: Without,
    /// What the replicas' clients sent.
    sent: SentLog,
}

/// Runs seed `seed` to the end, on a deterministic world: memapi
/// in-process, the current thread's paused runtime, the clock and every
/// random choice from the seed. `keep_requests` keeps the request log in
/// the outcome (to tell where two runs parted). The faults left out are
/// `CHAOS_WITHOUT`'s.
pub(crate) async fn run(seed: u64, keep_requests: bool) -> Outcome {
    run_without(seed, keep_requests, Without::from_env()).await
}

/// [`run`] with the faults `without` leaves out.
pub(crate) async fn run_without(seed: u64, keep_requests: bool, without: Without) -> Outcome {
    let start = Timestamp::from_second(START_SECOND).unwrap_or(Timestamp::UNIX_EPOCH);
    let _clock = memapi::simulate_clock(start);
    let _ambient = pv_controller_runtime::ambient::simulate(seed ^ AMBIENT_SEED, start);
    let api = MemApi::with_config(MemApiConfig {
        seed,
        protection_finalizers: true,
        ..MemApiConfig::default()
    });
    let mut run = Run {
        history: History::start(&api),
        leases: api.observe().expect("observe leases"),
        api,
        rng: Rng::new(seed),
        storage: Arc::new(ChaosPlugin::default()),
        replicas: Vec::new(),
        started: 0,
        kubelet: Kubelet::new(seed),
        protection: Protection::new(seed),
        recreate: BTreeMap::new(),
        holder: None,
        user_deleted: BTreeSet::new(),
        names: 0,
        pods_seen: 0,
        survived: Survived::default(),
        without,
        sent: SentLog::new(),
    };
    run.seed_cluster();
    run.start_replica();
    run.start_replica();
    run.chaos().await;
    let unsettled = run.settle().await;
    for replica in std::mem::take(&mut run.replicas) {
        replica.stop().await;
    }
    run.count_relists();
    let storage = run.storage.calls.lock().expect("plugin lock").clone();
    let steps = Steps::new(run.api.requests().log().to_vec());
    let mut violations = run.history.check(&run.user_deleted, &storage, &steps);
    violations.extend(run.sent.ignored_waits());
    violations.sort_by_key(|v| v.version);
    let mut problems: Vec<String> = violations.iter().map(ToString::to_string).collect();
    problems.extend(unsettled);
    Outcome {
        problems,
        survived: run.survived,
        digest: run.api.digest(),
        requests: keep_requests.then(|| run.api.requests().log().to_vec()),
    }
}

impl Run {
    fn seed_cluster(&mut self) {
        self.api.create(&chaos_class()).expect("class");
        self.api.create(&claims::template()).expect("template");
        for _ in 0..5 {
            self.create_volume();
        }
        for _ in 0..4 {
            self.create_claim();
        }
    }

    /// List requests beyond the first one of each watcher of each
    /// replica: the continued pages, and the relists that expired
    /// versions (410 Gone), expired continue tokens and failed lists
    /// forced; and the pages refused for an expired continue token.
    fn count_relists(&mut self) {
        let stats = self.api.requests();
        let lists: u64 = WATCHED
            .iter()
            .map(|resource| stats.count(Verb::List, resource, None))
            .sum();
        let first = self.started * WATCHED.len() as u64;
        self.survived.add(
            "list pages beyond each watcher's first (relists and continued pages)",
            lists.saturating_sub(first),
        );
        let expired: u64 = WATCHED
            .iter()
            .map(|resource| stats.count_code(Verb::List, resource, None, 410))
            .sum();
        self.survived.add(
            "continue tokens expired (410 on a list page, listed again)",
            expired,
        );
    }

    fn next_name(&mut self, prefix: &str) -> String {
        self.names += 1;
        format!("{prefix}{}", self.names)
    }

    fn start_replica(&mut self) {
        self.started += 1;
        let identity = format!("replica-{}", self.started);
        let page_size = if self.without.paged_lists {
            pv_controller::LIST_PAGE_SIZE
        } else {
            LIST_PAGE_SIZE
        };
        self.replicas.push(Replica::start(
            &self.api,
            identity,
            &self.storage,
            page_size,
            &self.sent,
        ));
    }

    /// The faults phase: request faults on, user actions, stream cuts,
    /// compactions, storage failures and kills at random steps.
    async fn chaos(&mut self) {
        let faults = RequestFaults::install(&self.api, FAULT_RATE, !self.without.throttling);
        // Claim writes held a second now and then: a window in which a
        // bind has reserved its volume but not yet written its claim.
        let slow = self.api.add_reactor(
            Reactor::on(Verb::Patch, "persistentvolumeclaims")
                .delay(Duration::from_secs(1))
                .probability(if self.without.held_claim_writes {
                    0.0
                } else {
                    0.3
                }),
        );
        // Lists answered slowly now and then, so that a list's pages
        // spread over time and compactions fall between them; writes of
        // any kind held before they commit, or answered late after it
        // (within the client's time limit, so that the watch shows the
        // write, and maybe a later one, before the writer hears of it).
        let slow_requests = [
            (
                "list pages answered a second late",
                self.api.add_reactor(
                    Reactor::verb(Verb::List)
                        .delay(Duration::from_secs(1))
                        .probability(0.3),
                ),
            ),
            (
                "writes held two seconds before they commit",
                self.api.add_reactor(
                    Reactor::any()
                        .writes_only()
                        .delay(Duration::from_secs(2))
                        .probability(if self.without.slow_writes { 0.0 } else { 0.03 }),
                ),
            ),
            (
                "writes answered two seconds after they commit",
                self.api.add_reactor(
                    Reactor::any()
                        .writes_only()
                        .delay(Duration::from_secs(2))
                        .after_commit()
                        .probability(if self.without.slow_writes { 0.0 } else { 0.03 }),
                ),
            ),
        ];
        // ResourceClaim deletes and finalizer removals fail often.
        let claim_faults = [
            self.api.add_reactor(
                Reactor::on(Verb::Delete, "resourceclaims")
                    .error(500)
                    .probability(0.3),
            ),
            self.api.add_reactor(
                Reactor::on(Verb::Patch, "resourceclaims")
                    .main_resource()
                    .error(409)
                    .probability(0.3),
            ),
        ];
        for resource in WATCHED {
            self.lag_watches(resource);
        }
        let requests_before = self.api.requests().total();
        let end = Instant::now() + CHAOS_PHASE;
        while Instant::now() < end {
            self.step(true).await;
            self.chaos_step().await;
        }
        for resource in WATCHED {
            self.api
                .lag_watches(resource, Duration::ZERO)
                .expect("a watched resource");
        }
        let fired = faults.remove(&self.api);
        let failed: u64 = fired.iter().map(|(_, n)| n).sum();
        self.survived.add_requests(fired);
        self.api.remove_reactor(slow);
        for (what, id) in slow_requests {
            let fired = self.api.remove_reactor(id).map_or(0, |r| r.fired());
            self.survived.add(what, u64::from(fired));
        }
        for (what, id) in ["claim deletes failed", "claim finalizer updates failed"]
            .into_iter()
            .zip(claim_faults)
        {
            let fired = self.api.remove_reactor(id).map_or(0, |r| r.fired());
            self.survived.add(what, u64::from(fired));
        }
        let requests = self.api.requests().total() - requests_before;
        self.survived
            .add("requests while the faults were on", requests);
        self.survived.add("requests failed by a fault", failed);
    }

    /// One step of either phase: time passes, the kubelet works, exited
    /// replicas are restarted, leader changes are counted.
    async fn step(&mut self, lingering: bool) {
        tokio::time::sleep(STEP).await;
        self.kubelet.step(&self.api, lingering);
        let protection = self.protection.step(&self.api);
        self.survived
            .add("protection finalizers added", protection.added);
        self.survived.add(
            "protection finalizers removed (deletions completed)",
            protection.removed,
        );
        self.recreate_claims();
        let placed = claims::schedule(&self.api, &mut self.rng);
        self.survived
            .add("pods with claims placed by the scheduler", placed);
        let collected = claims::collect_garbage(&self.api);
        self.survived.add(
            "claims of gone pods deleted by the garbage collector",
            collected,
        );
        let before = self.replicas.len();
        self.replicas.retain(|r| !r.exited());
        for _ in self.replicas.len()..before {
            self.survived.add("replica exits (restarted)", 1);
            self.start_replica();
        }
        for change in self.leases.drain() {
            let holder = change.object.spec.and_then(|s| s.holder_identity);
            if holder.is_some() && holder != self.holder {
                if self.holder.is_some() {
                    self.survived.add("leader changes", 1);
                }
                self.holder = holder;
            }
        }
    }

    async fn chaos_step(&mut self) {
        if self.rng.chance(0.12) {
            self.user_action();
        }
        if self.rng.chance(0.03) {
            let cut = self.api.cut_watches();
            self.survived.add("watch streams cut mid-way", cut as u64);
        }
        if self.rng.chance(0.03) && !self.without.ended_watches {
            let ended = self.api.end_watches();
            self.survived
                .add("watch streams ended cleanly mid-way", ended as u64);
        }
        if self.rng.chance(0.02) {
            let resource = *self.rng.pick(&WATCHED);
            self.lag_watches(resource);
        }
        if self.rng.chance(0.015) {
            self.api.compact();
            self.survived
                .add("history compactions (410 Gone on resume)", 1);
        }
        if self.rng.chance(0.01) {
            *self.storage.failing.lock().expect("plugin lock") += 1;
            self.survived.add("storage backend failures", 1);
        }
        let pods = self
            .api
            .list::<Pod>()
            .iter()
            .filter(|p| !claims::has_claims(p))
            .count();
        let new_pod = pods > self.pods_seen;
        self.pods_seen = pods;
        if new_pod && self.rng.chance(0.5) {
            self.kill_leader("leader killed after creating a recycler pod");
        } else if History::mid_bind(&self.api) && self.rng.chance(0.2) {
            self.kill_leader("leader killed between the volume and the claim write");
        } else if self.rng.chance(0.006) {
            self.kill_leader("leader killed at a random point");
        } else if self.rng.chance(0.004) {
            self.stop_leader().await;
        }
    }

    /// Makes the watches of `resource` late by a lag drawn from the seed
    /// (none, a little, a second, several): each kind's watch runs ahead
    /// of or behind the others and the answers to writes.
    fn lag_watches(&mut self, resource: &str) {
        let lag = *self.rng.pick(&[0, 200, 1000, 3000]);
        let lag = if self.without.late_watches { 0 } else { lag };
        self.api
            .lag_watches(resource, Duration::from_millis(lag))
            .expect("a watched resource");
        if lag > 0 {
            self.survived.add("watches made late (kind, lag)", 1);
        }
    }

    fn leader_index(&self) -> Option<usize> {
        let holder = self.holder.as_deref()?;
        self.replicas.iter().position(|r| r.identity == holder)
    }

    fn kill_leader(&mut self, what: &'static str) {
        let Some(at) = self.leader_index() else {
            return;
        };
        self.replicas.remove(at).crash();
        self.survived.add(what, 1);
        self.start_replica();
    }

    async fn stop_leader(&mut self) {
        let Some(at) = self.leader_index() else {
            return;
        };
        self.replicas.remove(at).stop().await;
        self.survived
            .add("leader stopped cleanly (lease handed over)", 1);
        self.start_replica();
    }

    /// Faults off: waits until the state is settled, and every replica's
    /// store of volumes and claims agrees with the server, and stays so for
    /// [`SETTLED_FOR`], or until [`SETTLE_LIMIT`]; returns what was still
    /// wrong then.
    async fn settle(&mut self) -> Vec<String> {
        while self.replicas.len() < 2 {
            self.start_replica();
        }
        let started = Instant::now();
        let mut settled_since: Option<Instant> = None;
        loop {
            self.step(false).await;
            self.history.collect();
            let mut problems = unsettled(&self.api);
            problems.extend(claims::unsettled(&self.api));
            let volumes = self.api.list::<PersistentVolume>();
            let claims = self.api.list::<PersistentVolumeClaim>();
            for replica in &self.replicas {
                problems.extend(replica.store_differences(&volumes, &claims));
            }
            let now = Instant::now();
            if !problems.is_empty() {
                settled_since = None;
                if now - started > SETTLE_LIMIT {
                    return problems
                        .into_iter()
                        .map(|p| format!("not-settled: after {SETTLE_LIMIT:?}: {p}"))
                        .collect();
                }
                continue;
            }
            let since = *settled_since.get_or_insert(now);
            if now - since >= SETTLED_FOR {
                let took = (since - started).as_secs();
                self.survived.add("seconds to settle (sum over runs)", took);
                return Vec::new();
            }
        }
    }
}

/// User actions.
impl Run {
    fn user_action(&mut self) {
        match self.rng.below(12) {
            0 => self.create_volume(),
            1 | 2 => self.create_claim(),
            3 => self.delete_claim(false),
            4 => self.delete_claim(true),
            5 => self.delete_volume(),
            6 => self.edit_pre_binding(),
            7 => self.create_claim_naming_volume(),
            8 => self.create_pod_with_claims(),
            9 => self.delete_pod_with_claims(),
            10 => self.delete_resource_claim(),
            _ => self.create_pre_bound_volume(),
        }
        self.survived.add("user actions", 1);
    }

    fn create_volume(&mut self) {
        let name = self.next_name("v");
        let size = *self.rng.pick(&["1Gi", "2Gi"]);
        let policy = *self
            .rng
            .pick(&[Policy::Retain, Policy::Delete, Policy::Recycle]);
        let mut volume = static_volume(&name, size, policy);
        self.maybe_odd(&mut volume);
        self.protection
            .mark(&mut volume.metadata, FINALIZER_PV_PROTECTION);
        self.api.create(&volume).expect("create volume");
    }

    /// Makes some volumes fit fewer claims: smaller than a claim asks,
    /// ReadOnlyMany only, of volume mode Block, or labelled for the claims
    /// that select ([`SELECTED`]).
    fn maybe_odd(&mut self, volume: &mut PersistentVolume) {
        if !self.rng.chance(0.15) {
            return;
        }
        let Some(spec) = volume.spec.as_mut() else {
            return;
        };
        match self.rng.below(4) {
            0 => {
                spec.capacity =
                    Some([("storage".to_string(), Quantity("512Mi".to_string()))].into());
            }
            1 => spec.access_modes = Some(vec!["ReadOnlyMany".to_string()]),
            2 => spec.volume_mode = Some("Block".to_string()),
            _ => {
                volume.metadata.labels =
                    Some([(SELECTED.0.to_string(), SELECTED.1.to_string())].into());
            }
        }
    }

    /// A claim; some of the static ones select volumes by label
    /// ([`SELECTED`]).
    fn create_claim(&mut self) {
        let name = self.next_name("c");
        let dynamic = self.rng.chance(0.25);
        let mut claim = user_claim(&name, dynamic);
        if !dynamic
            && self.rng.chance(0.1)
            && let Some(spec) = claim.spec.as_mut()
        {
            spec.selector = Some(LabelSelector {
                match_labels: Some([(SELECTED.0.to_string(), SELECTED.1.to_string())].into()),
                ..LabelSelector::default()
            });
        }
        self.protection
            .mark(&mut claim.metadata, FINALIZER_PVC_PROTECTION);
        self.api.create(&claim).expect("create claim");
    }

    /// A claim that asks for one volume by name (`spec.volumeName`): any
    /// volume, free or another claim's, or one that does not exist yet.
    fn create_claim_naming_volume(&mut self) {
        let volumes = self.api.list::<PersistentVolume>();
        let wanted = if volumes.is_empty() || self.rng.chance(0.1) {
            // The name the next object would get, were it a volume.
            format!("v{}", self.names + 2)
        } else {
            self.rng
                .pick(&volumes)
                .metadata
                .name
                .clone()
                .unwrap_or_default()
        };
        let name = self.next_name("c");
        let dynamic = self.rng.chance(0.25);
        let mut claim = user_claim(&name, dynamic);
        claim.spec.get_or_insert_with(Default::default).volume_name = Some(wanted);
        self.protection
            .mark(&mut claim.metadata, FINALIZER_PVC_PROTECTION);
        self.api
            .create(&claim)
            .expect("create claim naming a volume");
    }

    fn random_claim(&mut self) -> Option<PersistentVolumeClaim> {
        let claims = self.api.list::<PersistentVolumeClaim>();
        (!claims.is_empty()).then(|| self.rng.pick(&claims).clone())
    }

    /// Deletes a claim (maybe while it binds); `recreate` makes a new one
    /// of the same name (a new UID) as soon as the old one is gone: at
    /// once, or when its protection finalizer is removed (the API server
    /// refuses a create of a name still held).
    fn delete_claim(&mut self, recreate: bool) {
        let Some(claim) = self.random_claim() else {
            return;
        };
        let name = claim.metadata.name.clone().unwrap_or_default();
        let _ = self
            .api
            .delete::<PersistentVolumeClaim>(Some("default"), &name);
        if recreate {
            let dynamic = claim
                .spec
                .as_ref()
                .and_then(|s| s.storage_class_name.as_deref())
                .is_some();
            self.recreate.insert(name, dynamic);
            self.recreate_claims();
        }
    }

    /// Makes again each claim a user deleted to re-create whose old
    /// incarnation is gone.
    fn recreate_claims(&mut self) {
        let gone: Vec<(String, bool)> = self
            .recreate
            .iter()
            .filter(|(name, _)| {
                self.api
                    .get::<PersistentVolumeClaim>(Some("default"), name)
                    .is_none()
            })
            .map(|(name, dynamic)| (name.clone(), *dynamic))
            .collect();
        for (name, dynamic) in gone {
            self.recreate.remove(&name);
            let mut claim = user_claim(&name, dynamic);
            self.protection
                .mark(&mut claim.metadata, FINALIZER_PVC_PROTECTION);
            self.api.create(&claim).expect("re-create claim");
        }
    }

    fn delete_volume(&mut self) {
        let volumes: Vec<PersistentVolume> = self
            .api
            .list::<PersistentVolume>()
            .into_iter()
            .filter(|v| !v.metadata.name.as_deref().unwrap_or("").starts_with("pvc-"))
            .collect();
        if volumes.is_empty() {
            return;
        }
        let volume = self.rng.pick(&volumes).clone();
        let name = volume.metadata.name.clone().unwrap_or_default();
        if self.api.delete::<PersistentVolume>(None, &name).is_ok() {
            self.user_deleted
                .insert(volume.metadata.uid.clone().unwrap_or_default());
        }
    }

    /// Pre-binds an unclaimed volume to a claim name (existing or not), or
    /// takes a pre-binding back.
    fn edit_pre_binding(&mut self) {
        let volumes = self.api.list::<PersistentVolume>();
        let candidates: Vec<&PersistentVolume> = volumes
            .iter()
            .filter(|v| {
                let reference = v.spec.as_ref().and_then(|s| s.claim_ref.as_ref());
                reference.is_none_or(|r| r.uid.is_none())
            })
            .collect();
        if candidates.is_empty() {
            return;
        }
        let mut volume = (*self.rng.pick(&candidates)).clone();
        let target = self.pre_binding_target();
        if let Some(spec) = volume.spec.as_mut() {
            spec.claim_ref = match spec.claim_ref {
                Some(_) => None,
                None => Some(pre_binding(&target)),
            };
        }
        let _ = self.api.put(&volume);
    }

    fn pre_binding_target(&mut self) -> String {
        match self.random_claim() {
            Some(c) if self.rng.chance(0.7) => c.metadata.name.unwrap_or_default(),
            _ => format!("c{}", self.names + 1),
        }
    }

    fn create_pre_bound_volume(&mut self) {
        let name = self.next_name("v");
        let target = self.pre_binding_target();
        let mut volume = static_volume(&name, "1Gi", Policy::Retain);
        self.maybe_odd(&mut volume);
        self.protection
            .mark(&mut volume.metadata, FINALIZER_PV_PROTECTION);
        if let Some(spec) = volume.spec.as_mut() {
            spec.claim_ref = Some(pre_binding(&target));
        }
        self.api.create(&volume).expect("create pre-bound volume");
    }

    fn create_pod_with_claims(&mut self) {
        let name = self.next_name("p");
        let entries = 1 + self.rng.below(2) as usize;
        self.api
            .create(&claims::pod(&name, entries))
            .expect("create pod");
    }

    /// Deletes a pod with claims, running or not.
    fn delete_pod_with_claims(&mut self) {
        let pods: Vec<Pod> = self
            .api
            .list::<Pod>()
            .into_iter()
            .filter(claims::has_claims)
            .collect();
        if pods.is_empty() {
            return;
        }
        let pod = self.rng.pick(&pods).clone();
        let _ = self
            .api
            .delete::<Pod>(Some("default"), pod.metadata.name.as_deref().unwrap_or(""));
    }

    /// Deletes a ResourceClaim, maybe one in use (its finalizer holds it).
    fn delete_resource_claim(&mut self) {
        let claims = self.api.list::<ResourceClaim>();
        if claims.is_empty() {
            return;
        }
        let claim = self.rng.pick(&claims).clone();
        let _ = self.api.delete::<ResourceClaim>(
            Some("default"),
            claim.metadata.name.as_deref().unwrap_or(""),
        );
    }
}
