//! memapi's Rust-side levers: put and remove notify watchers, typed
//! get/list, separate core and events.k8s.io events, leases.

use crate::support::{pv, pvc};
use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Event as CoreEvent, PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::events::v1::Event as NewEvent;
use kube::ResourceExt;
use kube::api::{Api, PostParams, WatchEvent, WatchParams};
use memapi::{ChangeType, MemApi, Reactor, Verb};
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

#[tokio::test]
async fn an_observer_sees_every_change_in_order_whatever_the_faults() {
    let mem = MemApi::new();
    let before = mem.create(&pv("before", "1Gi")).unwrap();
    let mut observer = mem.observe::<PersistentVolume>().unwrap();
    let pvs: Api<PersistentVolume> = Api::all(mem.client());
    // Faults that break every API watch and expire every version.
    mem.add_reactor(
        Reactor::on(Verb::Watch, "persistentvolumes")
            .error(500)
            .always(),
    );
    pvs.create(&PostParams::default(), &pv("a", "1Gi"))
        .await
        .unwrap();
    mem.compact();
    mem.cut_watches();
    let mut labelled = before.clone();
    labelled.metadata.labels = Some([("x".to_string(), "y".to_string())].into());
    mem.put(&labelled).unwrap();
    assert!(mem.remove::<PersistentVolume>(None, "a"));
    mem.create(&pvc("ns", "c", "1Gi")).unwrap();

    let seen: Vec<(ChangeType, String, u64)> = observer
        .drain()
        .into_iter()
        .map(|o| (o.change, o.object.name_any(), o.resource_version))
        .collect();
    let kinds: Vec<(ChangeType, &str)> = seen.iter().map(|(c, n, _)| (*c, n.as_str())).collect();
    assert_eq!(
        kinds,
        vec![
            (ChangeType::Added, "a"),
            (ChangeType::Modified, "before"),
            (ChangeType::Deleted, "a"),
        ],
        "only volumes, none from before the observer"
    );
    assert!(seen.windows(2).all(|w| w[0].2 < w[1].2), "{seen:?}");
    assert_eq!(seen[2].2 + 1, mem.resource_version(), "the claim came last");
    assert!(observer.drain().is_empty());
}

#[tokio::test]
async fn delete_lever_honours_finalizers_like_a_delete_request() {
    let mem = MemApi::new();
    let mut held = pv("held", "1Gi");
    held.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    mem.create(&held).unwrap();
    mem.create(&pv("free", "1Gi")).unwrap();
    mem.add_reactor(Reactor::any().error(500).always());

    let answer: PersistentVolume = mem.delete(None, "held").unwrap();
    assert!(answer.metadata.deletion_timestamp.is_some());
    let stored = mem.get::<PersistentVolume>(None, "held").unwrap();
    assert!(
        stored.metadata.deletion_timestamp.is_some(),
        "held by its finalizer"
    );
    let _: PersistentVolume = mem.delete(None, "free").unwrap();
    assert!(mem.get::<PersistentVolume>(None, "free").is_none());
    assert!(mem.delete::<PersistentVolume>(None, "free").is_err());
    assert_eq!(mem.requests().total(), 0, "no request was made or counted");
}
