//! The guard against a second binder, on memapi: a write that changes the
//! phase of a volume or claim by another field manager than the
//! controller's (here kube-controller-manager's, by its `User-Agent`)
//! sets `pv_controller_other_binder_seen` to 1 for ten minutes and gets
//! one Warning event naming the writer; the controller's own binding, and
//! another writer's labels, do not; in shadow mode nothing is said.

use std::time::Duration;

use k8s_openapi::api::core::v1::Event;
use memapi::MemApi;
use pv_controller::{App, AppConfig, ShadowConfig, pv};
use testkit::{claim, volume};
use tower::ServiceExt;

use crate::harness::clients;
use crate::process::{Running, controllers, settle};

/// A bound pair to be, and a released volume the controller keeps as it
/// is (policy Retain): only another writer changes its phase.
fn cluster() -> MemApi {
    let api = MemApi::new();
    api.create(&volume("mine", "1Gi").build()).unwrap();
    api.create(&claim("data", "uid-data", "1Gi").build())
        .unwrap();
    api.create(
        &volume("kept", "1Gi")
            .bound_to("uid-gone", "gone")
            .phase("Released")
            .policy("Retain")
            .build(),
    )
    .unwrap();
    api
}

/// A merge patch sent as a client whose `User-Agent` is `agent`.
async fn patch_as(api: &MemApi, agent: &str, uri: &str, body: &str) {
    let request = http::Request::patch(uri)
        .header("content-type", "application/merge-patch+json")
        .header("user-agent", agent)
        .body(kube::client::Body::from(body.as_bytes().to_vec()))
        .unwrap();
    let answer = api.service().oneshot(request).await.unwrap();
    assert_eq!(answer.status(), 200, "{uri}");
}

const KCM: &str = "kube-controller-manager/v1.20.2 (linux/amd64) kubernetes/faecb19";

/// The Warning events of reason OtherBinder: object and message.
fn warnings(api: &MemApi) -> Vec<(String, String)> {
    api.list::<Event>()
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("OtherBinder"))
        .map(|e| {
            assert_eq!(e.type_.as_deref(), Some("Warning"));
            (
                e.involved_object.name.unwrap_or_default(),
                e.message.unwrap_or_default(),
            )
        })
        .collect()
}

/// The gauge's line in a scrape.
fn gauge(metrics: &pv_controller::Metrics) -> Option<String> {
    metrics
        .render()
        .unwrap()
        .lines()
        .find(|line| line.starts_with("pv_controller_other_binder_seen"))
        .map(str::to_string)
}

#[tokio::test(start_paused = true)]
async fn another_writer_of_phases_is_seen_named_and_forgotten_after_ten_minutes() {
    let api = cluster();
    let running = Running::start(&api, controllers("*")).await;
    running.settle().await;
    let data = api
        .get::<k8s_openapi::api::core::v1::PersistentVolumeClaim>(Some("default"), "data")
        .unwrap();
    assert_eq!(data.status.unwrap().phase.as_deref(), Some("Bound"));
    assert_eq!(
        gauge(&running.metrics).as_deref(),
        Some("pv_controller_other_binder_seen 0")
    );
    assert!(warnings(&api).is_empty(), "our own binding is ours");

    // Another writer's labels change no phase.
    patch_as(
        &api,
        "kubectl/v1.20.2",
        "/api/v1/persistentvolumes/kept",
        r#"{"metadata":{"labels":{"tier":"gold"}}}"#,
    )
    .await;
    running.settle().await;
    assert_eq!(
        gauge(&running.metrics).as_deref(),
        Some("pv_controller_other_binder_seen 0")
    );

    // kube-controller-manager's binder changes the phases.
    patch_as(
        &api,
        KCM,
        "/api/v1/persistentvolumes/kept/status",
        r#"{"status":{"phase":"Failed"}}"#,
    )
    .await;
    running.settle().await;
    assert_eq!(
        gauge(&running.metrics).as_deref(),
        Some("pv_controller_other_binder_seen 1")
    );
    let said = warnings(&api);
    assert_eq!(said.len(), 1, "{said:?}");
    assert_eq!(said[0].0, "kept");
    assert!(
        said[0].1.starts_with(
            "kube-controller-manager changed the phase of this persistentvolume from Released to Failed"
        ),
        "{said:?}"
    );
    // Again within the window: the gauge stays, the warning is not repeated.
    patch_as(
        &api,
        KCM,
        "/api/v1/persistentvolumes/kept/status",
        r#"{"status":{"phase":"Released"}}"#,
    )
    .await;
    running.settle().await;
    assert_eq!(warnings(&api).len(), 1);
    tokio::time::sleep(Duration::from_secs(9 * 60)).await;
    assert_eq!(
        gauge(&running.metrics).as_deref(),
        Some("pv_controller_other_binder_seen 1")
    );
    tokio::time::sleep(Duration::from_secs(2 * 60)).await;
    assert_eq!(
        gauge(&running.metrics).as_deref(),
        Some("pv_controller_other_binder_seen 0"),
        "ten minutes after the last change"
    );
    running.stop().await;
}

#[tokio::test(start_paused = true)]
async fn in_shadow_mode_the_cluster_s_binder_is_expected() {
    let api = cluster();
    let config = AppConfig {
        shadow: Some(ShadowConfig {
            window: Duration::from_secs(10),
        }),
        persistentvolume: pv::Config {
            resync_period: Duration::from_secs(5),
            ..pv::Config::default()
        },
        ..AppConfig::default()
    };
    let app = App::start(clients(&api), config).await.unwrap();
    let (idle, metrics) = (app.idle_probe(), app.metrics());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(app.run(async move {
        let _ = stopped.await;
    }));
    settle(&api, &idle).await;
    patch_as(
        &api,
        KCM,
        "/api/v1/persistentvolumes/kept/status",
        r#"{"status":{"phase":"Failed"}}"#,
    )
    .await;
    settle(&api, &idle).await;
    assert_eq!(gauge(&metrics), None, "no guard in shadow mode");
    assert!(warnings(&api).is_empty());
    let _ = stop.send(());
    task.await.unwrap().unwrap();
}
