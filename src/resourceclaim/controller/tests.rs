//! Rows of the scenario table (tests/it/resourceclaim/table.rs, upstream's
//! `TestSyncHandler` and ours) decided from stores filled by hand, without
//! a server: each row's plan, as its lines (the writes and events in
//! order), the pods a claim's decision asks to read first, and whether the
//! pod's sync fails once its plan went through.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceClaimTemplate};
use serde_json::{Value, json};

use super::Known;
use crate::resourceclaim::Features;
use crate::resourceclaim::claims::ClaimStore;
use crate::resourceclaim::deleted::DeletedPods;
use crate::runtime::informer::{MemStore, Store, StoreRef};
use crate::runtime::keys::ObjectKey;
use crate::runtime::plan::Copies;
use crate::runtime::plan::{Reads, Then, target};
use crate::runtime::write::WriteError;

const NAMESPACE: &str = "my-namespace";
const POD: &str = "test-pod";
const ENTRY: &str = "acme-resource";
const GENERATED: &str = "test-pod-acme-resource-x6zgt";
const LEGACY: &str = "test-pod-acme-resource";
const FINALIZER: &str = "resource.kubernetes.io/delete-protection";

/// A pod of `my-namespace` with `entries` (`spec.resourceClaims`) and
/// `status`.
fn pod(name: &str, uid: &str, entries: &Value, status: &Value) -> Pod {
    serde_json::from_value(json!({
        "metadata": { "name": name, "namespace": NAMESPACE, "uid": uid },
        "spec": { "containers": [], "resourceClaims": entries },
        "status": status,
    }))
    .unwrap()
}

/// `test-pod` with the entry `acme-resource` from `my-template`.
fn pod_with_resource(status: &Value) -> Pod {
    pod(
        POD,
        "uidpod1",
        &json!([ { "name": ENTRY, "resourceClaimTemplateName": "my-template" } ]),
        status,
    )
}

/// The status recording `claim` for `acme-resource`.
fn recorded(claim: &str) -> Value {
    json!({ "resourceClaimStatuses": [ { "name": ENTRY, "resourceClaimName": claim } ] })
}

fn scheduled(mut pod: Pod) -> Pod {
    pod.spec.get_or_insert_with(Default::default).node_name = Some("worker".to_string());
    pod
}

/// A claim `name` of `my-namespace` at resourceVersion 7, controlled by
/// `test-pod` when `owned`, with `status`.
fn claim(name: &str, owned: bool, status: &Value) -> ResourceClaim {
    let owners = owned.then(|| {
        json!([ { "apiVersion": "v1", "kind": "Pod", "name": POD, "uid": "uidpod1", "controller": true } ])
    });
    serde_json::from_value(json!({
        "metadata": {
            "name": name, "namespace": NAMESPACE, "uid": format!("uid-{name}"),
            "resourceVersion": "7", "ownerReferences": owners,
        },
        "spec": {},
        "status": status,
    }))
    .unwrap()
}

/// The claim generated for `test-pod`'s entry.
fn generated(status: &Value) -> ResourceClaim {
    let mut claim = claim(GENERATED, true, status);
    claim.metadata.annotations = Some(
        [(
            "resource.kubernetes.io/pod-claim-name".to_string(),
            ENTRY.to_string(),
        )]
        .into(),
    );
    claim
}

fn with_finalizer(mut claim: ResourceClaim) -> ResourceClaim {
    claim.metadata.finalizers = Some(vec![FINALIZER.to_string()]);
    claim
}

fn deleting(mut claim: ResourceClaim) -> ResourceClaim {
    claim.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
    ));
    claim
}

/// A consumer reference to the pod `name` with `uid`.
fn consumer(name: &str, uid: &str) -> Value {
    json!({ "resource": "pods", "name": name, "uid": uid })
}

/// An allocated claim's status reserved for `consumers`.
fn reserved(consumers: &[Value]) -> Value {
    json!({ "allocation": {}, "reservedFor": consumers })
}

fn template(spec: &Value) -> ResourceClaimTemplate {
    serde_json::from_value(json!({
        "metadata": { "name": "my-template", "namespace": NAMESPACE },
        "spec": { "spec": spec },
    }))
    .unwrap()
}

/// What the decisions read: the stores holding `pods`, `claims` and
/// `templates`.
fn known(
    pods: &[Pod],
    claims: &[ResourceClaim],
    templates: &[ResourceClaimTemplate],
    features: Features,
) -> Known {
    let pod_store = Arc::new(MemStore::default());
    for pod in pods {
        pod_store.watched(&Arc::new(pod.clone()));
    }
    let claim_cache = Arc::new(ClaimStore::default());
    for claim in claims {
        claim_cache.offer(Arc::new(claim.clone()));
    }
    let template_store = Arc::new(MemStore::default());
    for template in templates {
        template_store.watched(&Arc::new(template.clone()));
    }
    let template_ref = StoreRef::new(&crate::kinds::RESOURCE_CLAIM_TEMPLATE);
    template_ref.fix(template_store as Arc<dyn Store<ResourceClaimTemplate>>);
    Known {
        pods: pod_store,
        templates: template_ref,
        claims: claim_cache,
        deleted: Arc::new(DeletedPods::new(10)),
        features,
    }
}

struct PodRow {
    name: &'static str,
    pods: Vec<Pod>,
    claims: Vec<ResourceClaim>,
    templates: Vec<ResourceClaimTemplate>,
    features: Features,
    lines: Vec<&'static str>,
    fails: bool,
}

impl Default for PodRow {
    fn default() -> Self {
        Self {
            name: "",
            pods: vec![],
            claims: vec![],
            templates: vec![template(&json!({}))],
            features: Features::default(),
            lines: vec![],
            fails: false,
        }
    }
}

const CREATE: &str = "create ResourceClaim my-namespace/test-pod-acme-resource-*";

fn pod_rows() -> Vec<PodRow> {
    let admin = json!({ "devices": { "requests": [
        { "name": "req-0", "exactly": { "deviceClassName": "class", "adminAccess": true } },
    ] } });
    let second_entry = json!([
        { "name": ENTRY, "resourceClaimTemplateName": "my-template" },
        { "name": "second", "resourceClaimTemplateName": "my-template" },
    ]);
    let both_recorded = json!({ "resourceClaimStatuses": [
        { "name": ENTRY, "resourceClaimName": GENERATED },
        { "name": "second", "resourceClaimName": "test-pod-second-gone1" },
    ] });
    vec![
        PodRow {
            name: "create",
            pods: vec![pod_with_resource(&json!({}))],
            lines: vec![
                CREATE,
                "apply Pod my-namespace/test-pod status as ResourceClaimController: resourceClaimStatuses acme-resource=test-pod-acme-resource-*",
            ],
            ..PodRow::default()
        },
        PodRow {
            name: "create with admin and feature gate off",
            pods: vec![pod_with_resource(&json!({}))],
            templates: vec![template(&admin)],
            features: Features {
                admin_access: false,
                ..Features::default()
            },
            lines: vec![
                "event Warning FailedResourceClaimCreation on Pod my-namespace/test-pod: PodResourceClaim acme-resource: admin access is requested, but the feature is disabled",
            ],
            fails: true,
            ..PodRow::default()
        },
        PodRow {
            name: "nop",
            pods: vec![pod_with_resource(&recorded(GENERATED))],
            claims: vec![generated(&json!(null))],
            ..PodRow::default()
        },
        PodRow {
            name: "recreate",
            pods: vec![pod_with_resource(&recorded(GENERATED))],
            lines: vec![
                CREATE,
                "apply Pod my-namespace/test-pod status as ResourceClaimController: resourceClaimStatuses acme-resource=test-pod-acme-resource-*",
            ],
            ..PodRow::default()
        },
        PodRow {
            name: "missing-template",
            pods: vec![pod_with_resource(&json!({}))],
            templates: vec![],
            lines: vec![
                "event Warning FailedResourceClaimCreation on Pod my-namespace/test-pod: PodResourceClaim acme-resource: resource claim template \"my-template\": resourceclaimtemplate.resource.k8s.io \"my-template\" not found",
            ],
            fails: true,
            ..PodRow::default()
        },
        PodRow {
            name: "find-existing-claim-by-label",
            pods: vec![pod_with_resource(&json!({}))],
            claims: vec![generated(&json!(null))],
            templates: vec![],
            lines: vec![
                "apply Pod my-namespace/test-pod status as ResourceClaimController: resourceClaimStatuses acme-resource=test-pod-acme-resource-x6zgt",
            ],
            ..PodRow::default()
        },
        PodRow {
            name: "no-such-pod",
            ..PodRow::default()
        },
        PodRow {
            name: "a-done-pod-gets-no-claim",
            pods: vec![pod_with_resource(&json!({ "phase": "Succeeded" }))],
            ..PodRow::default()
        },
        PodRow {
            name: "a-recorded-claim-the-pod-does-not-own-is-replaced-and-untouched",
            pods: vec![pod_with_resource(&recorded(LEGACY))],
            claims: vec![claim(LEGACY, false, &json!(null))],
            lines: vec![
                CREATE,
                "apply Pod my-namespace/test-pod status as ResourceClaimController: resourceClaimStatuses acme-resource=test-pod-acme-resource-*",
            ],
            ..PodRow::default()
        },
        PodRow {
            name: "flapping-resourceclaim-statuses: every entry is applied, not just the new one",
            pods: vec![pod(POD, "uidpod1", &second_entry, &both_recorded)],
            claims: vec![generated(&json!(null))],
            lines: vec![
                "create ResourceClaim my-namespace/test-pod-second-*",
                "apply Pod my-namespace/test-pod status as ResourceClaimController: resourceClaimStatuses acme-resource=test-pod-acme-resource-x6zgt second=test-pod-second-*",
            ],
            ..PodRow::default()
        },
        PodRow {
            name: "add-reserved",
            pods: vec![scheduled(pod_with_resource(&recorded(GENERATED)))],
            claims: vec![generated(&json!({ "allocation": {} }))],
            lines: vec![
                "update ResourceClaim my-namespace/test-pod-acme-resource-x6zgt status at 7: reservedFor + pods/test-pod",
            ],
            ..PodRow::default()
        },
        PodRow {
            name: "a-scheduled-pod-gets-its-users-claim-reserved",
            pods: vec![scheduled(pod(
                POD,
                "uidpod1",
                &json!([ { "name": "user", "resourceClaimName": "user-claim" } ]),
                &json!({}),
            ))],
            claims: vec![claim("user-claim", false, &json!({ "allocation": {} }))],
            lines: vec![
                "update ResourceClaim my-namespace/user-claim status at 7: reservedFor + pods/test-pod",
            ],
            ..PodRow::default()
        },
        PodRow {
            name: "a scheduled pod's new claim is recorded before any reservation",
            pods: vec![scheduled(pod(
                POD,
                "uidpod1",
                &json!([
                    { "name": ENTRY, "resourceClaimTemplateName": "my-template" },
                    { "name": "user", "resourceClaimName": "user-claim" },
                ]),
                &json!({}),
            ))],
            claims: vec![claim("user-claim", false, &json!({ "allocation": {} }))],
            lines: vec![
                CREATE,
                "apply Pod my-namespace/test-pod status as ResourceClaimController: resourceClaimStatuses acme-resource=test-pod-acme-resource-*",
                "update ResourceClaim my-namespace/user-claim status at 7: reservedFor + pods/test-pod",
            ],
            ..PodRow::default()
        },
    ]
}

#[test]
fn pod_rows_decide_the_plans_of_the_table() {
    for row in pod_rows() {
        let known = known(&row.pods, &row.claims, &row.templates, row.features);
        let plan = known.decide_pod(&ObjectKey::new(NAMESPACE, POD));
        assert_eq!(plan.lines(), row.lines, "{}: lines", row.name);
        assert_eq!(
            matches!(plan.what_then(), Then::Fail(_)),
            row.fails,
            "{}: fails once carried out",
            row.name
        );
    }
}

struct ClaimRow {
    name: &'static str,
    pods: Vec<Pod>,
    /// UIDs of pods seen deleted.
    deleted: Vec<&'static str>,
    claim: ResourceClaim,
    /// The pods the first decision asks to read.
    reads: Vec<&'static str>,
    /// The pods the API server has (any other read finds nothing).
    server: Vec<Pod>,
    lines: Vec<&'static str>,
}

impl Default for ClaimRow {
    fn default() -> Self {
        Self {
            name: "",
            pods: vec![],
            deleted: vec![],
            claim: claim(LEGACY, true, &json!(null)),
            reads: vec![],
            server: vec![],
            lines: vec![],
        }
    }
}

const RELEASE_ALL: &str =
    "update ResourceClaim my-namespace/test-pod-acme-resource status at 7: reservedFor []";
const DEALLOCATE: &str = "update ResourceClaim my-namespace/test-pod-acme-resource status at 7: reservedFor [], allocation cleared";
const NO_FINALIZER: &str = "update ResourceClaim my-namespace/test-pod-acme-resource at 7: finalizer resource.kubernetes.io/delete-protection removed";
const DELETE: &str =
    "delete ResourceClaim my-namespace/test-pod-acme-resource [uid-test-pod-acme-resource]";

fn claim_rows() -> Vec<ClaimRow> {
    let test_pod = || pod_with_resource(&json!({}));
    let done = || pod_with_resource(&json!({ "phase": "Succeeded" }));
    let for_pod = || reserved(&[consumer(POD, "uidpod1")]);
    let for_both = || {
        reserved(&[
            consumer(POD, "uidpod1"),
            consumer("test-pod-II", "uidpod1-II"),
        ])
    };
    let thing = json!({ "apiGroup": "example.com", "resource": "things", "name": "thing", "uid": "thing-uid" });
    vec![
        ClaimRow {
            name: "stay-reserved-seen",
            pods: vec![test_pod()],
            claim: claim(LEGACY, true, &for_pod()),
            ..ClaimRow::default()
        },
        ClaimRow {
            name: "stay-reserved-not-seen",
            claim: claim(LEGACY, true, &for_pod()),
            reads: vec![POD],
            server: vec![test_pod()],
            ..ClaimRow::default()
        },
        ClaimRow {
            name: "clear-reserved-structured",
            claim: with_finalizer(claim(LEGACY, true, &for_pod())),
            reads: vec![POD],
            lines: vec![DEALLOCATE, NO_FINALIZER],
            ..ClaimRow::default()
        },
        ClaimRow {
            name: "dont-clear-reserved-structured",
            pods: vec![test_pod()],
            claim: with_finalizer(claim(LEGACY, true, &for_both())),
            reads: vec!["test-pod-II"],
            lines: vec![
                "update ResourceClaim my-namespace/test-pod-acme-resource status at 7: reservedFor [pods/test-pod]",
            ],
            ..ClaimRow::default()
        },
        ClaimRow {
            name: "clear-reserved-structured-deleted",
            claim: deleting(with_finalizer(claim(LEGACY, true, &for_pod()))),
            reads: vec![POD],
            lines: vec![DEALLOCATE, NO_FINALIZER],
            ..ClaimRow::default()
        },
        ClaimRow {
            name: "structured-deleted",
            claim: deleting(with_finalizer(claim(
                LEGACY,
                true,
                &json!({ "allocation": {} }),
            ))),
            lines: vec![
                "update ResourceClaim my-namespace/test-pod-acme-resource status at 7: allocation cleared",
                NO_FINALIZER,
            ],
            ..ClaimRow::default()
        },
        ClaimRow {
            name: "clear-reserved-when-done",
            pods: vec![done()],
            claim: claim(LEGACY, false, &for_pod()),
            lines: vec![RELEASE_ALL],
            ..ClaimRow::default()
        },
        ClaimRow {
            name: "remove-reserved",
            pods: vec![test_pod()],
            claim: claim(LEGACY, true, &for_both()),
            reads: vec!["test-pod-II"],
            lines: vec![
                "update ResourceClaim my-namespace/test-pod-acme-resource status at 7: reservedFor [pods/test-pod]",
            ],
            ..ClaimRow::default()
        },
        ClaimRow {
            name: "delete-claim-when-done",
            pods: vec![done()],
            claim: claim(LEGACY, true, &for_pod()),
            lines: vec![RELEASE_ALL, DELETE],
            ..ClaimRow::default()
        },
        ClaimRow {
            name: "delete-claim-when-done, allocated by the scheduler: released, finalizer removed, then deleted",
            pods: vec![done()],
            claim: with_finalizer(claim(LEGACY, true, &for_pod())),
            lines: vec![DEALLOCATE, NO_FINALIZER, DELETE],
            ..ClaimRow::default()
        },
        ClaimRow {
            name: "clean up pod reservation with non-pod reservation present",
            pods: vec![done()],
            claim: claim(
                LEGACY,
                true,
                &reserved(&[consumer(POD, "uidpod1"), thing.clone()]),
            ),
            lines: vec![
                "update ResourceClaim my-namespace/test-pod-acme-resource status at 7: reservedFor [things/thing]",
            ],
            ..ClaimRow::default()
        },
        ClaimRow {
            name: "a-pod-replaced-under-its-name-loses-reservation-and-claim",
            pods: vec![pod(POD, "uid-of-the-new-pod", &json!(null), &json!({}))],
            claim: claim(LEGACY, true, &for_pod()),
            lines: vec![RELEASE_ALL, DELETE],
            ..ClaimRow::default()
        },
        ClaimRow {
            name: "a pod seen deleted is not read: its reservation goes",
            deleted: vec!["uidpod1"],
            claim: claim(LEGACY, true, &for_pod()),
            lines: vec![RELEASE_ALL],
            ..ClaimRow::default()
        },
    ]
}

#[test]
fn claim_rows_decide_the_plans_of_the_table() {
    for row in claim_rows() {
        let known = known(&row.pods, &[], &[], Features::default());
        for uid in &row.deleted {
            known.deleted.add(uid);
        }
        known.claims.offer(Arc::new(row.claim.clone()));
        let key = ObjectKey::of(&row.claim);
        let mut reads = Reads::none();
        let mut plan = known.decide_claim(&key, &reads);
        if let Then::Read(requests) = plan.what_then() {
            let names: Vec<String> = requests
                .iter()
                .map(|request| request.target().1.name)
                .collect();
            assert_eq!(names, row.reads, "{}: pods to read", row.name);
            for request in requests {
                let name = request.target().1.name;
                let found = row
                    .server
                    .iter()
                    .find(|pod| pod.metadata.name.as_deref() == Some(name.as_str()));
                reads.insert(
                    request.target(),
                    found.map(|pod| Arc::new(pod.clone()) as Arc<dyn std::any::Any + Send + Sync>),
                );
            }
            plan = known.decide_claim(&key, &reads);
        } else {
            assert!(row.reads.is_empty(), "{}: reads nothing", row.name);
        }
        assert!(
            !matches!(plan.what_then(), Then::Read(_)),
            "{}: asked to read twice",
            row.name
        );
        assert_eq!(plan.lines(), row.lines, "{}: lines", row.name);
    }
}

#[test]
fn a_claim_reserved_since_the_decision_is_not_released() {
    let known = known(
        &[pod_with_resource(&json!({ "phase": "Succeeded" }))],
        &[],
        &[],
        Features::default(),
    );
    let basis = with_finalizer(claim(LEGACY, true, &reserved(&[consumer(POD, "uidpod1")])));
    known.claims.offer(Arc::new(basis.clone()));
    let plan = known.decide_claim(&ObjectKey::of(&basis), &Reads::none());
    assert_eq!(plan.lines(), [DEALLOCATE, NO_FINALIZER, DELETE]);
    // Carried out on a server where the claim was reserved for another pod
    // since: the writes are conditional on the copy decided on, and the
    // first one is refused.
    let mut moved = basis.clone();
    moved.metadata.resource_version = Some("8".into());
    moved
        .status
        .get_or_insert_with(Default::default)
        .reserved_for
        .get_or_insert_with(Vec::new)
        .push(serde_json::from_value(consumer("another", "uid-another")).unwrap());
    let mut copies = Copies::default();
    copies.put(moved.clone());
    let refused = copies.carry_out(plan);
    assert!(
        matches!(refused, Err(WriteError::Stale { .. })),
        "{refused:?}"
    );
    assert_eq!(
        copies.get::<ResourceClaim>(&ObjectKey::of(&basis)),
        Some(&moved),
        "nothing of the plan is made"
    );
    assert!(
        copies
            .any(&target::<ResourceClaim>(ObjectKey::of(&basis)))
            .is_some()
    );
}

#[test]
fn a_pod_plan_on_copies_records_the_name_its_create_was_given() {
    let pod = pod_with_resource(&json!({}));
    let key = ObjectKey::new(NAMESPACE, POD);
    let known = known(
        std::slice::from_ref(&pod),
        &[],
        &[template(&json!({}))],
        Features::default(),
    );
    let plan = known.decide_pod(&key);
    let mut copies = Copies::default();
    copies.put(pod);
    copies.carry_out(plan).expect("carried out");
    let claims = copies.list::<ResourceClaim>();
    let names: Vec<String> = claims
        .iter()
        .filter_map(|claim| claim.metadata.name.clone())
        .collect();
    assert_eq!(names.len(), 1, "{names:?}");
    assert!(names[0].starts_with("test-pod-acme-resource-"), "{names:?}");
    let recorded: Vec<(String, Option<String>)> = copies
        .get::<Pod>(&key)
        .and_then(|pod| pod.status.clone())
        .and_then(|status| status.resource_claim_statuses)
        .unwrap_or_default()
        .into_iter()
        .map(|status| (status.name, status.resource_claim_name))
        .collect();
    assert_eq!(recorded, [(ENTRY.to_string(), Some(names[0].clone()))]);
}
