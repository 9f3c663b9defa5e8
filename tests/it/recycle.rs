//! The recycle scenarios: upstream's recycle table (set 6) and multi-sync
//! case (7-1) with the mock plugin, each row run as one direct sync and
//! with the whole controller until it settles; then the real recycler pod
//! (hostPath) against memapi with the test playing kubelet, including a
//! controller restart in the middle of a recycle.

use std::sync::Arc;
use std::time::Duration;

use crate::harness::{Call, binder_only, clients, recorded_events, row, run_table};
use crate::mock_plugin::MockConfig;
use k8s_names::ANN_BOUND_BY_CONTROLLER;
use k8s_openapi::api::core::v1::{
    Event as CoreEvent, ObjectReference, PersistentVolume, Pod, PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use memapi::{MemApi, Verb};
use pv_controller::pv;
use pv_controller::pv::PluginConfig;
use pv_controller::pv::RecyclerPodConfig;
use pv_controller::pv::Settings;
use pv_controller::pv::VolumePlugins;
use pv_controller::pv::default_recycler_template;
use testkit::*;

fn bound(name: &str, uid: &str, claim_name: &str) -> VolumeBuilder {
    volume(name, "1Gi")
        .bound_to(uid, claim_name)
        .phase("Bound")
        .policy("Recycle")
}

fn free(name: &str) -> VolumeBuilder {
    volume(name, "1Gi").phase("Available").policy("Recycle")
}

fn one_success() -> MockConfig {
    MockConfig::default().recycles(&[None])
}

/// Puts a volume back on the server as Available and unclaimed (and into
/// the controller's cache in direct mode).
fn make_available(api: &MemApi, controller: Option<&pv_controller::pv::Controller>, name: &str) {
    let stored = api.put(&free(name).build()).expect("put volume");
    if let Some(controller) = controller {
        controller
            .store()
            .offer_volume(Arc::new(stored))
            .expect("cache volume");
    }
}

#[tokio::test(start_paused = true)]
async fn set_6_recycle() {
    run_table(vec![
        row("6-1 successful recycle")
            .volumes(
                volumes([bound("volume6-1", "uid6-1", "claim6-1").annotations(&[ANN_BOUND_BY_CONTROLLER])]),
                volumes([free("volume6-1")]),
            )
            .plugin(one_success())
            .events(&["Normal VolumeRecycled"])
            .call(Call::SyncVolume),
        row("6-2 successful recycle with prebound volume")
            .volumes(
                volumes([bound("volume6-2", "uid6-2", "claim6-2")]),
                volumes([free("volume6-2").bound_to("", "claim6-2")]),
            )
            .plugin(one_success())
            .events(&["Normal VolumeRecycled"])
            .call(Call::SyncVolume),
        row("6-3 plugin not found")
            .volumes(
                volumes([bound("volume6-3", "uid6-3", "claim6-3")]),
                volumes([bound("volume6-3", "uid6-3", "claim6-3")
                    .phase("Failed")
                    .message("No recycler plugin found for the volume!")]),
            )
            .events(&["Warning VolumeFailedRecycle No recycler plugin found for the volume!"])
            .call(Call::SyncVolume),
        row("6-4 newRecycler returns error")
            .volumes(
                volumes([bound("volume6-4", "uid6-4", "claim6-4")]),
                volumes([bound("volume6-4", "uid6-4", "claim6-4")
                    .phase("Failed")
                    .message("Recycle failed: Mock plugin error: no recycleCalls configured")]),
            )
            .plugin(MockConfig::default())
            .events(&["Warning VolumeFailedRecycle"])
            .call(Call::SyncVolume),
        row("6-5 recycle returns error")
            .volumes(
                volumes([bound("volume6-5", "uid6-5", "claim6-5")]),
                volumes([bound("volume6-5", "uid6-5", "claim6-5")
                    .phase("Failed")
                    .message("Recycle failed: Mock recycle error")]),
            )
            .plugin(MockConfig::default().recycles(&[Some("Mock recycle error")]))
            .events(&["Warning VolumeFailedRecycle Recycle failed: Mock recycle error"])
            .call(Call::SyncVolume),
        row("6-6 volume is deleted before recycling")
            .volumes(volumes([bound("volume6-6", "uid6-6", "claim6-6")]), vec![])
            .plugin(MockConfig::default())
            .inject(|api, _| {
                api.remove::<PersistentVolume>(None, "volume6-6");
            })
            .call(Call::SyncVolume),
        row("6-7 volume is made available before recycling")
            .volumes(
                volumes([bound("volume6-7", "uid6-7", "claim6-7").annotations(&[ANN_BOUND_BY_CONTROLLER])]),
                volumes([free("volume6-7")]),
            )
            .plugin(MockConfig::default())
            .inject(|api, controller| make_available(api, controller, "volume6-7"))
            .call(Call::SyncVolume),
        row("6-8 prebound volume is made available before recycling")
            .volumes(volumes([bound("volume6-8", "uid6-8", "claim6-8")]), volumes([free("volume6-8")]))
            .plugin(MockConfig::default())
            .inject(|api, controller| make_available(api, controller, "volume6-8"))
            .call(Call::SyncVolume),
        row("6-9 prebound volume is recycled while the claim exists")
            .volumes(
                volumes([bound("volume6-9", "uid6-9", "claim6-9")]),
                volumes([free("volume6-9").bound_to("", "claim6-9")]),
            )
            .same_claims(claims([claim("claim6-9", "uid6-9-x", "10Gi")]))
            .plugin(one_success())
            .events(&["Normal VolumeRecycled"])
            .call(Call::SyncVolume)
            .settled_events(&["Normal VolumeRecycled", "Normal FailedBinding"]),
        row("6-10 unknown reclaim policy")
            .volumes(
                volumes([bound("volume6-10", "uid6-10", "claim6-10").policy("Unknown")]),
                volumes([bound("volume6-10", "uid6-10", "claim6-10")
                    .policy("Unknown")
                    .phase("Failed")
                    .message("Volume has unrecognized PersistentVolumeReclaimPolicy")]),
            )
            .events(&["Warning VolumeUnknownReclaimPolicy"])
            .call(Call::SyncVolume),
        row("6-11 used by running pod")
            .volumes(
                volumes([bound("volume6-11", "uid6-11", "claim6-11")]),
                volumes([bound("volume6-11", "uid6-11", "claim6-11").phase("Released")]),
            )
            .pods(vec![pod("runningPod6-11", &["claim6-11"], "Running", Some("node1"))])
            .plugin(one_success())
            .events(&["Normal VolumeFailedRecycle Volume is used by pods: default/runningPod6-11"])
            .call(Call::SyncVolume),
        row("6-12 used by pending pod")
            .volumes(
                volumes([bound("volume6-12", "uid6-12", "claim6-12")]),
                volumes([bound("volume6-12", "uid6-12", "claim6-12").phase("Released")]),
            )
            .pods(vec![
                pod("pendingPod6-12", &["claim6-12"], "Pending", None),
                pod("another6-12", &["claim6-12"], "Running", Some("node1")),
            ])
            .plugin(one_success())
            .events(&["Normal VolumeFailedRecycle Volume is used by pods: default/another6-12,default/pendingPod6-12"])
            .call(Call::SyncVolume),
        row("6-12-1 used by a deleting pod whose init container still runs")
            .volumes(
                volumes([bound("volume6-12-1", "uid6-12-1", "claim6-12-1")]),
                volumes([bound("volume6-12-1", "uid6-12-1", "claim6-12-1").phase("Released")]),
            )
            .pods(vec![deleting_pod_with_running_init_container("initPod6-12-1", &["claim6-12-1"])])
            .plugin(one_success())
            .events(&["Normal VolumeFailedRecycle Volume is used by pods: default/initPod6-12-1"])
            .call(Call::SyncVolume),
        row("6-13 used by completed pod")
            .volumes(volumes([bound("volume6-13", "uid6-13", "claim6-13")]), volumes([free("volume6-13").bound_to("", "claim6-13")]))
            .pods(vec![pod("completedPod6-13", &["claim6-13"], "Succeeded", Some("node1"))])
            .plugin(one_success())
            .events(&["Normal VolumeRecycled"])
            .call(Call::SyncVolume),
        row("6-14 seemingly used by running pod")
            .volumes(
                volumes([bound("volume6-14", "uid6-14", "claim6-14").annotations(&[ANN_BOUND_BY_CONTROLLER])]),
                volumes([free("volume6-14")]),
            )
            .same_claims(claims([claim("claim6-14", "uid6-14-x", "10Gi")]))
            .pods(vec![pod("runningPod6-14", &["claim6-14"], "Running", Some("node1"))])
            .plugin(one_success())
            .events(&["Normal VolumeRecycled"])
            .call(Call::SyncVolume)
            .settled_events(&["Normal VolumeRecycled", "Normal FailedBinding"]),
    ])
    .await;
}

#[tokio::test(start_paused = true)]
async fn set_7_recycle_retried_after_error() {
    run_table(vec![
        row("7-1 recycle returns error")
            .volumes(
                volumes([bound("volume7-1", "uid7-1", "claim7-1")
                    .annotations(&[ANN_BOUND_BY_CONTROLLER])]),
                volumes([bound("volume7-1", "uid7-1", "claim7-1")
                    .annotations(&[ANN_BOUND_BY_CONTROLLER])
                    .phase("Failed")
                    .message("Recycle failed: Mock recycle error")]),
            )
            .plugin(MockConfig::default().recycles(&[Some("Mock recycle error"), None]))
            .events(&["Warning VolumeFailedRecycle"])
            .call(Call::SyncVolume)
            .settles_with(|s| s.volume("volume7-1", |_| free("volume7-1")))
            .settled_events(&["Warning VolumeFailedRecycle", "Normal VolumeRecycled"]),
    ])
    .await;
}

const POD: &str = "recycler-for-host-volume";

/// A released hostPath volume with policy Recycle.
fn host_volume() -> PersistentVolume {
    bound("host-volume", "uid-h", "claim-h")
        .annotations(&[ANN_BOUND_BY_CONTROLLER])
        .phase("Released")
        .host_path("/tmp/recycle-me")
        .build()
}

/// The controller's configuration with the real hostPath and NFS plugins.
fn real_controller() -> pv::Config {
    let config = PluginConfig {
        enable_host_path_provisioner: false,
        host_path_root: "/tmp/hostpath_pv".into(),
        host_path_recycler: RecyclerPodConfig {
            template: default_recycler_template(),
            minimum_timeout: 60,
            timeout_increment: 30,
        },
        nfs_recycler: RecyclerPodConfig {
            template: default_recycler_template(),
            minimum_timeout: 300,
            timeout_increment: 30,
        },
    };
    pv::Config {
        settings: Settings {
            plugins: VolumePlugins::from_config(&config),
            ..Settings::default()
        },
        ..pv::Config::default()
    }
}

/// Starts the controller on `api` with `config`; returns the stop switch
/// and its task.
async fn start(
    api: &MemApi,
    config: pv::Config,
) -> (
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<Result<(), pv_controller::AppError>>,
) {
    let app = pv_controller::App::start(clients(api), binder_only(config))
        .await
        .expect("the process starts");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(app.run(async move {
        let _ = stopped.await;
    }));
    (stop, task)
}

/// Waits (paused time) until the recycler pod exists.
async fn wait_for_pod(api: &MemApi) -> Pod {
    for _ in 0..600 {
        if let Some(pod) = api.get::<Pod>(Some("default"), POD) {
            return pod;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("recycler pod never created");
}

/// Plays kubelet: the pod ends in `phase` (with `message`).
fn finish_pod(api: &MemApi, mut pod: Pod, phase: &str, message: Option<&str>) {
    pod.status = Some(PodStatus {
        phase: Some(phase.to_string()),
        message: message.map(str::to_string),
        ..Default::default()
    });
    api.put(&pod).expect("put pod status");
}

/// Waits until the volume reaches `phase`.
async fn wait_for_phase(api: &MemApi, phase: &str) -> PersistentVolume {
    for _ in 0..600 {
        let volume = api
            .get::<PersistentVolume>(None, "host-volume")
            .expect("volume");
        if volume.status.as_ref().and_then(|s| s.phase.as_deref()) == Some(phase) {
            return volume;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("volume never reached {phase}");
}

#[tokio::test(start_paused = true)]
async fn recycler_pod_success_relays_events_and_makes_the_volume_available() {
    let api = MemApi::new();
    api.create(&host_volume()).expect("seed");
    let (stop, task) = start(&api, real_controller()).await;
    let pod = wait_for_pod(&api).await;
    let spec = pod.spec.clone().expect("spec");
    assert_eq!(spec.active_deadline_seconds, Some(60));
    assert_eq!(
        spec.volumes
            .as_ref()
            .and_then(|v| v[0].host_path.as_ref())
            .map(|h| h.path.as_str()),
        Some("/tmp/recycle-me")
    );
    // The kubelet reports on the pod; the controller relays it to the volume.
    let event = CoreEvent {
        metadata: ObjectMeta {
            name: Some("recycler.1".to_string()),
            namespace: Some("default".to_string()),
            ..Default::default()
        },
        involved_object: ObjectReference {
            kind: Some("Pod".to_string()),
            name: Some(POD.to_string()),
            namespace: Some("default".to_string()),
            ..Default::default()
        },
        type_: Some("Normal".to_string()),
        reason: Some("Pulled".to_string()),
        message: Some("Container image pulled".to_string()),
        ..Default::default()
    };
    api.create(&event).expect("pod event");
    tokio::time::sleep(Duration::from_secs(1)).await;
    finish_pod(&api, pod, "Succeeded", None);
    let volume = wait_for_phase(&api, "Available").await;
    assert!(volume.spec.and_then(|s| s.claim_ref).is_none());
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        api.get::<Pod>(Some("default"), POD).is_none(),
        "pod deleted afterwards"
    );
    let events = recorded_events(&api);
    assert!(
        events
            .iter()
            .any(|e| e == "Normal RecyclerPod Recycler pod: Container image pulled"),
        "{events:?}"
    );
    assert!(
        events
            .iter()
            .any(|e| e.starts_with("Normal VolumeRecycled")),
        "{events:?}"
    );
    let _ = stop.send(());
    task.await.expect("join").expect("controller");
}

#[tokio::test(start_paused = true)]
async fn recycler_pod_failure_fails_the_volume_with_its_message() {
    let api = MemApi::new();
    api.create(&host_volume()).expect("seed");
    let (stop, task) = start(&api, real_controller()).await;
    let pod = wait_for_pod(&api).await;
    finish_pod(
        &api,
        pod,
        "Failed",
        Some("scrub failed: read-only file system"),
    );
    let volume = wait_for_phase(&api, "Failed").await;
    assert_eq!(
        volume.status.and_then(|s| s.message).as_deref(),
        Some("Recycle failed: scrub failed: read-only file system")
    );
    let _ = stop.send(());
    task.await.expect("join").expect("controller");
}

#[tokio::test(start_paused = true)]
async fn restarted_controller_waits_for_the_recycler_pod_it_started() {
    let api = MemApi::new();
    api.create(&host_volume()).expect("seed");
    let (stop, task) = start(&api, real_controller()).await;
    let pod = wait_for_pod(&api).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        recorded_pod_uid(&api),
        pod.metadata.uid,
        "the volume records its pod before it is waited for"
    );
    // The controller stops while its pod runs (its operation is cancelled).
    let _ = stop.send(());
    task.await.expect("join").expect("controller");
    let (stop, task) = start(&api, real_controller()).await;
    // Give the new controller time to sync the volume and find the pod.
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(
        api.get::<PersistentVolume>(None, "host-volume")
            .and_then(|v| v.status)
            .and_then(|s| s.phase)
            .as_deref(),
        Some("Released"),
        "still waiting for the pod"
    );
    finish_pod(&api, pod, "Succeeded", None);
    wait_for_phase(&api, "Available").await;
    let created = api.requests().count_code(Verb::Create, "pods", None, 201);
    assert_eq!(created, 1, "exactly one recycler pod was ever created");
    let _ = stop.send(());
    task.await.expect("join").expect("controller");
}

/// Waits (paused time) until the recycler pod exists as another object
/// than `old` (another UID).
async fn wait_for_new_pod(api: &MemApi, old: &Pod) -> Pod {
    for _ in 0..3000 {
        if let Some(pod) = api.get::<Pod>(Some("default"), POD)
            && pod.metadata.uid != old.metadata.uid
        {
            return pod;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("no new recycler pod was created");
}

fn phase_of(api: &MemApi) -> String {
    api.get::<PersistentVolume>(None, "host-volume")
        .and_then(|v| v.status)
        .and_then(|s| s.phase)
        .unwrap_or_default()
}

/// The data leak a real cluster showed: the first release's recycler pod
/// lingers (Succeeded, Terminating: its node is gone and a finalizer holds
/// it); the volume is bound again and released again. That old pod proves
/// nothing about the second tenant's data: the volume must not become
/// Available until a pod made for the second release has run.
#[tokio::test(start_paused = true)]
async fn a_lingering_recycler_pod_of_an_earlier_release_is_never_taken_as_proof() {
    let api = MemApi::new();
    api.create(&host_volume()).expect("seed");
    let (stop, task) = start(&api, real_controller()).await;

    let mut first = wait_for_pod(&api).await;
    first.metadata.finalizers = Some(vec!["example.com/node-gone".to_string()]);
    first.spec.as_mut().expect("spec").node_name = Some("node-1".to_string());
    finish_pod(&api, first.clone(), "Succeeded", None);
    wait_for_phase(&api, "Available").await;
    let lingering = api
        .get::<Pod>(Some("default"), POD)
        .expect("first pod lingers");
    assert!(lingering.metadata.deletion_timestamp.is_some());

    // A second tenant binds the volume, and later deletes its claim.
    let tenant: k8s_openapi::api::core::v1::PersistentVolumeClaim =
        claim("claim-2", "uid-2", "1Gi").build();
    api.create(&tenant).expect("second claim");
    wait_for_phase(&api, "Bound").await;
    assert!(
        api.remove::<k8s_openapi::api::core::v1::PersistentVolumeClaim>(Some("default"), "claim-2")
    );

    let failed = wait_for_phase(&api, "Failed").await;
    assert_eq!(
        failed.status.and_then(|s| s.message).as_deref(),
        Some("Recycle failed: old recycler pod found, will retry later")
    );
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert_eq!(
        phase_of(&api),
        "Failed",
        "never Available on the old pod's word"
    );

    // The old pod finally goes; a fresh pod for this release scrubs the volume.
    api.remove::<Pod>(Some("default"), POD);
    let second = wait_for_new_pod(&api, &first).await;
    assert_eq!(
        second
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(k8s_names::ANN_RELEASED_CLAIM_UID))
            .map(String::as_str),
        Some("uid-2"),
        "the new pod is made for the second release"
    );
    assert_eq!(
        phase_of(&api),
        "Failed",
        "not Available before the new pod ran"
    );
    finish_pod(&api, second, "Succeeded", None);
    wait_for_phase(&api, "Available").await;
    assert_eq!(
        api.requests().count_code(Verb::Create, "pods", None, 201),
        2,
        "one pod per release"
    );
    let _ = stop.send(());
    task.await.expect("join").expect("controller");
    let events = recorded_events(&api);
    assert!(
        events.iter().any(|e| e
            == "Warning VolumeFailedRecycle Recycle failed: old recycler pod found, will retry later"),
        "{events:?}"
    );
}

/// A scrub that succeeded proves the release clean even when the volume
/// write after it fails: the retry finds the pod that ran and makes the
/// volume Available, instead of scrubbing again with a second pod (found
/// by the chaos suite: the pod used to be deleted before the volume was
/// written).
#[tokio::test(start_paused = true)]
async fn a_failed_volume_write_after_the_scrub_starts_no_second_recycler_pod() {
    let api = MemApi::new();
    api.create(&host_volume()).expect("seed");
    let (stop, task) = start(&api, real_controller()).await;
    let pod = wait_for_pod(&api).await;
    api.add_reactor(memapi::Reactor::on(Verb::Patch, "persistentvolumes").error(500));
    finish_pod(&api, pod, "Succeeded", None);
    let volume = wait_for_phase(&api, "Available").await;
    assert!(volume.spec.and_then(|s| s.claim_ref).is_none());
    assert_eq!(
        api.requests()
            .count_code(Verb::Patch, "persistentvolumes", None, 500),
        1,
        "the volume write failed once"
    );
    assert_eq!(
        api.requests().count_code(Verb::Create, "pods", None, 201),
        1,
        "one recycler pod for one release"
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        api.get::<Pod>(Some("default"), POD).is_none(),
        "the pod is deleted once the volume is Available"
    );
    let _ = stop.send(());
    task.await.expect("join").expect("controller");
}

/// How the volume stands when a forged recycler pod waits for it.
#[derive(Clone, Copy, Debug)]
enum Forgery {
    /// Released, and the server records when (`lastPhaseTransitionTime`,
    /// Kubernetes 1.28 and later): the forged pod is younger than the
    /// release.
    ReleasedWithTransitionTime,
    /// Released on a server that records no phase transition time.
    ReleasedWithoutTransitionTime,
    /// Failed after an earlier recycle attempt.
    Failed,
}

/// A pod someone else made: the recycler pod's name and both annotations
/// (as an earlier recycler pod shows them), marked Succeeded as a kubelet
/// would after `command: [true]`.
fn forged_pod(volume_uid: &str, claim_uid: &str) -> Pod {
    let annotations = [
        (
            k8s_names::ANN_RECYCLED_VOLUME_UID.to_string(),
            volume_uid.to_string(),
        ),
        (
            k8s_names::ANN_RELEASED_CLAIM_UID.to_string(),
            claim_uid.to_string(),
        ),
    ];
    Pod {
        metadata: ObjectMeta {
            name: Some(POD.to_string()),
            namespace: Some("default".to_string()),
            annotations: Some(annotations.into()),
            ..Default::default()
        },
        spec: Some(k8s_openapi::api::core::v1::PodSpec {
            restart_policy: Some("Never".to_string()),
            containers: vec![k8s_openapi::api::core::v1::Container {
                name: "pv-recycler".to_string(),
                image: Some("busybox".to_string()),
                command: Some(vec!["true".to_string()]),
                ..Default::default()
            }],
            ..Default::default()
        }),
        status: Some(PodStatus {
            phase: Some("Succeeded".to_string()),
            ..Default::default()
        }),
    }
}

/// The recycler pod annotation the volume records.
fn recorded_pod_uid(api: &MemApi) -> Option<String> {
    api.get::<PersistentVolume>(None, "host-volume")
        .and_then(|v| v.metadata.annotations)
        .and_then(|a| a.get(k8s_names::ANN_RECYCLER_POD_UID).cloned())
}

/// A forged recycler pod (right name, right annotations, Succeeded) is
/// there before the controller's own; later another one replaces the
/// controller's pod while it runs. Neither makes the volume Available: the
/// first is deleted and the controller scrubs with a pod of its own, whose
/// UID it records on the volume; the volume becomes Available only when
/// that pod succeeds.
async fn forged_pod_is_never_proof(case: Forgery) {
    let api = MemApi::new();
    let mut seeded = host_volume();
    match case {
        Forgery::ReleasedWithTransitionTime => {
            seeded
                .status
                .get_or_insert_with(Default::default)
                .last_phase_transition_time =
                Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                    k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
                ));
        }
        Forgery::ReleasedWithoutTransitionTime => {
            api.drop_fields("persistentvolumes", &["status.lastPhaseTransitionTime"])
                .expect("drop fields");
        }
        Forgery::Failed => {
            let status = seeded.status.get_or_insert_with(Default::default);
            status.phase = Some("Failed".to_string());
            status.message = Some("Recycle failed: an earlier attempt".to_string());
        }
    }
    let seeded = api.create(&seeded).expect("seed");
    let volume_uid = seeded.metadata.uid.clone().expect("volume uid");
    let forged = api
        .create(&forged_pod(&volume_uid, "uid-h"))
        .expect("forged pod");
    let mut observed = api.observe::<PersistentVolume>().expect("observer");
    let (stop, task) = start(&api, real_controller()).await;

    let own = wait_for_new_pod(&api, &forged).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        recorded_pod_uid(&api),
        own.metadata.uid,
        "the controller records the pod it made ({case:?})"
    );
    // The controller's pod is swapped for a forged one while it runs.
    api.remove::<Pod>(Some("default"), POD);
    let swapped = api
        .create(&forged_pod(&volume_uid, "uid-h"))
        .expect("second forged pod");
    let own = wait_for_new_pod(&api, &swapped).await;
    assert_ne!(own.metadata.uid, forged.metadata.uid);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(recorded_pod_uid(&api), own.metadata.uid, "{case:?}");
    tokio::time::sleep(Duration::from_secs(30)).await;
    let became_available = |observed: &mut memapi::Observer<PersistentVolume>| {
        observed.drain().into_iter().any(|change| {
            change.object.status.and_then(|s| s.phase).as_deref() == Some("Available")
        })
    };
    assert!(
        !became_available(&mut observed),
        "never Available on a forged pod's word ({case:?})"
    );
    finish_pod(&api, own, "Succeeded", None);
    let volume = wait_for_phase(&api, "Available").await;
    assert_eq!(
        volume
            .metadata
            .annotations
            .and_then(|a| a.get(k8s_names::ANN_RECYCLER_POD_UID).cloned()),
        None,
        "the record goes with the release"
    );
    assert!(
        api.requests()
            .log()
            .iter()
            .any(|e| e.verb == Verb::Delete && e.name.as_deref() == Some(POD)),
        "the forged pod was deleted"
    );
    let _ = stop.send(());
    task.await.expect("join").expect("controller");
    // A volume already Failed stays so without a second event (upstream
    // words a phase change only).
    let events = recorded_events(&api);
    assert_eq!(
        events.iter().any(|e| e
            == "Warning VolumeFailedRecycle Recycle failed: old recycler pod found, will retry later"),
        !matches!(case, Forgery::Failed),
        "{events:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_forged_recycler_pod_is_never_proof_when_the_release_time_is_known() {
    Box::pin(forged_pod_is_never_proof(
        Forgery::ReleasedWithTransitionTime,
    ))
    .await;
}

#[tokio::test(start_paused = true)]
async fn a_forged_recycler_pod_is_never_proof_without_a_release_time() {
    Box::pin(forged_pod_is_never_proof(
        Forgery::ReleasedWithoutTransitionTime,
    ))
    .await;
}

#[tokio::test(start_paused = true)]
async fn a_forged_recycler_pod_is_never_proof_for_a_failed_volume() {
    Box::pin(forged_pod_is_never_proof(Forgery::Failed)).await;
}

/// A refused create of the recycler pod reaches the volume's event and
/// status in the API server's words, not as the client's debug form of
/// its answer (`ApiError: ... (Status { ... })`).
#[tokio::test(start_paused = true)]
async fn a_refused_recycler_pod_is_told_in_the_api_servers_words() {
    const REFUSAL: &str = "pods \"recycler-for-host-volume\" is forbidden: exceeded quota: pods";
    let api = MemApi::new();
    api.create(&host_volume()).expect("seed");
    api.add_reactor(memapi::Reactor::on(Verb::Create, "pods").error_with(403, REFUSAL));
    let (stop, task) = start(&api, real_controller()).await;
    let volume = wait_for_phase(&api, "Failed").await;
    let message = volume.status.and_then(|s| s.message).unwrap_or_default();
    assert!(message.contains(REFUSAL), "{message}");
    let _ = stop.send(());
    task.await.expect("join").expect("controller");
    let events = recorded_events(&api);
    let failed: Vec<&String> = events
        .iter()
        .filter(|e| e.starts_with("Warning VolumeFailedRecycle"))
        .collect();
    assert!(!failed.is_empty(), "{events:?}");
    for text in failed.iter().map(|e| e.as_str()).chain([message.as_str()]) {
        assert!(text.contains(REFUSAL), "{text}");
        assert!(
            !text.contains("ApiError") && !text.contains("Status {"),
            "no debug dump: {text}"
        );
    }
}

/// Once the volume is Available, the recycler pod of its release is
/// deleted, and only that pod: one made under the same name since (for a
/// later release, or by someone else) is left alone (the delete carries the
/// UID of the pod read). Before, the pod was deleted by name.
#[tokio::test(start_paused = true)]
async fn only_the_releases_own_recycler_pod_is_deleted_after_the_recycle() {
    let api = MemApi::new();
    api.create(&host_volume()).expect("seed");
    let (stop, task) = start(&api, real_controller()).await;
    let pod = wait_for_pod(&api).await;
    // The unbind after the scrub waits; meanwhile the pod is replaced by
    // another of the same name.
    api.add_reactor(
        memapi::Reactor::on(Verb::Patch, "persistentvolumes")
            .main_resource()
            .delay(Duration::from_secs(10)),
    );
    finish_pod(&api, pod.clone(), "Succeeded", None);
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(api.remove::<Pod>(Some("default"), POD));
    let mut other = Pod::default();
    other.metadata.name = Some(POD.to_string());
    other.metadata.namespace = Some("default".to_string());
    other.spec = pod.spec.clone();
    let other = api.create(&other).expect("another pod of that name");
    wait_for_phase(&api, "Available").await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let _ = stop.send(());
    task.await.expect("join").expect("controller");
    let left = api
        .get::<Pod>(Some("default"), POD)
        .expect("the other pod is left");
    assert_eq!(left.metadata.uid, other.metadata.uid);
}

/// The release's own recycler pod is deleted once the volume is Available.
#[tokio::test(start_paused = true)]
async fn the_releases_recycler_pod_is_deleted_after_the_recycle() {
    let api = MemApi::new();
    api.create(&host_volume()).expect("seed");
    let (stop, task) = start(&api, real_controller()).await;
    let pod = wait_for_pod(&api).await;
    finish_pod(&api, pod, "Succeeded", None);
    wait_for_phase(&api, "Available").await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let _ = stop.send(());
    task.await.expect("join").expect("controller");
    assert!(api.get::<Pod>(Some("default"), POD).is_none());
}

/// Another sync makes the volume Available on the pod's proof while the
/// recycle's own last write is on its way (it meets a 409): the recycle
/// still ends with its pod deleted, as upstream's does once the volume is
/// free.
#[tokio::test(start_paused = true)]
async fn a_recycle_overtaken_by_another_write_still_deletes_its_pod() {
    let api = MemApi::new();
    api.create(&host_volume()).expect("seed");
    let (stop, task) = start(&api, real_controller()).await;
    let pod = wait_for_pod(&api).await;
    // The pod's record on the volume is written.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let held = api.add_reactor(
        memapi::Reactor::on(Verb::Patch, "persistentvolumes")
            .delay(Duration::from_secs(2))
            .times(1),
    );
    finish_pod(&api, pod, "Succeeded", None);
    for _ in 0..100 {
        if api.reactor_fired(held) == Some(1) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(api.reactor_fired(held), Some(1), "the last write is held");
    let mut freed = api
        .get::<PersistentVolume>(None, "host-volume")
        .expect("volume");
    if let Some(spec) = freed.spec.as_mut() {
        spec.claim_ref = None;
    }
    freed.status.get_or_insert_with(Default::default).phase = Some("Available".to_string());
    api.put(&freed).expect("another writer frees the volume");
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(phase_of(&api), "Available");
    assert!(
        api.requests()
            .count_code(Verb::Patch, "persistentvolumes", None, 409)
            >= 1,
        "the recycle's last write met the other one"
    );
    assert!(
        api.get::<Pod>(Some("default"), POD).is_none(),
        "the recycler pod is deleted"
    );
    let _ = stop.send(());
    task.await.expect("join").expect("controller");
}
