//! memapi as strict as a Kubernetes 1.20 apiserver: event validation,
//! graceful deletion of pods, immutable claim and volume fields, the
//! storage admission plugins, what a `/status` write keeps, and who
//! `managedFields` say last changed a field.

use crate::support::{code, pv, pvc, reason, status};
use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::{
    Event as CoreEvent, PersistentVolume, PersistentVolumeClaim, Pod,
};
use k8s_openapi::api::events::v1::Event as NewEvent;
use k8s_openapi::api::storage::v1::StorageClass;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use memapi::{MemApi, MemApiConfig};
use serde_json::{Value, json};
use tower::ServiceExt;

/// A merge patch of `v`.
fn merge(v: Value) -> Patch<Value> {
    Patch::Merge(v)
}

/// A watch of one resource from the current version, as a stream of
/// (type, name, deletionTimestamp set, deletionGracePeriodSeconds).
async fn watch_pods(
    mem: &MemApi,
) -> impl Stream<Item = (String, String, bool, Option<i64>)> + Unpin {
    let pods: Api<Pod> = Api::all(mem.client());
    let from = mem.resource_version().to_string();
    pods.watch(&WatchParams::default(), &from)
        .await
        .unwrap()
        .map(|ev| {
            let (ty, pod) = match ev.unwrap() {
                WatchEvent::Added(p) => ("ADDED", p),
                WatchEvent::Modified(p) => ("MODIFIED", p),
                WatchEvent::Deleted(p) => ("DELETED", p),
                other => panic!("{other:?}"),
            };
            (
                ty.to_string(),
                pod.name_any(),
                pod.metadata.deletion_timestamp.is_some(),
                pod.metadata.deletion_grace_period_seconds,
            )
        })
        .boxed()
}

fn pod(name: &str, node: Option<&str>) -> Pod {
    let mut spec = json!({"containers": [{"name": "c", "image": "busybox"}]});
    if let Some(node) = node {
        spec["nodeName"] = json!(node);
    }
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "ns1"},
        "spec": spec,
    }))
    .unwrap()
}

fn grace(seconds: u32) -> DeleteParams {
    DeleteParams {
        grace_period_seconds: Some(seconds),
        ..DeleteParams::default()
    }
}

/// Seconds from creation to the deletion deadline of a pod.
fn deadline_after_creation(p: &Pod) -> i64 {
    let created = p.metadata.creation_timestamp.as_ref().unwrap().0;
    let deadline = p.metadata.deletion_timestamp.as_ref().unwrap().0;
    deadline.as_second() - created.as_second()
}

// ---------------------------------------------------------------- events

fn core_event(ns: &str, involved_ns: Option<&str>) -> CoreEvent {
    let mut involved = json!({"kind": "PersistentVolume", "name": "pv1"});
    if let Some(n) = involved_ns {
        involved = json!({"kind": "PersistentVolumeClaim", "name": "c1", "namespace": n});
    }
    serde_json::from_value(json!({
        "metadata": {"name": "e1", "namespace": ns},
        "involvedObject": involved, "reason": "R", "message": "m", "type": "Normal",
    }))
    .unwrap()
}

fn new_event(ns: &str, regarding_ns: Option<&str>) -> NewEvent {
    let mut regarding = json!({"kind": "PersistentVolume", "name": "pv1"});
    if let Some(n) = regarding_ns {
        regarding = json!({"kind": "PersistentVolumeClaim", "name": "c1", "namespace": n});
    }
    serde_json::from_value(json!({
        "metadata": {"name": "pv1.1", "namespace": ns},
        "eventTime": "2021-01-01T00:00:00.000000Z", "regarding": regarding,
        "reason": "Provisioning", "action": "Provision", "note": "n", "type": "Normal",
        "reportingController": "persistentvolume-controller", "reportingInstance": "host-1",
    }))
    .unwrap()
}

#[tokio::test]
async fn legacy_event_about_a_cluster_object_lives_in_default() {
    let mem = MemApi::new();
    let in_ns1: Api<CoreEvent> = Api::namespaced(mem.client(), "ns1");
    let err = in_ns1
        .create(&PostParams::default(), &core_event("ns1", None))
        .await
        .unwrap_err();
    let s = status(err);
    assert_eq!((s.code, s.reason.as_str()), (422, "Invalid"));
    assert_eq!(
        s.message,
        "Event \"e1\" is invalid: involvedObject.namespace: Invalid value: \"\": does not match event.namespace"
    );
    let details = s.details.unwrap();
    assert_eq!(
        (details.kind.as_str(), details.name.as_str()),
        ("Event", "e1")
    );
    assert_eq!(details.causes.len(), 1);
    assert_eq!(details.causes[0].field, "involvedObject.namespace");
    assert_eq!(details.causes[0].reason, "FieldValueInvalid");
    assert!(mem.list::<CoreEvent>().is_empty());

    let in_default: Api<CoreEvent> = Api::namespaced(mem.client(), "default");
    in_default
        .create(&PostParams::default(), &core_event("default", None))
        .await
        .unwrap();
    in_ns1
        .create(&PostParams::default(), &core_event("ns1", Some("ns1")))
        .await
        .unwrap();
    let err = in_ns1
        .create(&PostParams::default(), &core_event("ns1", Some("ns2")))
        .await
        .unwrap_err();
    assert!(status(err).message.contains("Invalid value: \"ns2\""));
}

#[tokio::test]
async fn new_event_about_a_cluster_object_lives_in_kube_system() {
    let mem = MemApi::new();
    for ns in ["default", "ns1"] {
        let events: Api<NewEvent> = Api::namespaced(mem.client(), ns);
        let err = events
            .create(&PostParams::default(), &new_event(ns, None))
            .await
            .unwrap_err();
        assert_eq!(
            status(err).message,
            "Event \"pv1.1\" is invalid: involvedObject.namespace: Invalid value: \"\": does not match event.namespace"
        );
    }
    let system: Api<NewEvent> = Api::namespaced(mem.client(), "kube-system");
    system
        .create(&PostParams::default(), &new_event("kube-system", None))
        .await
        .unwrap();
    let ns1: Api<NewEvent> = Api::namespaced(mem.client(), "ns1");
    ns1.create(&PostParams::default(), &new_event("ns1", Some("ns1")))
        .await
        .unwrap();
    assert_eq!(mem.list::<NewEvent>().len(), 2);
}

#[tokio::test]
async fn new_event_needs_reporter_action_reason_and_short_note() {
    let mem = MemApi::new();
    let events: Api<NewEvent> = Api::namespaced(mem.client(), "ns1");
    let mut ev = new_event("ns1", Some("ns1"));
    ev.reporting_controller = None;
    ev.action = None;
    ev.note = Some("x".repeat(1025));
    let s = status(
        events
            .create(&PostParams::default(), &ev)
            .await
            .unwrap_err(),
    );
    assert_eq!(s.code, 422);
    let fields: Vec<(String, String)> = s
        .details
        .unwrap()
        .causes
        .into_iter()
        .map(|c| (c.field, c.message))
        .collect();
    assert_eq!(
        fields[0],
        ("reportingController".into(), "Required value".into())
    );
    assert!(fields.contains(&("action".into(), "Required value".into())));
    assert!(fields.contains(&(
        "message".into(),
        "Invalid value: \"\": can have at most 1024 characters".into()
    )));
    assert!(
        s.message
            .starts_with("Event \"pv1.1\" is invalid: [reportingController: Required value, ")
    );

    let mut odd = new_event("ns1", Some("ns1"));
    odd.type_ = Some("Odd".into());
    odd.deprecated_count = Some(2);
    let s = status(
        events
            .create(&PostParams::default(), &odd)
            .await
            .unwrap_err(),
    );
    assert_eq!(
        s.message,
        "Event \"pv1.1\" is invalid: [type: Invalid value: \"\": has invalid value: Odd, count: Invalid value: \"\": needs to be unset]"
    );
    assert!(mem.list::<NewEvent>().is_empty());
}

#[tokio::test]
async fn event_updates_are_held_to_the_legacy_rules() {
    let mem = MemApi::new();
    let events: Api<NewEvent> = Api::namespaced(mem.client(), "ns1");
    events
        .create(&PostParams::default(), &new_event("ns1", Some("ns1")))
        .await
        .unwrap();
    // A series update, as a recorder sends it, passes.
    let series = json!({"series": {"count": 2, "lastObservedTime": "2021-01-01T00:01:00.000000Z"}});
    events
        .patch("pv1.1", &PatchParams::default(), &merge(series))
        .await
        .unwrap();
    // An event with eventTime about a cluster-scoped object belongs in kube-system.
    let moved = json!({"regarding": {"namespace": null}});
    let err = events
        .patch("pv1.1", &PatchParams::default(), &merge(moved))
        .await
        .unwrap_err();
    assert_eq!(code(err), 422);
    let err = events
        .patch(
            "pv1.1",
            &PatchParams::default(),
            &merge(json!({"reportingController": null})),
        )
        .await
        .unwrap_err();
    assert_eq!(reason(&err), "Invalid");

    let core: Api<CoreEvent> = Api::namespaced(mem.client(), "default");
    core.create(&PostParams::default(), &core_event("default", None))
        .await
        .unwrap();
    let err = core
        .patch(
            "e1",
            &PatchParams::default(),
            &merge(json!({"involvedObject": {"namespace": "ns1"}})),
        )
        .await
        .unwrap_err();
    assert_eq!(code(err), 422);
    let stored = mem.get::<CoreEvent>(Some("default"), "e1").unwrap();
    assert_eq!(stored.involved_object.namespace, None);
}

// ---------------------------------------------------------------- pods

#[tokio::test]
async fn a_scheduled_pod_lingers_until_its_kubelet_confirms() {
    let mem = MemApi::new();
    let pods: Api<Pod> = Api::namespaced(mem.client(), "ns1");
    pods.create(&PostParams::default(), &pod("p", Some("node1")))
        .await
        .unwrap();
    let mut watch = watch_pods(&mem).await;

    let deleting = pods
        .delete("p", &DeleteParams::default())
        .await
        .unwrap()
        .left()
        .unwrap();
    assert_eq!(deleting.metadata.deletion_grace_period_seconds, Some(30));
    let deadline = deadline_after_creation(&deleting);
    assert!((29..=31).contains(&deadline), "{deadline}");
    assert_eq!(
        watch.next().await.unwrap(),
        ("MODIFIED".into(), "p".into(), true, Some(30))
    );
    assert_eq!(pods.get("p").await.unwrap(), deleting);

    // Deleting again without a shorter period changes nothing.
    let rv = mem.resource_version();
    pods.delete("p", &DeleteParams::default()).await.unwrap();
    pods.delete("p", &grace(45)).await.unwrap();
    assert_eq!(mem.resource_version(), rv);

    // The kubelet's delete with grace 0 removes it.
    pods.delete("p", &grace(0)).await.unwrap();
    assert_eq!(
        watch.next().await.unwrap(),
        ("MODIFIED".into(), "p".into(), true, Some(0))
    );
    assert_eq!(
        watch.next().await.unwrap(),
        ("DELETED".into(), "p".into(), true, Some(0))
    );
    assert_eq!(code(pods.get("p").await.unwrap_err()), 404);
}

#[tokio::test]
async fn grace_period_from_options_then_spec_and_it_only_shortens() {
    let mem = MemApi::new();
    let pods: Api<Pod> = Api::namespaced(mem.client(), "ns1");
    let mut short = pod("short", Some("node1"));
    short
        .spec
        .as_mut()
        .unwrap()
        .termination_grace_period_seconds = Some(5);
    pods.create(&PostParams::default(), &short).await.unwrap();
    let p = pods
        .delete("short", &DeleteParams::default())
        .await
        .unwrap()
        .left()
        .unwrap();
    assert_eq!(p.metadata.deletion_grace_period_seconds, Some(5));

    pods.create(&PostParams::default(), &pod("long", Some("node1")))
        .await
        .unwrap();
    let first = pods
        .delete("long", &grace(60))
        .await
        .unwrap()
        .left()
        .unwrap();
    assert_eq!(first.metadata.deletion_grace_period_seconds, Some(60));
    let shorter = pods
        .delete("long", &grace(10))
        .await
        .unwrap()
        .left()
        .unwrap();
    assert_eq!(shorter.metadata.deletion_grace_period_seconds, Some(10));
    assert_eq!(
        deadline_after_creation(&first) - deadline_after_creation(&shorter),
        50
    );
    // A status write from the kubelet does not end the grace period.
    pods.patch_status(
        "long",
        &PatchParams::default(),
        &merge(json!({"status": {"phase": "Running"}})),
    )
    .await
    .unwrap();
    assert!(pods.get("long").await.is_ok());
}

#[tokio::test]
async fn unscheduled_and_finished_pods_are_deleted_at_once() {
    let mem = MemApi::new();
    let pods: Api<Pod> = Api::namespaced(mem.client(), "ns1");
    pods.create(&PostParams::default(), &pod("pending", None))
        .await
        .unwrap();
    let mut done = pod("done", Some("node1"));
    done.status = Some(serde_json::from_value(json!({"phase": "Succeeded"})).unwrap());
    mem.create(&done).unwrap();
    let mut watch = watch_pods(&mem).await;

    pods.delete("pending", &DeleteParams::default())
        .await
        .unwrap();
    // As on a real server: the deletion is written (grace 0), then removed.
    assert_eq!(
        watch.next().await.unwrap(),
        ("MODIFIED".into(), "pending".into(), true, Some(0))
    );
    assert_eq!(
        watch.next().await.unwrap(),
        ("DELETED".into(), "pending".into(), true, Some(0))
    );
    pods.delete("done", &grace(30)).await.unwrap();
    assert_eq!(watch.next().await.unwrap().0, "MODIFIED");
    assert_eq!(watch.next().await.unwrap().0, "DELETED");
    assert!(mem.list::<Pod>().is_empty());
}

#[tokio::test]
async fn finalizers_hold_pods_like_any_object() {
    let mem = MemApi::new();
    let pods: Api<Pod> = Api::namespaced(mem.client(), "ns1");
    let mut held = pod("held", None);
    held.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    pods.create(&PostParams::default(), &held).await.unwrap();
    let p = pods
        .delete("held", &grace(0))
        .await
        .unwrap()
        .left()
        .unwrap();
    assert!(p.metadata.deletion_timestamp.is_some());
    assert_eq!(p.metadata.deletion_grace_period_seconds, Some(0));
    assert!(pods.get("held").await.is_ok());
    pods.patch(
        "held",
        &PatchParams::default(),
        &merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    assert_eq!(code(pods.get("held").await.unwrap_err()), 404);

    // On a node: the finalizer gone, the pod still waits for its kubelet.
    let mut scheduled = pod("scheduled", Some("node1"));
    scheduled.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    pods.create(&PostParams::default(), &scheduled)
        .await
        .unwrap();
    pods.delete("scheduled", &DeleteParams::default())
        .await
        .unwrap();
    pods.patch(
        "scheduled",
        &PatchParams::default(),
        &merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    assert!(pods.get("scheduled").await.is_ok());
    assert!(mem.remove::<Pod>(Some("ns1"), "scheduled"));
    assert!(mem.list::<Pod>().is_empty());
}

#[tokio::test]
async fn grace_period_may_come_as_a_query_parameter() {
    let mem = MemApi::new();
    let pods: Api<Pod> = Api::namespaced(mem.client(), "ns1");
    pods.create(&PostParams::default(), &pod("p", Some("node1")))
        .await
        .unwrap();
    let req = http::Request::builder()
        .method("DELETE")
        .uri("/api/v1/namespaces/ns1/pods/p?gracePeriodSeconds=7")
        .body(kube::client::Body::empty())
        .unwrap();
    let resp = mem.service().oneshot(req).await.unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    let p = pods.get("p").await.unwrap();
    assert_eq!(p.metadata.deletion_grace_period_seconds, Some(7));
}

// ---------------------------------------------------------------- volumes and claims

#[tokio::test]
async fn claim_volume_name_is_set_once() {
    let mem = MemApi::new();
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(mem.client(), "ns1");
    claims
        .create(&PostParams::default(), &pvc("ns1", "c1", "1Gi"))
        .await
        .unwrap();
    let bind = |v: &str| merge(json!({"spec": {"volumeName": v}}));
    let bound = claims
        .patch("c1", &PatchParams::default(), &bind("pv1"))
        .await
        .unwrap();
    assert_eq!(
        bound.spec.as_ref().unwrap().volume_name.as_deref(),
        Some("pv1")
    );

    let s = status(
        claims
            .patch("c1", &PatchParams::default(), &bind("pv2"))
            .await
            .unwrap_err(),
    );
    assert_eq!((s.code, s.reason.as_str()), (422, "Invalid"));
    assert_eq!(
        s.message,
        "PersistentVolumeClaim \"c1\" is invalid: spec: Forbidden: spec is immutable after creation except resources.requests for bound claims"
    );
    assert_eq!(s.details.unwrap().causes[0].reason, "FieldValueForbidden");
    let mut unbind = bound.clone();
    unbind.spec.as_mut().unwrap().volume_name = None;
    let err = claims
        .replace("c1", &PostParams::default(), &unbind)
        .await
        .unwrap_err();
    assert_eq!(code(err), 422);
    assert_eq!(
        mem.get::<PersistentVolumeClaim>(Some("ns1"), "c1").unwrap(),
        bound
    );
    // Metadata still changes.
    claims
        .patch(
            "c1",
            &PatchParams::default(),
            &merge(json!({"metadata": {"annotations": {"a": "b"}}})),
        )
        .await
        .unwrap();
}

#[tokio::test]
async fn claim_spec_is_immutable_but_a_bound_claim_may_grow() {
    let mem = MemApi::new();
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(mem.client(), "ns1");
    let mut c = pvc("ns1", "c1", "1Gi");
    c.spec.as_mut().unwrap().storage_class_name = Some("gold".into());
    claims.create(&PostParams::default(), &c).await.unwrap();
    let size = |q: &str| merge(json!({"spec": {"resources": {"requests": {"storage": q}}}}));
    let modes = merge(json!({"spec": {"accessModes": ["ReadWriteMany"]}}));
    assert_eq!(
        code(
            claims
                .patch("c1", &PatchParams::default(), &modes)
                .await
                .unwrap_err()
        ),
        422
    );
    // Pending: no growth.
    assert_eq!(
        code(
            claims
                .patch("c1", &PatchParams::default(), &size("2Gi"))
                .await
                .unwrap_err()
        ),
        422
    );
    claims
        .patch_status(
            "c1",
            &PatchParams::default(),
            &merge(json!({"status": {"phase": "Bound"}})),
        )
        .await
        .unwrap();
    // Bound, but the class does not allow expansion: the admission plugin says no.
    let s = status(
        claims
            .patch("c1", &PatchParams::default(), &size("2Gi"))
            .await
            .unwrap_err(),
    );
    assert_eq!((s.code, s.reason.as_str()), (403, "Forbidden"));
    assert_eq!(
        s.message,
        "persistentvolumeclaims \"c1\" is forbidden: only dynamically provisioned pvc can be resized and the storageclass that provisions the pvc must support resize"
    );
    let gold: StorageClass = serde_json::from_value(json!({
        "metadata": {"name": "gold"}, "provisioner": "x", "allowVolumeExpansion": true
    }))
    .unwrap();
    mem.create(&gold).unwrap();
    let grown = claims
        .patch("c1", &PatchParams::default(), &size("2Gi"))
        .await
        .unwrap();
    let requests = grown.spec.unwrap().resources.unwrap().requests.unwrap();
    assert_eq!(requests["storage"].0, "2Gi");
    let s = status(
        claims
            .patch("c1", &PatchParams::default(), &size("1Gi"))
            .await
            .unwrap_err(),
    );
    assert_eq!(
        s.message,
        "PersistentVolumeClaim \"c1\" is invalid: spec.resources.requests.storage: Forbidden: field can not be less than previous value"
    );
}

#[tokio::test]
async fn volume_source_is_immutable_its_claim_ref_is_not() {
    let mem = MemApi::new();
    let pvs: Api<PersistentVolume> = Api::all(mem.client());
    pvs.create(&PostParams::default(), &pv("pv1", "1Gi"))
        .await
        .unwrap();
    let claim_ref = json!({"spec": {"claimRef": {"namespace": "ns1", "name": "c1", "uid": "u1"}}});
    pvs.patch("pv1", &PatchParams::default(), &merge(claim_ref))
        .await
        .unwrap();
    pvs.patch(
        "pv1",
        &PatchParams::default(),
        &merge(json!({"spec": {"claimRef": null}})),
    )
    .await
    .unwrap();
    let s = status(
        pvs.patch(
            "pv1",
            &PatchParams::default(),
            &merge(json!({"spec": {"nfs": {"path": "/elsewhere"}}})),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(
        s.message,
        "PersistentVolume \"pv1\" is invalid: spec.persistentvolumesource: Forbidden: spec.persistentvolumesource is immutable after creation"
    );
    let s = status(
        pvs.patch(
            "pv1",
            &PatchParams::default(),
            &merge(json!({"spec": {"volumeMode": "Block"}})),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(
        s.message,
        "PersistentVolume \"pv1\" is invalid: volumeMode: Invalid value: \"Block\": field is immutable"
    );
    // The test levers are not validated.
    let mut moved = mem.get::<PersistentVolume>(None, "pv1").unwrap();
    moved.spec.as_mut().unwrap().nfs.as_mut().unwrap().path = "/elsewhere".into();
    mem.put(&moved).unwrap();
}

// ---------------------------------------------------------------- admission

#[tokio::test]
async fn protection_finalizers_are_added_on_create_when_configured() {
    let strict = MemApi::with_config(MemApiConfig {
        protection_finalizers: true,
        ..MemApiConfig::default()
    });
    let pvs: Api<PersistentVolume> = Api::all(strict.client());
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(strict.client(), "ns1");
    let v = pvs
        .create(&PostParams::default(), &pv("pv1", "1Gi"))
        .await
        .unwrap();
    assert_eq!(v.finalizers(), ["kubernetes.io/pv-protection"]);
    let mut c = pvc("ns1", "c1", "1Gi");
    c.metadata.finalizers = Some(vec![
        "example.com/other".into(),
        "kubernetes.io/pvc-protection".into(),
    ]);
    let c = claims.create(&PostParams::default(), &c).await.unwrap();
    assert_eq!(
        c.finalizers(),
        ["example.com/other", "kubernetes.io/pvc-protection"]
    );
    let c2 = claims
        .create(&PostParams::default(), &pvc("ns1", "c2", "1Gi"))
        .await
        .unwrap();
    assert_eq!(c2.finalizers(), ["kubernetes.io/pvc-protection"]);
    // So a deleted claim lingers until the finalizer is removed.
    claims.delete("c2", &DeleteParams::default()).await.unwrap();
    assert!(
        claims
            .get("c2")
            .await
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_some()
    );
    // Seeds are stored as written; updates add nothing.
    let seeded = strict.create(&pv("seeded", "1Gi")).unwrap();
    assert!(seeded.finalizers().is_empty());
    let updated = pvs
        .patch(
            "seeded",
            &PatchParams::default(),
            &merge(json!({"metadata": {"labels": {"a": "b"}}})),
        )
        .await
        .unwrap();
    assert!(updated.finalizers().is_empty());

    let lax = MemApi::new();
    let pvs: Api<PersistentVolume> = Api::all(lax.client());
    let v = pvs
        .create(&PostParams::default(), &pv("pv1", "1Gi"))
        .await
        .unwrap();
    assert!(v.finalizers().is_empty());
}

// ---------------------------------------------------------------- status strategy

#[tokio::test]
async fn status_writes_keep_metadata_changes_and_the_stored_spec() {
    let mem = MemApi::new();
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(mem.client(), "ns1");
    let mut c = pvc("ns1", "c1", "1Gi");
    c.metadata.finalizers = Some(vec!["kubernetes.io/pvc-protection".into()]);
    let created = claims.create(&PostParams::default(), &c).await.unwrap();

    let mut s = created.clone();
    s.metadata.labels = Some([("via".to_string(), "status".to_string())].into());
    s.metadata.finalizers = None;
    s.spec.as_mut().unwrap().volume_name = Some("ignored".into());
    s.status = Some(serde_json::from_value(json!({"phase": "Bound"})).unwrap());
    let s = claims
        .replace_status("c1", &PostParams::default(), &s)
        .await
        .unwrap();
    assert_eq!(s.labels().get("via").map(String::as_str), Some("status"));
    assert!(s.finalizers().is_empty());
    assert_eq!(s.spec.as_ref().unwrap().volume_name, None);
    assert_eq!(s.status.unwrap().phase.as_deref(), Some("Bound"));

    // A pod's status write keeps the stored ownerReferences.
    let pods: Api<Pod> = Api::namespaced(mem.client(), "ns1");
    let mut p = pod("p", None);
    p.metadata.owner_references = Some(vec![
        serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Node", "name": "n", "uid": "u"
        }))
        .unwrap(),
    ]);
    pods.create(&PostParams::default(), &p).await.unwrap();
    let patch = json!({
        "metadata": {"ownerReferences": null, "annotations": {"a": "b"}},
        "spec": {"nodeName": "ignored"},
        "status": {"phase": "Running"},
    });
    let p = pods
        .patch_status("p", &PatchParams::default(), &merge(patch))
        .await
        .unwrap();
    assert_eq!(p.owner_references().len(), 1);
    assert_eq!(p.annotations().get("a").map(String::as_str), Some("b"));
    assert_eq!(p.spec.unwrap().node_name, None);
    assert_eq!(p.status.unwrap().phase.as_deref(), Some("Running"));
}

/// A request body longer than kube-apiserver's limit (3 MiB) is refused
/// with its 413, by the declared length or as it is read; one within it is
/// served. Before, memapi read bodies of any length.
#[tokio::test]
async fn a_body_over_the_servers_limit_is_refused_with_a_413() {
    let mem = MemApi::new();
    let post = |body: Vec<u8>, declared: bool| {
        let mut request = http::Request::post("/api/v1/persistentvolumes")
            .header("content-type", "application/json");
        if declared {
            request = request.header("content-length", body.len());
        }
        let request = request.body(kube::client::Body::from(body)).unwrap();
        mem.service().oneshot(request)
    };
    let volume = |padding: usize| {
        serde_json::to_vec(&json!({
            "apiVersion": "v1", "kind": "PersistentVolume",
            "metadata": { "name": format!("v{padding}") },
            "spec": { "capacity": { "storage": "1Gi" }, "accessModes": ["ReadWriteOnce"],
                      "hostPath": { "path": "/tmp/x" },
                      "mountOptions": ["x".repeat(padding)] },
        }))
        .unwrap()
    };
    for declared in [true, false] {
        let answer = post(volume(memapi::MAX_BODY_BYTES), declared)
            .await
            .unwrap();
        assert_eq!(answer.status(), 413, "declared length: {declared}");
        let body = http_body_util::BodyExt::collect(answer.into_body())
            .await
            .unwrap()
            .to_bytes();
        let status: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(status["reason"], "RequestEntityTooLarge", "{status}");
        assert_eq!(
            status["message"],
            format!(
                "Request entity too large: limit is {}",
                memapi::MAX_BODY_BYTES
            )
        );
    }
    let answer = post(volume(1000), true).await.unwrap();
    assert_eq!(answer.status(), 201);
}

/// Sends a merge patch as a client whose `User-Agent` is `agent`;
/// returns the stored object.
async fn patch_as(mem: &MemApi, agent: &str, uri: &str, body: Value) -> Value {
    use http_body_util::BodyExt;
    let request = http::Request::patch(uri)
        .header("content-type", "application/merge-patch+json")
        .header("user-agent", agent)
        .body(kube::client::Body::from(body.to_string().into_bytes()))
        .unwrap();
    let response = mem.service().oneshot(request).await.unwrap();
    assert_eq!(response.status(), 200);
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    serde_json::from_slice(&bytes).unwrap()
}

/// The managers of `object`'s `Update` entries, each with its subresource
/// and whether it owns `status.phase`.
fn phase_owners(object: &Value) -> Vec<(String, String, bool)> {
    object["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|entry| entry["operation"] == "Update")
        .map(|entry| {
            (
                entry["manager"].as_str().unwrap().to_string(),
                entry["subresource"].as_str().unwrap_or("").to_string(),
                entry.pointer("/fieldsV1/f:status/f:phase").is_some(),
            )
        })
        .collect()
}

/// As the API server does, a write that is not a server-side apply is
/// recorded in `managedFields` as an `Update` of its field manager (the
/// `fieldManager` parameter, else the first word of the `User-Agent`),
/// which owns the fields it changed and takes them from the other
/// writers; a write that changes nothing records nothing.
#[tokio::test]
async fn updates_are_recorded_by_their_field_manager() {
    let mem = MemApi::new();
    mem.create(&pv("pv1", "1Gi")).unwrap();
    let uri = "/api/v1/persistentvolumes/pv1/status";
    let available = json!({"status": {"phase": "Available"}});
    let stored = patch_as(
        &mem,
        "kube-controller-manager/v1.20.2 (linux/amd64)",
        uri,
        available,
    )
    .await;
    assert_eq!(
        phase_owners(&stored),
        [(
            "kube-controller-manager".to_string(),
            "status".to_string(),
            true
        )]
    );
    let time = stored["metadata"]["managedFields"][0]["time"].clone();
    assert!(time.is_string(), "{stored}");
    let bound = json!({"status": {"phase": "Bound"}});
    let stored = patch_as(&mem, "pv-controller/0.1.0", uri, bound.clone()).await;
    assert_eq!(
        phase_owners(&stored),
        [("pv-controller".to_string(), "status".to_string(), true)],
        "the phase changed hands; kube-controller-manager owned nothing else"
    );
    let again = patch_as(&mem, "someone/1", uri, bound).await;
    assert_eq!(
        again["metadata"]["resourceVersion"], stored["metadata"]["resourceVersion"],
        "no change, no write"
    );
    let labelled = patch_as(
        &mem,
        "kubectl/v1.20",
        "/api/v1/persistentvolumes/pv1?fieldManager=kubectl-label",
        json!({"metadata": {"labels": {"tier": "gold"}}}),
    )
    .await;
    let managers: Vec<String> = phase_owners(&labelled)
        .into_iter()
        .map(|(m, _, _)| m)
        .collect();
    assert_eq!(managers, ["pv-controller", "kubectl-label"]);
}
