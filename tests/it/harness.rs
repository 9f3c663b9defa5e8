//! Runs scenario-table rows against the in-memory API server, in two modes:
//! one direct sync call (the row's expected objects are the state after it),
//! and the whole running controller until it settles.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use memapi::{MemApi, Reactor};
use pv_controller::ObjectKey;
use pv_controller::pv::{self, Controller, RetryPolicy, Settings, VolumeName, VolumePlugins};
use pv_controller::testing::{Ended, PvStore};
use serde_json::Value;
use testkit::{ClaimBuilder, VolumeBuilder};

use crate::mock_plugin::{MockConfig, MockPlugin};
pub(crate) use crate::process::{Running, binder_only, clients, direct_binder, events_of, settle};

/// A change a row makes to the server (and, in direct mode, to the
/// controller's store) between the sync and the operation it started; in
/// settled mode it is applied before the controller starts.
pub(crate) type Inject = Arc<dyn Fn(&MemApi, Option<&Controller>) + Send + Sync>;

/// A row's settled expectation as a change of its direct one; see
/// [`Scenario::settles_with`].
pub(crate) type SettledChange = Arc<dyn Fn(Expected) -> Expected + Send + Sync>;

/// The volumes and claims a run must end with, changed by name.
#[derive(Clone)]
pub(crate) struct Expected {
    volumes: Vec<PersistentVolume>,
    claims: Vec<PersistentVolumeClaim>,
}

impl Expected {
    /// The volume `name` ends otherwise: `edit` gets the expected volume.
    pub(crate) fn volume(
        mut self,
        name: &str,
        edit: impl FnOnce(VolumeBuilder) -> VolumeBuilder,
    ) -> Self {
        let at = position(&self.volumes, name, None);
        let volume = self.volumes.remove(at);
        self.volumes.insert(at, edit(VolumeBuilder(volume)).build());
        self
    }

    /// The claim `name` (of namespace `default`) ends otherwise: `edit` gets
    /// the expected claim.
    pub(crate) fn claim(
        mut self,
        name: &str,
        edit: impl FnOnce(ClaimBuilder) -> ClaimBuilder,
    ) -> Self {
        let at = position(&self.claims, name, Some("default"));
        let claim = self.claims.remove(at);
        self.claims.insert(at, edit(ClaimBuilder(claim)).build());
        self
    }

    /// The volume `name` is gone.
    pub(crate) fn without_volume(mut self, name: &str) -> Self {
        let at = position(&self.volumes, name, None);
        self.volumes.remove(at);
        self
    }
}

/// Where the object `name` (in `namespace`) is in an expected list; a row
/// that changes an object it does not expect is a mistake in the row.
fn position<K: kube::Resource>(list: &[K], name: &str, namespace: Option<&str>) -> usize {
    list.iter()
        .position(|o| {
            o.meta().name.as_deref() == Some(name) && o.meta().namespace.as_deref() == namespace
        })
        .unwrap_or_else(|| panic!("the expectation has no {name:?} to change"))
}

/// Marker annotation: the object is on the server but not in the
/// controller's store when the direct sync runs (a stale store).
pub(crate) const SKIP_STORE: &str = "pv-testing-skip-local-store";

/// Which sync a row's direct run calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(clippy::enum_variant_names)]
pub(crate) enum Call {
    /// `sync_claim` on the first claim; it must succeed.
    SyncClaim,
    /// `sync_claim` on the first claim; it must fail.
    SyncClaimError,
    /// `sync_volume` on the first volume; it must succeed.
    SyncVolume,
}

/// One row of a scenario table.
#[derive(Clone)]
pub(crate) struct Scenario {
    pub name: &'static str,
    pub volumes: Vec<PersistentVolume>,
    pub expected_volumes: Vec<PersistentVolume>,
    pub claims: Vec<PersistentVolumeClaim>,
    pub expected_claims: Vec<PersistentVolumeClaim>,
    /// Events of the direct run, in order, each "Type Reason" or a prefix of
    /// "Type Reason message"; the direct run must record exactly these.
    pub events: Vec<&'static str>,
    pub errors: Vec<Reactor>,
    pub call: Call,
    pub classes: Vec<StorageClass>,
    pub pods: Vec<Pod>,
    /// Where the running controller ends, when that differs from the state
    /// after one direct sync: a change of the direct expectation.
    pub settled: Option<SettledChange>,
    /// Events the running controller must have recorded by the end, when
    /// they differ from `events`.
    pub settled_events: Option<Vec<&'static str>>,
    /// Claims the direct run's store holds instead of the server's
    /// version (a store that has not caught up yet).
    pub stale_stored_claims: Vec<PersistentVolumeClaim>,
    /// The mock plugin's answers; no mock plugin when `None`.
    pub plugin: Option<MockConfig>,
    pub nodes: Vec<Node>,
    pub inject: Option<Inject>,
}

/// Starts a row: no objects, no events, a claim sync.
pub(crate) fn row(name: &'static str) -> Scenario {
    Scenario {
        name,
        volumes: vec![],
        expected_volumes: vec![],
        claims: vec![],
        expected_claims: vec![],
        events: vec![],
        errors: vec![],
        call: Call::SyncClaim,
        classes: vec![],
        pods: vec![],
        settled: None,
        settled_events: None,
        stale_stored_claims: vec![],
        plugin: None,
        nodes: vec![],
        inject: None,
    }
}

impl Scenario {
    pub(crate) fn volumes(
        mut self,
        initial: Vec<PersistentVolume>,
        expected: Vec<PersistentVolume>,
    ) -> Self {
        self.volumes = initial;
        self.expected_volumes = expected;
        self
    }

    /// Volumes that the sync must leave exactly as they are.
    pub(crate) fn same_volumes(self, both: Vec<PersistentVolume>) -> Self {
        self.volumes(both.clone(), both)
    }

    pub(crate) fn claims(
        mut self,
        initial: Vec<PersistentVolumeClaim>,
        expected: Vec<PersistentVolumeClaim>,
    ) -> Self {
        self.claims = initial;
        self.expected_claims = expected;
        self
    }

    /// Claims that the sync must leave exactly as they are.
    pub(crate) fn same_claims(self, both: Vec<PersistentVolumeClaim>) -> Self {
        self.claims(both.clone(), both)
    }

    pub(crate) fn events(mut self, events: &[&'static str]) -> Self {
        self.events = events.to_vec();
        self
    }

    pub(crate) fn errors(mut self, errors: Vec<Reactor>) -> Self {
        self.errors = errors;
        self
    }

    pub(crate) fn call(mut self, call: Call) -> Self {
        self.call = call;
        self
    }

    pub(crate) fn classes(mut self, classes: Vec<StorageClass>) -> Self {
        self.classes = classes;
        self
    }

    pub(crate) fn pods(mut self, pods: Vec<Pod>) -> Self {
        self.pods = pods;
        self
    }

    /// Where the running controller ends, written as a change of the
    /// direct expectation (the objects after one sync): the volumes and
    /// claims it changes further, the volumes it deletes. The settled run
    /// is still compared with the whole result, object by object.
    pub(crate) fn settles_with(
        mut self,
        change: impl Fn(Expected) -> Expected + Send + Sync + 'static,
    ) -> Self {
        self.settled = Some(Arc::new(change));
        self
    }

    /// The objects the running controller must end with.
    fn settled_objects(&self) -> Expected {
        let direct = Expected {
            volumes: self.expected_volumes.clone(),
            claims: self.expected_claims.clone(),
        };
        match &self.settled {
            Some(change) => change(direct),
            None => direct,
        }
    }

    pub(crate) fn stale_stored_claims(mut self, claims: Vec<PersistentVolumeClaim>) -> Self {
        self.stale_stored_claims = claims;
        self
    }

    pub(crate) fn settled_events(mut self, events: &[&'static str]) -> Self {
        self.settled_events = Some(events.to_vec());
        self
    }

    pub(crate) fn plugin(mut self, config: MockConfig) -> Self {
        self.plugin = Some(config);
        self
    }

    pub(crate) fn nodes(mut self, nodes: Vec<Node>) -> Self {
        self.nodes = nodes;
        self
    }

    pub(crate) fn inject(
        mut self,
        f: impl Fn(&MemApi, Option<&Controller>) + Send + Sync + 'static,
    ) -> Self {
        self.inject = Some(Arc::new(f));
        self
    }

    /// The controller settings of the row: its mock plugin, and retries a
    /// second apart (paused time makes the wait free).
    pub(crate) fn settings(&self) -> Settings {
        let plugins = match &self.plugin {
            Some(config) => {
                VolumePlugins::default().with(Arc::new(MockPlugin::new(config.clone())))
            }
            None => VolumePlugins::default(),
        };
        Settings {
            plugins,
            provision_retry: RetryPolicy {
                attempts: 5,
                interval: Duration::from_secs(1),
            },
            ..Settings::default()
        }
    }
}

/// A server seeded with the row's objects, strict as a real one: volumes and
/// claims created through the API get the protection finalizers, as the
/// StorageObjectInUseProtection admission plugin adds them.
fn seeded_server(s: &Scenario) -> MemApi {
    let api = MemApi::with_config(memapi::MemApiConfig {
        protection_finalizers: true,
        ..Default::default()
    });
    for class in &s.classes {
        api.create(class)
            .unwrap_or_else(|e| panic!("{}: seeding class: {e}", s.name));
    }
    for pod in &s.pods {
        api.create(pod)
            .unwrap_or_else(|e| panic!("{}: seeding pod: {e}", s.name));
    }
    for node in &s.nodes {
        api.create(node)
            .unwrap_or_else(|e| panic!("{}: seeding node: {e}", s.name));
    }
    for volume in &s.volumes {
        api.create(volume)
            .unwrap_or_else(|e| panic!("{}: seeding volume: {e}", s.name));
    }
    for claim in &s.claims {
        api.create(claim)
            .unwrap_or_else(|e| panic!("{}: seeding claim: {e}", s.name));
    }
    api
}

fn has_skip_marker(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> bool {
    meta.annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(SKIP_STORE))
}

/// The row's first claim, as `store` holds it.
fn first_claim(store: &PvStore, s: &Scenario) -> Arc<PersistentVolumeClaim> {
    let key = ObjectKey::of(&s.claims[0]);
    store
        .claim(&key)
        .unwrap_or_else(|| panic!("{}: claim {key} not stored", s.name))
}

/// The row's first volume, as `store` holds it.
fn first_volume(store: &PvStore, s: &Scenario) -> Arc<PersistentVolume> {
    let name = VolumeName::of(&s.volumes[0]);
    store
        .volume(&name)
        .unwrap_or_else(|| panic!("{}: volume {name} not stored", s.name))
}

/// A key's turn as a sync's result: fine when done or waiting, the reason
/// when it failed.
pub(crate) fn synced(ended: Ended) -> Result<(), String> {
    match ended {
        Ended::Done | Ended::Waits | Ended::Passed => Ok(()),
        Ended::Failed(failure) => Err(failure.reason),
    }
}

/// Whether each event of `got` starts with the expected text at its place
/// (as far as both go).
fn events_begin_with(got: &[String], want: &[&str]) -> bool {
    got.iter()
        .zip(want)
        .all(|(got, want)| got.starts_with(want))
}

/// Runs one direct sync and returns what differs from the row's expectation.
pub(crate) async fn run_direct(s: &Scenario) -> Vec<String> {
    let api = seeded_server(s);
    let config = pv::Config {
        settings: s.settings(),
        ..pv::Config::default()
    };
    let (app, controller) = direct_binder(&api, config)
        .await
        .unwrap_or_else(|e| panic!("{}: {e}", s.name));
    let store = controller.store();
    for volume in s.volumes.iter().filter(|v| has_skip_marker(&v.metadata)) {
        store.remove_volume(&VolumeName::of(volume));
    }
    for claim in s.claims.iter().filter(|c| has_skip_marker(&c.metadata)) {
        store.remove_claim(&ObjectKey::of(claim));
    }
    for stale in &s.stale_stored_claims {
        let mut stale = stale.clone();
        stale.metadata.resource_version = Some(i64::MAX.to_string());
        store.remove_claim(&ObjectKey::of(&stale));
        store
            .offer_claim(Arc::new(stale))
            .unwrap_or_else(|e| panic!("{}: {e}", s.name));
    }
    for reactor in &s.errors {
        api.add_reactor(reactor.clone());
    }
    let mut problems = vec![];
    let result = synced(match s.call {
        Call::SyncClaim | Call::SyncClaimError => {
            let claim = first_claim(store, s);
            controller.sync_claim(&claim).await
        }
        Call::SyncVolume => {
            let volume = first_volume(store, s);
            controller.sync_volume(&volume).await
        }
    });
    // The operation the sync started has not run yet (this test runtime has
    // one thread): the row's injection lands between decision and operation.
    if let Some(inject) = &s.inject {
        inject(&api, Some(&controller));
    }
    controller.operations().wait_idle().await;
    // Events are written in the background: wait for every one recorded.
    app.recorder().flush().await;
    match (s.call, result) {
        (Call::SyncClaimError, Ok(_)) => {
            problems.push("expected the sync to fail, it succeeded".into());
        }
        (Call::SyncClaimError, Err(_)) | (_, Ok(_)) => {}
        (_, Err(e)) => problems.push(format!("sync failed: {e}")),
    }
    api.clear_reactors();
    problems.extend(compare_objects(
        &api,
        &s.expected_volumes,
        &s.expected_claims,
    ));
    let recorded = recorded_events(&api);
    if !events_begin_with(&recorded, &s.events) || recorded.len() != s.events.len() {
        problems.push(format!("events: expected {:?}, got {recorded:?}", s.events));
    }
    problems
}

/// Decides the row's sync with no server and rehearses the plan on copies
/// of the row's objects (shaped as the server stores them): the plan must
/// come to the row's direct expectation, objects and events, and fail
/// where the sync must fail. `None` for a row about what the server does
/// (injected failures, a store behind the server): the memapi runs
/// alone check it.
pub(crate) fn run_planned(s: &Scenario) -> Option<Vec<String>> {
    if !s.errors.is_empty() || s.inject.is_some() || !s.stale_stored_claims.is_empty() {
        return None;
    }
    // Only to shape the objects as the server stores them (its admission
    // adds the protection finalizers); the decision sees no server.
    let shaped = seeded_server(s);
    let server = pv_controller::testing::Server {
        volumes: shaped.list::<PersistentVolume>(),
        claims: shaped.list::<PersistentVolumeClaim>(),
    };
    drop(shaped);
    let objects = pv_controller::testing::OfflineObjects {
        volumes: server
            .volumes
            .iter()
            .filter(|v| !has_skip_marker(&v.metadata))
            .cloned()
            .collect(),
        claims: server
            .claims
            .iter()
            .filter(|c| !has_skip_marker(&c.metadata))
            .cloned()
            .collect(),
        classes: s.classes.clone(),
        pods: s.pods.clone(),
        nodes: s.nodes.clone(),
    };
    let binder = pv_controller::testing::offline_binder(s.settings(), objects)
        .unwrap_or_else(|e| panic!("{}: {e}", s.name));
    let rehearsed = match s.call {
        Call::SyncClaim | Call::SyncClaimError => {
            let claim = first_claim(binder.store(), s);
            binder.rehearse_claim(&claim, &server)
        }
        Call::SyncVolume => {
            let volume = first_volume(binder.store(), s);
            binder.rehearse_volume(&volume, &server)
        }
    };
    let mut problems = vec![];
    match (s.call, &rehearsed.outcome) {
        (Call::SyncClaimError, Ok(_)) => {
            problems.push("expected the sync to fail, the plan went through".into());
        }
        (Call::SyncClaimError, Err(_)) | (_, Ok(_)) => {}
        (_, Err(e)) => problems.push(format!("plan failed: {e}")),
    }
    // A plan that starts an operation comes to the row's expectation only
    // once the operation ran: its events so far must begin the row's.
    let operation = !rehearsed.started.is_empty();
    if !operation {
        problems.extend(compare_lists(
            &rehearsed.volumes,
            &rehearsed.claims,
            &s.expected_volumes,
            &s.expected_claims,
        ));
    }
    let events_agree = events_begin_with(&rehearsed.events, &s.events);
    let counts_agree = if operation {
        rehearsed.events.len() <= s.events.len()
    } else {
        rehearsed.events.len() == s.events.len()
    };
    if !events_agree || !counts_agree {
        problems.push(format!(
            "events: expected {:?}, planned {:?}",
            s.events, rehearsed.events
        ));
    }
    if !problems.is_empty() {
        problems.push(format!("the plan: {:?}", rehearsed.lines));
    }
    Some(problems)
}

/// Runs the whole controller until it settles and returns what differs from
/// the row's settled expectation (or its direct expectation).
pub(crate) async fn run_settled(s: &Scenario) -> Vec<String> {
    let api = seeded_server(s);
    if let Some(inject) = &s.inject {
        inject(&api, None);
    }
    for reactor in &s.errors {
        api.add_reactor(reactor.clone());
    }
    let config = pv::Config {
        resync_period: Duration::from_secs(5),
        settings: s.settings(),
        ..pv::Config::default()
    };
    let running = Running::binder_with(&api, config).await;
    running.settle().await;
    running.stop().await;
    api.clear_reactors();
    let expected = s.settled_objects();
    let mut problems = compare_objects(&api, &expected.volumes, &expected.claims);
    problems.extend(check_invariants(&api));
    let recorded = recorded_events(&api);
    let wanted = s.settled_events.clone().unwrap_or_else(|| s.events.clone());
    for want in wanted {
        if !recorded.iter().any(|got| got.starts_with(want)) {
            problems.push(format!("event {want:?} not recorded; got {recorded:?}"));
        }
    }
    problems
}

/// Creates `n` pairs that fit each other: a 1Gi volume `volume-NN` and a
/// 1Gi claim `claim-NN` (UID `uid-NN`) in `default`.
pub(crate) fn seed_pairs(api: &MemApi, n: usize) {
    for i in 0..n {
        api.create(&testkit::volume(&format!("volume-{i:02}"), "1Gi").build())
            .expect("seed");
        api.create(
            &testkit::claim(&format!("claim-{i:02}"), &format!("uid-{i:02}"), "1Gi").build(),
        )
        .expect("seed");
    }
}

/// Checks the binding invariants on the server's objects.
pub(crate) fn check_invariants(api: &MemApi) -> Vec<String> {
    let volumes = api.list::<PersistentVolume>();
    let claims = api.list::<PersistentVolumeClaim>();
    let mut problems = vec![];
    for claim in &claims {
        let phase = claim
            .status
            .as_ref()
            .and_then(|s| s.phase.as_deref())
            .unwrap_or("");
        let completed = claim
            .metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(k8s_names::ANN_BIND_COMPLETED));
        if phase != "Bound" || !completed {
            continue;
        }
        let name = claim
            .spec
            .as_ref()
            .and_then(|s| s.volume_name.clone())
            .unwrap_or_default();
        let key = ObjectKey::of(claim);
        match volumes
            .iter()
            .find(|v| v.metadata.name.as_deref() == Some(name.as_str()))
        {
            None => problems.push(format!("bound claim {key} names missing volume {name:?}")),
            Some(volume) => {
                let reference = volume.spec.as_ref().and_then(|s| s.claim_ref.as_ref());
                let points_back = reference.is_some_and(|r| {
                    r.name.as_deref() == Some(key.name.as_str())
                        && r.namespace.as_deref() == Some(key.namespace.as_str())
                        && r.uid == claim.metadata.uid
                });
                if !points_back {
                    problems.push(format!(
                        "bound claim {key}: volume {name:?} does not point back"
                    ));
                }
            }
        }
    }
    problems
}

/// Server objects compared with expectations, ignoring what the server
/// assigns (resourceVersion, timestamps, generated UIDs of volumes).
pub(crate) fn compare_objects(
    api: &MemApi,
    volumes: &[PersistentVolume],
    claims: &[PersistentVolumeClaim],
) -> Vec<String> {
    compare_lists(
        &api.list::<PersistentVolume>(),
        &api.list::<PersistentVolumeClaim>(),
        volumes,
        claims,
    )
}

/// Objects compared with expectations, ignoring what the server assigns.
pub(crate) fn compare_lists(
    got_volumes: &[PersistentVolume],
    got_claims: &[PersistentVolumeClaim],
    volumes: &[PersistentVolume],
    claims: &[PersistentVolumeClaim],
) -> Vec<String> {
    let mut problems = vec![];
    let got: Vec<Value> = sorted(got_volumes).iter().map(normalize).collect();
    let want: Vec<Value> = sorted(volumes).iter().map(normalize).collect();
    diff("volume", &got, &want, &mut problems);
    let got: Vec<Value> = sorted(got_claims).iter().map(normalize).collect();
    let want: Vec<Value> = sorted(claims).iter().map(normalize).collect();
    diff("claim", &got, &want, &mut problems);
    problems
}

fn sorted<K: kube::Resource + Clone>(list: &[K]) -> Vec<K> {
    let mut list = list.to_vec();
    list.sort_by(|a, b| {
        (a.meta().namespace.clone(), a.meta().name.clone())
            .cmp(&(b.meta().namespace.clone(), b.meta().name.clone()))
    });
    list
}

fn diff(kind: &str, got: &[Value], want: &[Value], problems: &mut Vec<String>) {
    let name = |v: &Value| v["metadata"]["name"].as_str().unwrap_or("").to_string();
    let got_names: Vec<String> = got.iter().map(name).collect();
    let want_names: Vec<String> = want.iter().map(name).collect();
    if got_names != want_names {
        problems.push(format!(
            "{kind}s: expected {want_names:?}, got {got_names:?}"
        ));
        return;
    }
    for (g, w) in got.iter().zip(want) {
        if g != w {
            problems.push(format!(
                "{kind} {}:\n  expected {}\n  got      {}",
                name(w),
                serde_json::to_string(w).unwrap_or_default(),
                serde_json::to_string(g).unwrap_or_default()
            ));
        }
    }
}

fn normalize<K: serde::Serialize + kube::Resource<DynamicType = ()>>(object: &K) -> Value {
    let mut value = serde_json::to_value(object).unwrap_or(Value::Null);
    let is_volume = K::kind(&()) == "PersistentVolume";
    if let Some(meta) = value.get_mut("metadata").and_then(Value::as_object_mut) {
        for key in [
            "resourceVersion",
            "creationTimestamp",
            "managedFields",
            "generation",
        ] {
            meta.remove(key);
        }
        if is_volume {
            meta.remove("uid");
        }
        if meta.get("deletionTimestamp").is_some() {
            meta.insert("deletionTimestamp".into(), Value::String("set".into()));
        }
    }
    if let Some(status) = value.get_mut("status").and_then(Value::as_object_mut) {
        status.remove("lastPhaseTransitionTime");
    }
    if let Some(reference) = value
        .pointer_mut("/spec/claimRef")
        .and_then(Value::as_object_mut)
    {
        reference.remove("resourceVersion");
    }
    value
}

/// The PersistentVolume controller's events on the server (source
/// `persistentvolume-controller`), as [`events_of`] reads them.
pub(crate) fn recorded_events(api: &MemApi) -> Vec<String> {
    events_of(api, Some("persistentvolume-controller"))
}

/// Runs every row in all three modes (its plan rehearsed with no server,
/// one direct sync, the whole controller until it settles) and fails with
/// a report of all differences.
pub(crate) async fn run_table(rows: Vec<Scenario>) {
    let mut failures = vec![];
    for s in &rows {
        if let Some(problems) = run_planned(s)
            && !problems.is_empty()
        {
            failures.push(format!(
                "[planned] {}:\n    {}",
                s.name,
                problems.join("\n    ")
            ));
        }
        for (mode, problems) in [
            ("direct", run_direct(s).await),
            ("settled", run_settled(s).await),
        ] {
            if !problems.is_empty() {
                failures.push(format!(
                    "[{mode}] {}:\n    {}",
                    s.name,
                    problems.join("\n    ")
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} rows failed:\n{}",
        failures.len(),
        rows.len(),
        failures.join("\n")
    );
}

/// The text a scrape of the admin server's `/metrics` answers for the
/// process's `metrics` and `health` (the route itself, without a socket).
pub(crate) async fn scrape_metrics(
    metrics: Arc<pv_controller::Metrics>,
    health: pv_controller::Health,
) -> String {
    use tower::ServiceExt;
    let router = pv_controller::testing::router(metrics, health);
    let request = http::Request::get("/metrics")
        .body(axum::body::Body::empty())
        .unwrap();
    let response = router.oneshot(request).await.unwrap();
    assert_eq!(response.status(), 200);
    let body = axum::body::to_bytes(response.into_body(), 1 << 22)
        .await
        .unwrap();
    String::from_utf8(body.to_vec()).unwrap()
}
