//! The ephemeral volume controller on scenario rows, each run twice: a
//! direct `sync_pod` whose result, claims, events and counters are checked,
//! and the process running only this controller until it settles. The
//! first seven rows are upstream's `TestSyncHandler`
//! (`pkg/controller/volume/ephemeral/controller_test.go`), the others ours.
//! Scenarios of the running controller follow the table.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{
    EphemeralVolumeSource, PersistentVolumeClaim, PersistentVolumeClaimSpec,
    PersistentVolumeClaimTemplate, Pod, PodSpec, Volume, VolumeResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use kube::ResourceExt;
use memapi::{MemApi, Reactor, Verb};
use pv_controller::LeaseConfig;
use pv_controller::ObjectKey;
use pv_controller::testing::Ended;

use crate::process::{Running, controllers, direct, events_of, run_settled, value};

const NAMESPACE: &str = "my-namespace";
const POD: &str = "test-pod";
const POD_UID: &str = "uidpod1";
const VOLUME: &str = "ephemeral-volume";
const CLAIM: &str = "test-pod-ephemeral-volume";
const CREATES: &str = "ephemeral_volume_controller_create_total";
const FAILURES: &str = "ephemeral_volume_controller_create_failures_total";

/// The template of upstream's ephemeral volume, made valid for a strict
/// API server (an access mode and a size).
fn template() -> PersistentVolumeClaimTemplate {
    PersistentVolumeClaimTemplate {
        metadata: None,
        spec: PersistentVolumeClaimSpec {
            access_modes: Some(vec!["ReadWriteOnce".to_string()]),
            resources: Some(VolumeResourceRequirements {
                requests: Some(BTreeMap::from([(
                    "storage".to_string(),
                    Quantity("1Gi".to_string()),
                )])),
                ..VolumeResourceRequirements::default()
            }),
            ..PersistentVolumeClaimSpec::default()
        },
    }
}

/// Upstream's `makePod`: `name` in [`NAMESPACE`] with an ephemeral volume
/// of [`template`] for each of `volumes`.
fn pod(name: &str, uid: &str, volumes: &[&str]) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some(NAMESPACE.to_string()),
            uid: Some(uid.to_string()),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            containers: vec![k8s_openapi::api::core::v1::Container {
                name: "c".to_string(),
                image: Some("pause".to_string()),
                ..Default::default()
            }],
            volumes: Some(
                volumes
                    .iter()
                    .map(|volume| Volume {
                        name: (*volume).to_string(),
                        ephemeral: Some(EphemeralVolumeSource {
                            volume_claim_template: Some(template()),
                        }),
                        ..Volume::default()
                    })
                    .collect(),
            ),
            ..PodSpec::default()
        }),
        status: None,
    }
}

/// The pod of upstream's rows: one ephemeral volume.
fn test_pod() -> Pod {
    pod(POD, POD_UID, &[VOLUME])
}

/// Upstream's `makePVC`: a claim of [`template`]'s spec, owned by the pod
/// of `owner` (UID, whether it is the controller) when given.
fn claim(name: &str, namespace: &str, owner: Option<(&str, &str, bool)>) -> PersistentVolumeClaim {
    PersistentVolumeClaim {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some(namespace.to_string()),
            owner_references: owner.map(|(pod, uid, controller)| {
                vec![OwnerReference {
                    api_version: "v1".to_string(),
                    kind: "Pod".to_string(),
                    name: pod.to_string(),
                    uid: uid.to_string(),
                    controller: Some(controller),
                    block_owner_deletion: Some(true),
                }]
            }),
            ..ObjectMeta::default()
        },
        spec: Some(template().spec),
        status: None,
    }
}

/// The claim the controller makes for the test pod.
fn pod_claim() -> PersistentVolumeClaim {
    claim(CLAIM, NAMESPACE, Some((POD, POD_UID, true)))
}

/// A claim as a row compares it: key, owners, labels, annotations, spec.
fn view(claim: &PersistentVolumeClaim) -> String {
    let owners: Vec<String> = claim
        .owner_references()
        .iter()
        .map(|o| {
            format!(
                "{}/{}[{}] controller={:?} block={:?}",
                o.kind, o.name, o.uid, o.controller, o.block_owner_deletion
            )
        })
        .collect();
    let spec = claim.spec.clone().unwrap_or_default();
    format!(
        "{}/{} owners={owners:?} labels={:?} annotations={:?} modes={:?} requests={:?} class={:?}",
        claim.namespace().unwrap_or_default(),
        claim.name_any(),
        claim.metadata.labels,
        claim.metadata.annotations,
        spec.access_modes,
        spec.resources.and_then(|r| r.requests),
        spec.storage_class_name,
    )
}

fn views<'a>(claims: impl IntoIterator<Item = &'a PersistentVolumeClaim>) -> Vec<String> {
    let mut views: Vec<String> = claims.into_iter().map(view).collect();
    views.sort();
    views
}

/// One row: the server's pods and claims, the pod synced, and what follows.
#[derive(Clone)]
struct Row {
    name: &'static str,
    pods: Vec<Pod>,
    claims: Vec<PersistentVolumeClaim>,
    errors: Vec<Reactor>,
    /// The direct sync's result: `Err(())` when it must fail.
    result: Result<(), ()>,
    claims_after: Vec<PersistentVolumeClaim>,
    /// Prefixes of the direct sync's events, in order.
    events: Vec<String>,
    /// Create requests and failed ones, after the direct sync.
    creates: (u64, u64),
    /// The claims once settled, when they differ from `claims_after`.
    settled_claims: Option<Vec<PersistentVolumeClaim>>,
}

impl Row {
    fn new(name: &'static str) -> Self {
        Self {
            name,
            pods: vec![],
            claims: vec![],
            errors: vec![],
            result: Ok(()),
            claims_after: vec![],
            events: vec![],
            creates: (0, 0),
            settled_claims: None,
        }
    }
    fn pods(mut self, pods: Vec<Pod>) -> Self {
        self.pods = pods;
        self
    }
    fn claims(mut self, claims: Vec<PersistentVolumeClaim>) -> Self {
        self.claims = claims;
        self
    }
    fn error(mut self, reactor: Reactor) -> Self {
        self.errors.push(reactor);
        self
    }
    fn syncs_to(mut self, result: Result<(), ()>) -> Self {
        self.result = result;
        self
    }
    fn ends_with(mut self, claims: Vec<PersistentVolumeClaim>) -> Self {
        self.claims_after = claims;
        self
    }
    fn event(mut self, event: &str) -> Self {
        self.events.push(event.to_string());
        self
    }
    fn creates(mut self, attempts: u64, failures: u64) -> Self {
        self.creates = (attempts, failures);
        self
    }
    fn settles_with(mut self, claims: Vec<PersistentVolumeClaim>) -> Self {
        self.settled_claims = Some(claims);
        self
    }

    fn seeded(&self) -> MemApi {
        let api = MemApi::new();
        for pod in &self.pods {
            api.create(pod)
                .unwrap_or_else(|e| panic!("{}: seeding: {e}", self.name));
        }
        for claim in &self.claims {
            api.create(claim)
                .unwrap_or_else(|e| panic!("{}: seeding: {e}", self.name));
        }
        api
    }
}

fn deleting(mut pod: Pod) -> Pod {
    pod.metadata.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::now()));
    pod.metadata.finalizers = Some(vec!["example.com/keep".to_string()]);
    pod
}

/// A quota's refusal, as the API server words it.
const QUOTA: &str = "persistentvolumeclaims \"test-pod-ephemeral-volume\" is forbidden: exceeded quota: pvcs, requested: persistentvolumeclaims=1, used: persistentvolumeclaims=1, limited: persistentvolumeclaims=1";

const NOT_OWNER: &str = "Warning FailedBinding ephemeral volume ephemeral-volume: PVC my-namespace/test-pod-ephemeral-volume was not created for pod my-namespace/test-pod (pod is not owner)";

fn rows() -> Vec<Row> {
    let other_namespace = claim(CLAIM, "not-my-namespace", None);
    let conflicting = claim(CLAIM, NAMESPACE, None);
    vec![
        // Upstream's TestSyncHandler.
        Row::new("create")
            .pods(vec![test_pod()])
            .syncs_to(Ok(()))
            .ends_with(vec![pod_claim()])
            .creates(1, 0),
        Row::new("no-such-pod"),
        Row::new("pod-deleted")
            .pods(vec![deleting(test_pod())])
            .syncs_to(Ok(())),
        Row::new("no-volumes")
            .pods(vec![pod(POD, POD_UID, &[])])
            .syncs_to(Ok(())),
        Row::new("create-with-other-PVC")
            .pods(vec![test_pod()])
            .claims(vec![other_namespace.clone()])
            .syncs_to(Ok(()))
            .ends_with(vec![other_namespace, pod_claim()])
            .creates(1, 0),
        Row::new("wrong-PVC-owner")
            .pods(vec![test_pod()])
            .claims(vec![conflicting.clone()])
            .syncs_to(Err(()))
            .ends_with(vec![conflicting])
            .event(NOT_OWNER),
        Row::new("create-conflict")
            .pods(vec![test_pod()])
            .error(Reactor::on(Verb::Create, "persistentvolumeclaims").error(409).times(1))
            .syncs_to(Err(()))
            .event("Warning FailedBinding ephemeral volume ephemeral-volume: create PVC test-pod-ephemeral-volume: injected error")
            .creates(1, 1)
            .settles_with(vec![pod_claim()]),
        Row::new("a refused create reads as the API server's message")
            .pods(vec![test_pod()])
            .error(
                Reactor::on(Verb::Create, "persistentvolumeclaims")
                    .error_with(403, QUOTA)
                    .times(1),
            )
            .syncs_to(Err(()))
            .event(&format!("Warning FailedBinding ephemeral volume ephemeral-volume: create PVC test-pod-ephemeral-volume: {QUOTA}"))
            .creates(1, 1)
            .settles_with(vec![pod_claim()]),
        // Ours.
        Row::new("a claim controlled by another pod is not the pod's")
            .pods(vec![test_pod()])
            .claims(vec![claim(CLAIM, NAMESPACE, Some(("old-pod", "uid-old", true)))])
            .syncs_to(Err(()))
            .ends_with(vec![claim(CLAIM, NAMESPACE, Some(("old-pod", "uid-old", true)))])
            .event(NOT_OWNER),
        Row::new("a claim the pod owns but does not control is not the pod's")
            .pods(vec![test_pod()])
            .claims(vec![claim(CLAIM, NAMESPACE, Some((POD, POD_UID, false)))])
            .syncs_to(Err(()))
            .ends_with(vec![claim(CLAIM, NAMESPACE, Some((POD, POD_UID, false)))])
            .event(NOT_OWNER),
        Row::new("the pod's claim exists: nothing to create")
            .pods(vec![test_pod()])
            .claims(vec![pod_claim()])
            .syncs_to(Ok(()))
            .ends_with(vec![pod_claim()]),
        Row::new("every ephemeral volume gets its claim")
            .pods(vec![pod(POD, POD_UID, &["a", "b", "c"])])
            .syncs_to(Ok(()))
            .ends_with(vec![
                claim("test-pod-a", NAMESPACE, Some((POD, POD_UID, true))),
                claim("test-pod-b", NAMESPACE, Some((POD, POD_UID, true))),
                claim("test-pod-c", NAMESPACE, Some((POD, POD_UID, true))),
            ])
            .creates(3, 0),
        Row::new("a missing claim beside an existing one is created")
            .pods(vec![pod(POD, POD_UID, &["a", "b"])])
            .claims(vec![claim("test-pod-a", NAMESPACE, Some((POD, POD_UID, true)))])
            .syncs_to(Ok(()))
            .ends_with(vec![
                claim("test-pod-a", NAMESPACE, Some((POD, POD_UID, true))),
                claim("test-pod-b", NAMESPACE, Some((POD, POD_UID, true))),
            ])
            .creates(1, 0),
        Row::new("the template's labels, annotations and spec are copied")
            .pods(vec![labelled_pod()])
            .syncs_to(Ok(()))
            .ends_with(vec![labelled_claim()])
            .creates(1, 0),
    ]
}

/// The test pod whose template has labels, annotations and a class.
fn labelled_pod() -> Pod {
    let mut pod = test_pod();
    for volume in pod
        .spec
        .iter_mut()
        .flat_map(|s| s.volumes.iter_mut().flatten())
    {
        if let Some(template) = volume
            .ephemeral
            .as_mut()
            .and_then(|e| e.volume_claim_template.as_mut())
        {
            template.metadata = Some(ObjectMeta {
                labels: Some(BTreeMap::from([("app".to_string(), "web".to_string())])),
                annotations: Some(BTreeMap::from([(
                    "note".to_string(),
                    "scratch".to_string(),
                )])),
                ..ObjectMeta::default()
            });
            template.spec.storage_class_name = Some("fast".to_string());
        }
    }
    pod
}

fn labelled_claim() -> PersistentVolumeClaim {
    let mut claim = pod_claim();
    claim.metadata.labels = Some(BTreeMap::from([("app".to_string(), "web".to_string())]));
    claim.metadata.annotations = Some(BTreeMap::from([(
        "note".to_string(),
        "scratch".to_string(),
    )]));
    if let Some(spec) = claim.spec.as_mut() {
        spec.storage_class_name = Some("fast".to_string());
    }
    claim
}

/// Runs a direct sync of the test pod; returns what differs.
async fn run_direct(row: &Row) -> Vec<String> {
    let api = row.seeded();
    let app = direct(&api, controllers(k8s_names::EPHEMERAL_VOLUME_CONTROLLER))
        .await
        .expect("the process starts");
    for reactor in &row.errors {
        api.add_reactor(reactor.clone());
    }
    let controller = app.controllers().ephemeral.clone().expect("built");
    let result = controller.sync_pod(&ObjectKey::new(NAMESPACE, POD)).await;
    app.recorder().flush().await;
    api.clear_reactors();
    let mut problems = vec![];
    match (&row.result, matches!(result, Ended::Failed(_))) {
        (Ok(()), false) | (Err(()), true) => {}
        _ => problems.push(format!("result: expected {:?}, got {result:?}", row.result)),
    }
    let claims = api.list::<PersistentVolumeClaim>();
    if views(&claims) != views(&row.claims_after) {
        problems.push(format!(
            "claims: expected {:#?}, got {:#?}",
            views(&row.claims_after),
            views(&claims)
        ));
    }
    let events = events_of(&api, Some("ephemeral_volume"));
    if events.len() != row.events.len()
        || !events
            .iter()
            .zip(&row.events)
            .all(|(got, want)| got.starts_with(want))
    {
        problems.push(format!("events: expected {:?}, got {events:?}", row.events));
    }
    if let Some(dump) = events.iter().find(|event| event.contains("Status {")) {
        problems.push(format!(
            "an event carries the client's debug dump, not the server's message: {dump}"
        ));
    }
    let metrics = &app.metrics();
    let creates = (
        value(metrics, CREATES) as u64,
        value(metrics, FAILURES) as u64,
    );
    if creates != row.creates {
        problems.push(format!(
            "creates (attempts, failures): expected {:?}, got {creates:?}",
            row.creates
        ));
    }
    problems
}

/// Runs the process with only this controller until settled.
async fn run_row_settled(row: &Row) -> Vec<String> {
    let api = row.seeded();
    for reactor in &row.errors {
        api.add_reactor(reactor.clone());
    }
    run_settled(&api, controllers(k8s_names::EPHEMERAL_VOLUME_CONTROLLER)).await;
    api.clear_reactors();
    let expected = row.settled_claims.as_ref().unwrap_or(&row.claims_after);
    let claims = api.list::<PersistentVolumeClaim>();
    let mut problems = vec![];
    if views(&claims) != views(expected) {
        problems.push(format!(
            "settled claims: expected {:#?}, got {:#?}",
            views(expected),
            views(&claims)
        ));
    }
    let events = events_of(&api, Some("ephemeral_volume"));
    for want in &row.events {
        if !events.iter().any(|got| got.starts_with(want.as_str())) {
            problems.push(format!(
                "settled: event {want:?} not recorded; got {events:?}"
            ));
        }
    }
    problems
}

#[tokio::test(start_paused = true)]
async fn rows_direct() {
    let mut failures = vec![];
    for row in rows() {
        let problems = run_direct(&row).await;
        if !problems.is_empty() {
            failures.push(format!("{}: {}", row.name, problems.join("; ")));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[tokio::test(start_paused = true)]
async fn rows_settled() {
    let mut failures = vec![];
    for row in rows() {
        let problems = run_row_settled(&row).await;
        if !problems.is_empty() {
            failures.push(format!("{}: {}", row.name, problems.join("; ")));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[tokio::test(start_paused = true)]
async fn a_pod_synced_again_before_the_watch_delivers_its_claim_creates_none() {
    let api = MemApi::new();
    api.create(&test_pod()).unwrap();
    let app = direct(&api, controllers(k8s_names::EPHEMERAL_VOLUME_CONTROLLER))
        .await
        .expect("the process starts");
    let controller = app.controllers().ephemeral.clone().expect("built");
    let key = ObjectKey::new(NAMESPACE, POD);
    // Back to back, without yielding to the claim watch in between.
    assert_eq!(controller.sync_pod(&key).await, Ended::Done);
    assert_eq!(controller.sync_pod(&key).await, Ended::Done);
    app.recorder().flush().await;
    assert_eq!(
        api.requests()
            .count(Verb::Create, "persistentvolumeclaims", None),
        1
    );
    assert_eq!(value(&app.metrics(), CREATES), 1.0);
    assert_eq!(
        events_of(&api, Some("ephemeral_volume")),
        Vec::<String>::new()
    );
}

#[tokio::test(start_paused = true)]
async fn a_deleted_claim_is_made_again_while_its_pod_lives() {
    let api = MemApi::new();
    api.create(&test_pod()).unwrap();
    let running = Running::try_start(&api, controllers(k8s_names::EPHEMERAL_VOLUME_CONTROLLER))
        .await
        .unwrap();
    running.settle().await;
    let first = api
        .get::<PersistentVolumeClaim>(Some(NAMESPACE), CLAIM)
        .expect("the claim is made");
    assert!(api.remove::<PersistentVolumeClaim>(Some(NAMESPACE), CLAIM));
    running.settle().await;
    let second = api
        .get::<PersistentVolumeClaim>(Some(NAMESPACE), CLAIM)
        .expect("the claim is made again");
    assert_ne!(first.uid(), second.uid());
    assert_eq!(views([&second]), views([&pod_claim()]));
    assert_eq!(value(&running.metrics, CREATES), 2.0);
    running.stop().await;
}

#[tokio::test(start_paused = true)]
async fn fifty_ephemeral_volumes_get_fifty_claims_and_nothing_more() {
    let api = MemApi::new();
    let volumes: Vec<String> = (0..50).map(|i| format!("v{i}")).collect();
    let names: Vec<&str> = volumes.iter().map(String::as_str).collect();
    api.create(&pod(POD, POD_UID, &names)).unwrap();
    // Status updates of the pod (a kubelet's) queue nothing new.
    let metrics = {
        let running = Running::try_start(&api, controllers(k8s_names::EPHEMERAL_VOLUME_CONTROLLER))
            .await
            .unwrap();
        running.settle().await;
        let pods: kube::Api<Pod> = kube::Api::namespaced(api.client(), NAMESPACE);
        let status = serde_json::json!({"status": {"phase": "Running"}});
        pods.patch_status(POD, &Default::default(), &kube::api::Patch::Merge(&status))
            .await
            .unwrap();
        running.settle().await;
        // The process leads, whichever of its controllers run.
        assert_eq!(value(&running.metrics, "pv_controller_leader"), 1.0);
        let metrics = Arc::clone(&running.metrics);
        running.stop().await;
        metrics
    };
    assert_eq!(value(&metrics, "pv_controller_leader"), 0.0, "stopped");
    let claims = api.list::<PersistentVolumeClaim>();
    assert_eq!(claims.len(), 50);
    assert!(
        claims
            .iter()
            .all(|c| c.owner_references()[0].uid == POD_UID)
    );
    assert_eq!(
        api.requests()
            .count(Verb::Create, "persistentvolumeclaims", None),
        50
    );
    assert_eq!(value(&metrics, CREATES), 50.0);
    assert_eq!(value(&metrics, FAILURES), 0.0);
}

#[tokio::test(start_paused = true)]
async fn the_process_runs_only_the_controllers_it_is_asked_to() {
    let api = MemApi::new();
    api.create(&test_pod()).unwrap();
    let running = Running::start(&api, controllers("*,-ephemeral-volume")).await;
    running.settle().await;
    running.stop().await;
    assert!(
        api.list::<PersistentVolumeClaim>().is_empty(),
        "ephemeral-volume is off"
    );
    let error = Running::try_start(&api, controllers("*,-ephemeral-volumes"))
        .await
        .err()
        .expect("an unknown name is refused");
    assert!(
        error.to_string().contains("not a known controller"),
        "{error}"
    );
    let error = Running::try_start(&api, controllers("-ephemeral-volume"))
        .await
        .err()
        .expect("no controller left");
    assert!(error.to_string().contains("no controller"), "{error}");
}

#[tokio::test(start_paused = true)]
async fn a_follower_makes_no_claim_and_the_leader_makes_it_once() {
    use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
    let api = MemApi::new();
    api.create(&test_pod()).unwrap();
    // Another replica holds the one Lease of the process, for a long time.
    let held = Lease {
        metadata: ObjectMeta {
            name: Some("pv-controller".to_string()),
            namespace: Some("kube-system".to_string()),
            ..ObjectMeta::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some("other".to_string()),
            lease_duration_seconds: Some(3600),
            renew_time: Some(MicroTime(k8s_openapi::jiff::Timestamp::now())),
            ..LeaseSpec::default()
        }),
    };
    api.create(&held).unwrap();
    let election = LeaseConfig::new("kube-system", "pv-controller", "me");
    let running = Running::start(
        &api,
        pv_controller::AppConfig {
            election: Some(election),
            ..controllers("*")
        },
    )
    .await;
    tokio::time::sleep(std::time::Duration::from_secs(60)).await;
    assert!(
        api.list::<PersistentVolumeClaim>().is_empty(),
        "a follower writes nothing"
    );
    // The holder lets go: this replica leads and runs every controller.
    api.remove::<Lease>(Some("kube-system"), "pv-controller");
    tokio::time::sleep(std::time::Duration::from_secs(10)).await;
    running.settle().await;
    assert_eq!(value(&running.metrics, "pv_controller_leader"), 1.0);
    // One registry for the process: the binder's series beside these.
    let metrics = Arc::clone(&running.metrics);
    running.stop().await;
    let claims = api.list::<PersistentVolumeClaim>();
    assert_eq!(views(&claims), views([&pod_claim()]));
    assert_eq!(value(&metrics, CREATES), 1.0);
    let text = metrics.render().unwrap();
    assert!(
        text.contains("pv_controller_queue_depth{queue=\"claim\"}"),
        "{text}"
    );
}
