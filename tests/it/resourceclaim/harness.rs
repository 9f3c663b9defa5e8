//! Runs the ResourceClaim controller's table rows in two modes against
//! memapi, as the binder's rows run: one direct sync of the row's key
//! (result, objects, statuses, events and create counts checked), and the
//! whole controller running until it settles, both on the process of
//! [`crate::process`].

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceClaimTemplate};
use memapi::{MemApi, Reactor, Verb};
use pv_controller::resourceclaim::{self, Features, WorkKey};
use pv_controller::testing::Ended;
use pv_controller::{App, AppConfig, Metrics, ObjectKey};

pub(crate) use crate::process::Running;
use crate::process::{controllers, direct_clients, events_of, labelled};
use serde_json::Value;

/// What a pod's `status.resourceClaimStatuses` must hold: entry → claim.
pub(crate) type Statuses = BTreeMap<String, Vec<(String, Option<String>)>>;

/// One row.
#[derive(Clone, Default)]
pub(crate) struct Row {
    pub name: &'static str,
    pub key: Option<WorkKey>,
    pub pods: Vec<Pod>,
    /// Pods created after the controller's stores synced (direct mode).
    pub pods_later: Vec<Pod>,
    pub claims: Vec<ResourceClaim>,
    /// Claims only in the controller's store, as just created (direct mode).
    pub claims_in_store: Vec<ResourceClaim>,
    pub templates: Vec<ResourceClaimTemplate>,
    pub expected_claims: Vec<ResourceClaim>,
    pub expected_statuses: Statuses,
    pub expect_error: bool,
    /// Claim creates of the direct run, by outcome and admin access.
    pub creates: Creates,
    /// Every create of a claim is refused with 409 (upstream's
    /// `create-conflict`).
    pub create_conflict: bool,
    /// Events of the direct run, each a prefix of "Type Reason message".
    pub events: Vec<&'static str>,
    /// Claims the running controller ends with, when not the direct ones.
    pub settled_claims: Option<Vec<ResourceClaim>>,
    /// Statuses the running controller ends with, when not the direct ones.
    pub settled_statuses: Option<Statuses>,
    /// The row has no settled run, and why (it tests a race only a direct
    /// sync can stage).
    pub direct_only: Option<&'static str>,
    /// Events the running controller must record, when not the direct ones.
    pub settled_events: Option<Vec<&'static str>>,
    /// The feature gates' settings (default: Kubernetes 1.35's).
    pub features: Features,
}

/// `resourceclaim_controller_creates_total` by `status` and
/// `admin_access` (upstream's `expectedMetrics`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Creates {
    pub created: u64,
    pub created_admin: u64,
    pub failed: u64,
    pub failed_admin: u64,
}

impl Creates {
    /// One successful create of a claim without admin access.
    pub(crate) const ONE: Self = Self {
        created: 1,
        created_admin: 0,
        failed: 0,
        failed_admin: 0,
    };
}

/// `pod: [(entry, claim)]` for [`Row::expected_statuses`].
pub(crate) fn statuses(pod: &str, entries: &[(&str, Option<&str>)]) -> Statuses {
    [(
        pod.to_string(),
        entries
            .iter()
            .map(|(e, c)| ((*e).to_string(), c.map(str::to_string)))
            .collect(),
    )]
    .into()
}

pub(crate) fn pod_key(pod: &Pod) -> Option<WorkKey> {
    Some(WorkKey::Pod(ObjectKey::new(
        pod.metadata.namespace.clone().unwrap_or_default(),
        pod.metadata.name.clone().unwrap_or_default(),
    )))
}

pub(crate) fn claim_key(claim: &ResourceClaim) -> Option<WorkKey> {
    Some(WorkKey::ResourceClaim(ObjectKey::new(
        claim.metadata.namespace.clone().unwrap_or_default(),
        claim.metadata.name.clone().unwrap_or_default(),
    )))
}

pub(crate) fn seeded(row: &Row) -> MemApi {
    let api = MemApi::new();
    for pod in &row.pods {
        api.create(pod)
            .unwrap_or_else(|e| panic!("{}: pod: {e}", row.name));
    }
    for claim in &row.claims {
        api.create(claim)
            .unwrap_or_else(|e| panic!("{}: claim: {e}", row.name));
    }
    for template in &row.templates {
        api.create(template)
            .unwrap_or_else(|e| panic!("{}: template: {e}", row.name));
    }
    if row.create_conflict {
        api.add_reactor(
            Reactor::on(Verb::Create, "resourceclaims")
                .error_with(409, "fake conflict")
                .always(),
        );
    }
    api
}

/// The process with the ResourceClaim controller alone, with the feature
/// gates `features`.
pub(crate) fn claims_only(features: Features) -> AppConfig {
    AppConfig {
        resourceclaim: resourceclaim::Config {
            features,
            ..resourceclaim::Config::default()
        },
        ..controllers(k8s_names::RESOURCE_CLAIM_CONTROLLER)
    }
}

/// The ResourceClaim controller's create requests so far, by outcome and
/// admin access.
pub(crate) fn creates(metrics: &Metrics) -> Creates {
    let count = |status: &str, admin: &str| {
        labelled(
            metrics,
            "resourceclaim_controller_creates_total",
            &[("admin_access", admin), ("status", status)],
        ) as u64
    };
    Creates {
        created: count("success", "false"),
        created_admin: count("success", "true"),
        failed: count("failure", "false"),
        failed_admin: count("failure", "true"),
    }
}

/// Runs the row's key once and returns what differs from the row.
pub(crate) async fn run_direct(row: &Row) -> Vec<String> {
    let api = seeded(row);
    let mut app = App::start(direct_clients(&api), claims_only(row.features))
        .await
        .expect("the process starts");
    app.start_informers().await.expect("stores");
    let controller = app.controllers().resourceclaim.clone().expect("built");
    for claim in &row.claims_in_store {
        controller.store_created(claim.clone());
    }
    for pod in &row.pods_later {
        api.create(pod).expect("pod");
    }
    let key = row.key.clone().expect("a direct row has a key");
    let result = controller.sync(&key).await;
    app.recorder().flush().await;
    let mut problems = Vec::new();
    match (result, row.expect_error) {
        (Ended::Failed(e), false) => problems.push(format!("sync failed: {}", e.reason)),
        (Ended::Failed(_), true) | (_, false) => {}
        (_, true) => problems.push("expected an error, the sync succeeded".to_string()),
    }
    let creates = creates(&app.metrics());
    if creates != row.creates {
        problems.push(format!(
            "creates: expected {:?}, got {creates:?}",
            row.creates
        ));
    }
    problems.extend(compare(
        &api,
        row,
        &row.expected_claims,
        &row.expected_statuses,
    ));
    let recorded = recorded_events(&api);
    if recorded.len() != row.events.len()
        || !recorded
            .iter()
            .zip(&row.events)
            .all(|(got, want)| got.starts_with(want))
    {
        problems.push(format!(
            "events: expected {:?}, got {recorded:?}",
            row.events
        ));
    }
    if let Some(dump) = recorded.iter().find(|event| event.contains("Status {")) {
        problems.push(format!(
            "an event carries the client's debug dump, not the server's message: {dump}"
        ));
    }
    problems
}

/// Runs the controller on the row's objects until it settles and returns
/// what differs from the row's settled expectation.
pub(crate) async fn run_settled(row: &Row) -> Vec<String> {
    let api = seeded(row);
    for pod in &row.pods_later {
        api.create(pod).expect("pod");
    }
    let running = Running::start(&api, claims_only(row.features)).await;
    running.settle().await;
    running.stop().await;
    api.clear_reactors();
    let claims = row.settled_claims.as_ref().unwrap_or(&row.expected_claims);
    let statuses = row
        .settled_statuses
        .as_ref()
        .unwrap_or(&row.expected_statuses);
    let mut problems = compare(&api, row, claims, statuses);
    let recorded = recorded_events(&api);
    for want in row.settled_events.as_ref().unwrap_or(&row.events) {
        if !recorded.iter().any(|got| got.starts_with(want)) {
            problems.push(format!("event {want:?} not recorded; got {recorded:?}"));
        }
    }
    problems
}

/// A claim as compared: identity fields the server sets are dropped, and a
/// name the server generated during the run becomes `<generateName>*`.
fn normalized(claim: &ResourceClaim, seeded: &[String]) -> Value {
    let mut value = serde_json::to_value(claim).expect("json");
    let meta = &mut value["metadata"];
    if let Some(meta) = meta.as_object_mut() {
        for field in [
            "uid",
            "resourceVersion",
            "creationTimestamp",
            "generation",
            "managedFields",
        ] {
            meta.remove(field);
        }
        if meta
            .get("finalizers")
            .is_some_and(|f| f.as_array().is_some_and(Vec::is_empty))
        {
            meta.remove("finalizers");
        }
        if meta.get("deletionTimestamp").is_some() {
            meta.insert("deletionTimestamp".into(), Value::from("set"));
        }
    }
    let name = claim.metadata.name.clone().unwrap_or_default();
    if let Some(prefix) = &claim.metadata.generate_name
        && !seeded.contains(&name)
        && name.starts_with(prefix.as_str())
    {
        value["metadata"]["name"] = Value::from(format!("{prefix}*"));
    }
    if value
        .get("status")
        .is_some_and(|s| s.as_object().is_some_and(serde_json::Map::is_empty))
    {
        value.as_object_mut().map(|o| o.remove("status"));
    }
    value
}

/// The differences between the server's claims and pod statuses and the
/// expected ones.
fn compare(api: &MemApi, row: &Row, claims: &[ResourceClaim], statuses: &Statuses) -> Vec<String> {
    let seeded: Vec<String> = row
        .claims
        .iter()
        .chain(&row.claims_in_store)
        .filter_map(|c| c.metadata.name.clone())
        .collect();
    let mut problems = Vec::new();
    let mut got: Vec<Value> = api
        .list::<ResourceClaim>()
        .iter()
        .map(|c| normalized(c, &seeded))
        .collect();
    let mut want: Vec<Value> = claims.iter().map(|c| normalized(c, &seeded)).collect();
    let by_name = |v: &Value| {
        (
            v["metadata"]["namespace"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            v["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
        )
    };
    got.sort_by_key(by_name);
    want.sort_by_key(by_name);
    if got != want {
        problems.push(format!(
            "claims:\n  expected {}\n  got      {}",
            serde_json::to_string(&want).unwrap_or_default(),
            serde_json::to_string(&got).unwrap_or_default()
        ));
    }
    let generated: BTreeMap<String, String> = api
        .list::<ResourceClaim>()
        .iter()
        .filter_map(|c| {
            let name = c.metadata.name.clone()?;
            let prefix = c.metadata.generate_name.clone()?;
            (!seeded.contains(&name)).then(|| (name, format!("{prefix}*")))
        })
        .collect();
    let mut actual = Statuses::new();
    for pod in api.list::<Pod>() {
        let entries: Vec<(String, Option<String>)> = pod
            .status
            .and_then(|s| s.resource_claim_statuses)
            .unwrap_or_default()
            .into_iter()
            .map(|s| {
                let claim = s
                    .resource_claim_name
                    .map(|n| generated.get(&n).cloned().unwrap_or(n));
                (s.name, claim)
            })
            .collect();
        if !entries.is_empty() {
            actual.insert(pod.metadata.name.unwrap_or_default(), entries);
        }
    }
    if &actual != statuses {
        problems.push(format!(
            "pod statuses: expected {statuses:?}, got {actual:?}"
        ));
    }
    problems
}

/// The controller's events (source `resource_claim`), as [`events_of`]
/// reads them.
pub(crate) fn recorded_events(api: &MemApi) -> Vec<String> {
    events_of(api, Some("resource_claim"))
}

/// Runs every row in both modes and fails with every difference.
pub(crate) async fn run_table(rows: &[Row]) {
    let mut failures = Vec::new();
    for row in rows {
        if row.key.is_some() {
            for problem in run_direct(row).await {
                failures.push(format!("{} (direct): {problem}", row.name));
            }
        }
        if row.direct_only.is_none() {
            for problem in run_settled(row).await {
                failures.push(format!("{} (settled): {problem}", row.name));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} problems:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
