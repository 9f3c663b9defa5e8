//! Whole-controller runs on the in-memory API server while the cluster
//! changes under it, as users and other controllers change it: deletions,
//! external provisioning, delayed binding and the default StorageClass.

use crate::harness::{Running, check_invariants, recorded_events};
use k8s_names::{
    ANN_BETA_STORAGE_PROVISIONER, ANN_BOUND_BY_CONTROLLER, ANN_DYNAMICALLY_PROVISIONED,
    ANN_STORAGE_PROVISIONER, FINALIZER_PV_PROTECTION, FINALIZER_PVC_PROTECTION,
};
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use memapi::MemApi;
use testkit::*;

fn volume_phase(api: &MemApi, name: &str) -> String {
    api.get::<PersistentVolume>(None, name)
        .and_then(|v| v.status?.phase)
        .unwrap_or_default()
}

fn claim_phase(api: &MemApi, name: &str) -> String {
    api.get::<PersistentVolumeClaim>(Some("default"), name)
        .and_then(|c| c.status?.phase)
        .unwrap_or_default()
}

#[tokio::test(start_paused = true)]
async fn deleting_a_bound_claim_releases_its_volume_and_deleting_a_volume_loses_its_claim() {
    let api = MemApi::new();
    api.create(&volume("volume-a", "1Gi").build())
        .expect("seed");
    api.create(&volume("volume-b", "1Gi").build())
        .expect("seed");
    api.create(&claim("claim-a", "uid-a", "1Gi").build())
        .expect("seed");
    api.create(&claim("claim-b", "uid-b", "1Gi").build())
        .expect("seed");
    let running = Running::binder(&api).await;
    running.settle().await;
    assert_eq!(claim_phase(&api, "claim-a"), "Bound");
    assert_eq!(claim_phase(&api, "claim-b"), "Bound");
    let volume_of = |claim: &str| {
        api.get::<PersistentVolumeClaim>(Some("default"), claim)
            .and_then(|c| c.spec?.volume_name)
            .expect("bound claim names a volume")
    };
    let (volume_a, volume_b) = (volume_of("claim-a"), volume_of("claim-b"));

    assert!(api.remove::<PersistentVolumeClaim>(Some("default"), "claim-a"));
    assert!(api.remove::<PersistentVolume>(None, &volume_b));
    running.settle().await;

    assert_eq!(
        volume_phase(&api, &volume_a),
        "Released",
        "Retain keeps the volume, Released"
    );
    assert_eq!(claim_phase(&api, "claim-b"), "Lost");
    let events = recorded_events(&api);
    assert!(
        events
            .iter()
            .any(|e| e.starts_with("Warning ClaimLost Bound claim has lost its PersistentVolume")),
        "{events:?}"
    );
    running.stop().await;
}

/// Deleted volumes and claims held by their protection finalizers (as on
/// every real cluster) are treated as upstream's binder treats them: a
/// Bound volume or claim being deleted stays Bound while the other side
/// lives, a volume being deleted is offered to no claim, and a claim
/// named by none gets nothing; once a claim is really gone, its volume is
/// released. The controller never touches a protection finalizer.
#[tokio::test(start_paused = true)]
async fn volumes_and_claims_held_by_their_protection_finalizers_keep_their_bindings() {
    let api = MemApi::new();
    for name in ["volume-a", "volume-b"] {
        api.create(
            &volume(name, "1Gi")
                .finalizers(&[FINALIZER_PV_PROTECTION])
                .build(),
        )
        .expect("seed");
    }
    for (name, uid) in [("claim-a", "uid-a"), ("claim-b", "uid-b")] {
        let mut c = claim(name, uid, "1Gi").build();
        c.metadata.finalizers = Some(vec![FINALIZER_PVC_PROTECTION.to_string()]);
        api.create(&c).expect("seed");
    }
    let running = Running::binder(&api).await;
    running.settle().await;
    assert_eq!(claim_phase(&api, "claim-a"), "Bound");
    assert_eq!(claim_phase(&api, "claim-b"), "Bound");
    let volume_of = |claim: &str| {
        api.get::<PersistentVolumeClaim>(Some("default"), claim)
            .and_then(|c| c.spec?.volume_name)
            .expect("bound claim names a volume")
    };
    let (volume_a, volume_b) = (volume_of("claim-a"), volume_of("claim-b"));

    // A user deletes claim-a's volume and claim-b; both stay, Terminating.
    api.delete::<PersistentVolume>(None, &volume_a)
        .expect("delete volume");
    api.delete::<PersistentVolumeClaim>(Some("default"), "claim-b")
        .expect("delete claim");
    // A volume deleted before any claim took it, and a claim that fits it.
    api.create(
        &volume("volume-c", "1Gi")
            .finalizers(&[FINALIZER_PV_PROTECTION])
            .build(),
    )
    .expect("seed");
    api.delete::<PersistentVolume>(None, "volume-c")
        .expect("delete volume");
    api.create(&claim("claim-c", "uid-c", "1Gi").build())
        .expect("seed");
    running.settle().await;
    assert_eq!(volume_phase(&api, &volume_a), "Bound");
    assert_eq!(claim_phase(&api, "claim-a"), "Bound");
    assert_eq!(volume_phase(&api, &volume_b), "Bound");
    assert_eq!(claim_phase(&api, "claim-b"), "Bound");
    assert_eq!(claim_phase(&api, "claim-c"), "Pending");
    let offered = api
        .get::<PersistentVolume>(None, "volume-c")
        .expect("held by its finalizer");
    assert!(offered.spec.and_then(|s| s.claim_ref).is_none());
    for name in [&volume_a, &volume_b, &"volume-c".to_string()] {
        let v = api.get::<PersistentVolume>(None, name).expect("volume");
        assert_eq!(
            v.metadata.finalizers,
            Some(vec![FINALIZER_PV_PROTECTION.to_string()]),
            "{name}"
        );
    }

    // The pvc-protection controller lets claim-b go: its volume is released.
    let mut terminating = api
        .get::<PersistentVolumeClaim>(Some("default"), "claim-b")
        .expect("held by its finalizer");
    assert_eq!(
        terminating.metadata.finalizers,
        Some(vec![FINALIZER_PVC_PROTECTION.to_string()])
    );
    terminating.metadata.finalizers = None;
    api.put(&terminating).expect("finalizer removed");
    running.settle().await;
    assert_eq!(volume_phase(&api, &volume_b), "Released");
    assert_eq!(claim_phase(&api, "claim-a"), "Bound");
    running.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_claim_handed_to_an_external_provisioner_binds_to_the_volume_it_creates() {
    let api = MemApi::new();
    api.create(&storage_class("external", "example.com/nfs", "Immediate"))
        .expect("seed");
    api.create(&claim("claim-x", "uid-x", "5Gi").class("external").build())
        .expect("seed");
    let running = Running::binder(&api).await;
    running.settle().await;

    let handed = api
        .get::<PersistentVolumeClaim>(Some("default"), "claim-x")
        .expect("claim");
    let annotations = handed.metadata.annotations.clone().unwrap_or_default();
    assert_eq!(
        annotations.get(ANN_STORAGE_PROVISIONER).map(String::as_str),
        Some("example.com/nfs")
    );
    assert_eq!(
        annotations
            .get(ANN_BETA_STORAGE_PROVISIONER)
            .map(String::as_str),
        Some("example.com/nfs")
    );
    assert_eq!(claim_phase(&api, "claim-x"), "Pending");
    assert!(recorded_events(&api).iter().any(|e| e.starts_with(
        "Normal ExternalProvisioning Waiting for a volume to be created either by the external provisioner 'example.com/nfs'"
    )));

    // The external provisioner creates a volume pre-bound to the claim.
    let provisioned = volume("pvc-uid-x", "5Gi")
        .class("external")
        .policy("Delete")
        .bound_to("uid-x", "claim-x")
        .annotations(&[ANN_BOUND_BY_CONTROLLER])
        .annotation(ANN_DYNAMICALLY_PROVISIONED, "example.com/nfs")
        .build();
    kube::Api::<PersistentVolume>::all(api.client())
        .create(&Default::default(), &provisioned)
        .await
        .expect("provisioner creates the volume");
    running.settle().await;

    assert_eq!(claim_phase(&api, "claim-x"), "Bound");
    assert_eq!(volume_phase(&api, "pvc-uid-x"), "Bound");
    assert_eq!(check_invariants(&api), Vec::<String>::new());
    running.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_delayed_binding_claim_waits_for_its_pod_and_binds_a_volume_the_scheduler_picked() {
    let api = MemApi::new();
    api.create(&storage_class(
        "local",
        "kubernetes.io/no-provisioner",
        "WaitForFirstConsumer",
    ))
    .expect("seed");
    api.create(&volume("volume-local", "1Gi").class("local").build())
        .expect("seed");
    api.create(&claim("claim-l", "uid-l", "1Gi").class("local").build())
        .expect("seed");
    let running = Running::binder(&api).await;
    running.settle().await;
    assert_eq!(claim_phase(&api, "claim-l"), "Pending");
    assert!(
        recorded_events(&api)
            .iter()
            .any(|e| e.starts_with("Normal WaitForFirstConsumer"))
    );

    api.create(&pod("web-0", &["claim-l"], "Pending", None))
        .expect("pod");
    running.settle().await;
    // The claim spent its event burst while it waited for a consumer.
    let scheduled = "Normal WaitForPodScheduled waiting for pod web-0 to be scheduled";
    assert!(
        running
            .wait_for_event(scheduled)
            .await
            .iter()
            .any(|e| e == scheduled)
    );
    assert_eq!(
        volume_phase(&api, "volume-local"),
        "Available",
        "never bound before scheduling"
    );

    // The scheduler binds: it sets the volume's claimRef (as upstream's
    // volume binder does); the controller completes the binding.
    let mut chosen = api
        .get::<PersistentVolume>(None, "volume-local")
        .expect("volume");
    chosen = VolumeBuilder(chosen)
        .bound_to("uid-l", "claim-l")
        .annotations(&[ANN_BOUND_BY_CONTROLLER])
        .build();
    kube::Api::<PersistentVolume>::all(api.client())
        .replace("volume-local", &Default::default(), &chosen)
        .await
        .expect("scheduler writes the claimRef");
    running.settle().await;
    assert_eq!(claim_phase(&api, "claim-l"), "Bound");
    assert_eq!(check_invariants(&api), Vec::<String>::new());
    running.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_claim_without_class_gets_the_default_class_once_one_exists() {
    let api = MemApi::new();
    api.create(&claim("claim-d", "uid-d", "1Gi").build())
        .expect("seed");
    let running = Running::binder(&api).await;
    running.settle().await;
    assert!(
        recorded_events(&api)
            .iter()
            .any(|e| e.starts_with("Normal FailedBinding"))
    );

    kube::Api::all(api.client())
        .create(
            &Default::default(),
            &default_class(storage_class("standard", "example.com/block", "Immediate")),
        )
        .await
        .expect("admin adds a default class");
    running.settle().await;

    let assigned = api
        .get::<PersistentVolumeClaim>(Some("default"), "claim-d")
        .expect("claim");
    assert_eq!(
        assigned.spec.and_then(|s| s.storage_class_name),
        Some("standard".to_string())
    );
    // The claim spent its event burst on FailedBinding while it had no class.
    assert!(
        running
            .wait_for_event("Normal ExternalProvisioning")
            .await
            .iter()
            .any(|e| e.starts_with("Normal ExternalProvisioning"))
    );
    running.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_claim_with_an_explicit_empty_class_keeps_it() {
    let api = MemApi::new();
    api.create(&default_class(storage_class(
        "standard",
        "example.com/block",
        "Immediate",
    )))
    .expect("seed");
    api.create(&claim("claim-e", "uid-e", "1Gi").class("").build())
        .expect("seed");
    let running = Running::binder(&api).await;
    running.settle().await;
    let kept = api
        .get::<PersistentVolumeClaim>(Some("default"), "claim-e")
        .expect("claim");
    assert_eq!(
        kept.spec.and_then(|s| s.storage_class_name),
        Some(String::new())
    );
    running.stop().await;
}

/// A claim deleted while the controller's watch was down, with the server's
/// history compacted, is seen only as missing after the relist: its volume
/// is still released.
#[tokio::test(start_paused = true)]
async fn a_deletion_seen_only_after_a_relist_releases_the_volume() {
    use memapi::{Reactor, Verb};
    use std::time::Duration;

    let api = MemApi::new();
    api.create(&volume("volume-r", "1Gi").phase("Available").build())
        .expect("seed");
    api.create(&claim("claim-r", "uid-r", "1Gi").build())
        .expect("seed");
    let running = Running::binder(&api).await;
    running.settle().await;
    assert_eq!(volume_phase(&api, "volume-r"), "Bound");

    // The next claim watch waits 10 minutes before it is served; the current
    // one ends after kube's 290 s watch timeout.
    api.add_reactor(
        Reactor::on(Verb::Watch, "persistentvolumeclaims").delay(Duration::from_secs(600)),
    );
    tokio::time::sleep(Duration::from_secs(300)).await;
    assert!(api.remove::<PersistentVolumeClaim>(Some("default"), "claim-r"));
    api.compact();
    tokio::time::sleep(Duration::from_secs(700)).await;
    running.settle().await;

    assert_eq!(volume_phase(&api, "volume-r"), "Released");
    running.stop().await;
}
