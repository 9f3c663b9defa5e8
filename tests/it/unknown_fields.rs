//! No write of the controller loses a field it does not know. memapi keeps
//! every field a write sends, standing in for an API server newer than the
//! controller's compiled types; volumes, claims and ResourceClaims carry
//! such fields in metadata, spec and status, go through bind, release,
//! recycle, the finalizer of a provisioned volume added and removed,
//! provisioning hand-off and a reservation's clean-up, and every such field
//! is still there, unchanged.

use std::time::Duration;

use k8s_names::{
    ANN_BIND_COMPLETED, ANN_BOUND_BY_CONTROLLER, ANN_DYNAMICALLY_PROVISIONED,
    ANN_STORAGE_PROVISIONER, FINALIZER_PV_CONTROLLER,
};
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod, PodStatus};
use k8s_openapi::api::resource::v1::ResourceClaim;
use memapi::MemApi;
use pv_controller::pv::{self, PluginConfig, RecyclerPodConfig, Settings, VolumePlugins};
use serde::Serialize;
use serde_json::{Value, json};
use testkit::*;

use crate::harness::{Running, recorded_events};
use crate::resourceclaim::harness::{self as claims, Row};
use crate::resourceclaim::objects::{
    ClaimExt, ENTRY, NAMESPACE, PodExt, claim as resource_claim, test_pod,
};

/// The fields no compiled type knows, by where they sit in an object.
fn unknown_fields() -> [(&'static str, Value); 3] {
    [
        ("/metadata/futureMetadata", json!("kept")),
        ("/spec/futureSpec", json!({"mode": "fast", "level": 3})),
        ("/status/futureStatus", json!(["a", "b"])),
    ]
}

/// Seeds `object` with the unknown fields added (its status kept).
fn seed_with_unknown_fields(api: &MemApi, object: &impl Serialize) {
    let mut value = serde_json::to_value(object).expect("encode");
    for (path, field) in unknown_fields() {
        let (parent, name) = path
            .trim_start_matches('/')
            .split_once('/')
            .expect("a path");
        let members = value.as_object_mut().expect("an object");
        members
            .entry(parent)
            .or_insert_with(|| json!({}))
            .as_object_mut()
            .expect("an object")
            .insert(name.to_string(), field);
    }
    api.load_yaml(&value.to_string()).expect("seed");
}

/// Every unknown field of the object `name` of `plural` is as seeded.
#[track_caller]
fn assert_unknown_fields_kept(api: &MemApi, plural: &str, namespace: Option<&str>, name: &str) {
    let stored = api
        .get_value(plural, namespace, name)
        .unwrap_or_else(|| panic!("{plural} {name} exists"));
    for (path, field) in unknown_fields() {
        assert_eq!(
            stored.pointer(path),
            Some(&field),
            "{plural} {name} lost {path}: {stored:#}"
        );
    }
}

fn volume_phase(api: &MemApi, name: &str) -> String {
    api.get::<PersistentVolume>(None, name)
        .and_then(|v| v.status?.phase)
        .unwrap_or_default()
}

/// Waits (paused time) until `done` holds, at most ten minutes.
async fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    for _ in 0..6_000 {
        if done() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("never: {what}");
}

/// The controller with the real hostPath recycler (a pod the test plays
/// kubelet for).
fn with_host_path_recycler() -> pv::Config {
    let recycler = RecyclerPodConfig {
        template: pv::default_recycler_template(),
        minimum_timeout: 60,
        timeout_increment: 30,
    };
    let config = PluginConfig {
        enable_host_path_provisioner: false,
        host_path_root: "/tmp/hostpath_pv".into(),
        host_path_recycler: recycler.clone(),
        nfs_recycler: recycler,
    };
    pv::Config {
        settings: Settings {
            plugins: VolumePlugins::from_config(&config),
            ..Settings::default()
        },
        ..pv::Config::default()
    }
}

#[tokio::test(start_paused = true)]
async fn bind_release_and_recycle_keep_every_unknown_field() {
    let api = MemApi::new();
    seed_with_unknown_fields(
        &api,
        &volume("pv-new", "1Gi")
            .policy("Recycle")
            .host_path("/tmp/recycle-me")
            .phase("Available")
            .build(),
    );
    seed_with_unknown_fields(&api, &claim("claim-new", "uid-new", "1Gi").build());
    let running = Running::binder_with(&api, with_host_path_recycler()).await;
    running.settle().await;
    assert_eq!(volume_phase(&api, "pv-new"), "Bound");
    assert_unknown_fields_kept(&api, "persistentvolumes", None, "pv-new");
    assert_unknown_fields_kept(&api, "persistentvolumeclaims", Some("default"), "claim-new");

    assert!(api.remove::<PersistentVolumeClaim>(Some("default"), "claim-new"));
    wait_until("a recycler pod", || {
        api.list::<Pod>()
            .iter()
            .any(|pod| pod.metadata.name.as_deref() == Some("recycler-for-pv-new"))
    })
    .await;
    assert_eq!(volume_phase(&api, "pv-new"), "Released");
    assert_unknown_fields_kept(&api, "persistentvolumes", None, "pv-new");
    let mut pod = api
        .get::<Pod>(Some("default"), "recycler-for-pv-new")
        .expect("pod");
    pod.status = Some(PodStatus {
        phase: Some("Succeeded".into()),
        ..PodStatus::default()
    });
    api.put(&pod).expect("the pod succeeded");
    wait_until("the volume Available", || {
        volume_phase(&api, "pv-new") == "Available"
    })
    .await;
    running.settle().await;
    assert!(
        recorded_events(&api)
            .iter()
            .any(|e| e.starts_with("Normal VolumeRecycled")),
        "recycled"
    );
    assert_unknown_fields_kept(&api, "persistentvolumes", None, "pv-new");
    running.stop().await;
}

#[tokio::test(start_paused = true)]
async fn the_provisioned_volumes_finalizer_added_and_removed_keeps_every_unknown_field() {
    let api = MemApi::new();
    let provisioned = |policy: &str| {
        volume("pvc-uid-p", "1Gi")
            .policy(policy)
            .bound_to("uid-p", "claim-p")
            .phase("Bound")
            .annotations(&[ANN_BOUND_BY_CONTROLLER])
            .annotation(ANN_DYNAMICALLY_PROVISIONED, "kubernetes.io/host-path")
            .host_path("/tmp/hostpath_pv/pvc-uid-p")
    };
    seed_with_unknown_fields(&api, &provisioned("Delete").build());
    seed_with_unknown_fields(
        &api,
        &claim("claim-p", "uid-p", "1Gi")
            .volume_name("pvc-uid-p")
            .phase("Bound")
            .annotations(&[ANN_BOUND_BY_CONTROLLER, ANN_BIND_COMPLETED])
            .build(),
    );
    let running = Running::binder(&api).await;
    running.settle().await;
    let finalizers = |api: &MemApi| {
        api.get::<PersistentVolume>(None, "pvc-uid-p")
            .and_then(|v| v.metadata.finalizers)
            .unwrap_or_default()
    };
    assert_eq!(finalizers(&api), vec![FINALIZER_PV_CONTROLLER.to_string()]);
    assert_unknown_fields_kept(&api, "persistentvolumes", None, "pvc-uid-p");

    // Retain, as a user patches it: the volume no longer needs the
    // controller's finalizer.
    kube::Api::<PersistentVolume>::all(api.client())
        .patch(
            "pvc-uid-p",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({"spec": {"persistentVolumeReclaimPolicy": "Retain"}})),
        )
        .await
        .expect("policy changed");
    running.settle().await;
    assert_eq!(finalizers(&api), Vec::<String>::new());
    assert_unknown_fields_kept(&api, "persistentvolumes", None, "pvc-uid-p");
    assert_unknown_fields_kept(&api, "persistentvolumeclaims", Some("default"), "claim-p");
    running.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_claim_handed_to_an_external_provisioner_keeps_every_unknown_field() {
    let api = MemApi::new();
    api.create(&storage_class("external", "example.com/nfs", "Immediate"))
        .expect("seed");
    seed_with_unknown_fields(
        &api,
        &claim("claim-x", "uid-x", "5Gi").class("external").build(),
    );
    let running = Running::binder(&api).await;
    running.settle().await;
    let handed = api
        .get::<PersistentVolumeClaim>(Some("default"), "claim-x")
        .expect("claim");
    assert_eq!(
        handed
            .metadata
            .annotations
            .unwrap_or_default()
            .get(ANN_STORAGE_PROVISIONER)
            .map(String::as_str),
        Some("example.com/nfs"),
        "handed to the provisioner"
    );
    assert_unknown_fields_kept(&api, "persistentvolumeclaims", Some("default"), "claim-x");
    running.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_resource_claims_reservation_cleared_keeps_every_unknown_field() {
    let running_pod = test_pod()
        .named_claim(ENTRY, "user-claim")
        .scheduled()
        .phase("Running");
    let api = claims::seeded(&Row {
        pods: vec![running_pod.clone()],
        ..Row::default()
    });
    seed_with_unknown_fields(
        &api,
        &resource_claim("user-claim", NAMESPACE, None)
            .allocated()
            .structured()
            .reserved_for(&running_pod),
    );
    let running = claims::Running::start(&api, claims::claims_only(Default::default())).await;
    running.settle().await;
    api.put(&running_pod.phase("Succeeded")).expect("pod done");
    running.settle().await;
    running.stop().await;

    let name = "user-claim";
    let claim = api
        .get::<ResourceClaim>(Some(NAMESPACE), name)
        .expect("a claim the pod does not own stays");
    assert_eq!(
        claim
            .status
            .and_then(|s| s.reserved_for)
            .unwrap_or_default(),
        Vec::new(),
        "the done pod's reservation is gone"
    );
    assert_unknown_fields_kept(&api, "resourceclaims", Some(NAMESPACE), name);
}
