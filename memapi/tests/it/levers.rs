//! memapi's Rust-side levers: put and remove notify watchers, typed
//! get/list, separate core and events.k8s.io events, leases.

use crate::support::{pv, pvc};
use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Event as CoreEvent, PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::events::v1::Event as NewEvent;
use kube::ResourceExt;
use kube::api::{Api, PostParams, WatchEvent, WatchParams};
use memapi::MemApi;
use serde_json::json;

#[tokio::test]
async fn put_and_remove_notify_watchers() {
    let mem = MemApi::new();
    let mut claim = pvc("ns1", "c1", "1Gi");
    claim.metadata.finalizers = Some(vec!["kubernetes.io/pvc-protection".into()]);
    let created = mem.create(&claim).unwrap();
    let claims: Api<PersistentVolumeClaim> = Api::all(mem.client());
    let from = mem.resource_version().to_string();
    let mut stream = claims
        .watch(&WatchParams::default(), &from)
        .await
        .unwrap()
        .boxed();

    let mut bound = created.clone();
    bound.metadata.resource_version = Some("1".into());
    bound.spec.as_mut().unwrap().volume_name = Some("pv1".into());
    bound.status = Some(serde_json::from_value(json!({"phase": "Bound"})).unwrap());
    let stored = mem.put(&bound).unwrap();
    assert_eq!(stored.metadata.uid, created.metadata.uid);
    assert_eq!(stored.status.unwrap().phase.as_deref(), Some("Bound"));
    match stream.next().await.unwrap().unwrap() {
        WatchEvent::Modified(o) => assert_eq!(o.spec.unwrap().volume_name.as_deref(), Some("pv1")),
        other => panic!("{other:?}"),
    }
    // An identical put is a no-op.
    let rv = mem.resource_version();
    mem.put(&bound).unwrap();
    assert_eq!(mem.resource_version(), rv);

    assert!(mem.remove::<PersistentVolumeClaim>(Some("ns1"), "c1"));
    assert!(!mem.remove::<PersistentVolumeClaim>(Some("ns1"), "c1"));
    match stream.next().await.unwrap().unwrap() {
        WatchEvent::Deleted(o) => assert_eq!(o.name_any(), "c1"),
        other => panic!("{other:?}"),
    }
    // put creates a missing object.
    mem.put(&pv("fresh", "1Gi")).unwrap();
    assert_eq!(mem.list::<PersistentVolume>().len(), 1);
}

#[tokio::test]
async fn core_and_new_events_are_separate_resources() {
    let mem = MemApi::new();
    let core: Api<CoreEvent> = Api::namespaced(mem.client(), "ns1");
    let new: Api<NewEvent> = Api::namespaced(mem.client(), "ns1");
    let ev: CoreEvent = serde_json::from_value(json!({
        "metadata": {"name": "e1"}, "involvedObject": {"name": "c1", "namespace": "ns1"}, "reason": "R"
    }))
    .unwrap();
    core.create(&PostParams::default(), &ev).await.unwrap();
    let ev2: NewEvent = serde_json::from_value(json!({
        "metadata": {"name": "e2"}, "eventTime": "2024-01-01T00:00:00.000000Z",
        "regarding": {"name": "c1", "namespace": "ns1"}, "reason": "R", "action": "A", "type": "Normal",
        "reportingController": "x", "reportingInstance": "y"
    }))
    .unwrap();
    new.create(&PostParams::default(), &ev2).await.unwrap();
    assert_eq!(mem.list::<CoreEvent>().len(), 1);
    assert_eq!(mem.list::<NewEvent>().len(), 1);
    assert!(mem.get::<NewEvent>(Some("ns1"), "e1").is_none());

    let leases: Api<Lease> = Api::namespaced(mem.client(), "kube-system");
    let lease: Lease = serde_json::from_value(json!({
        "metadata": {"name": "pv-controller"}, "spec": {"holderIdentity": "me"}
    }))
    .unwrap();
    leases.create(&PostParams::default(), &lease).await.unwrap();
    assert!(
        mem.get::<Lease>(Some("kube-system"), "pv-controller")
            .is_some()
    );
}
