//! A control plane upgraded under a running process: the ResourceClaim
//! controller, left out while the API server does not serve
//! resource.k8s.io/v1, starts once discovery has shown the API three
//! periods in a row, and stops when it has stayed gone as long, without a
//! restart of the process; API servers that answer differently (a
//! version-skewed upgrade) rebuild nothing.

use std::time::Duration;

use k8s_openapi::api::resource::v1::ResourceClaim;
use memapi::{MemApi, Verb};
use pv_controller::{App, AppConfig};

use crate::harness::clients;

const API: &str = "resource.k8s.io/v1";
const PERIOD: Duration = Duration::from_secs(60);

/// A pod that needs a claim made from the template `gpu` (made with the
/// first pod).
fn seed_pod(api: &MemApi, pod: &str) {
    if api
        .list::<k8s_openapi::api::resource::v1::ResourceClaimTemplate>()
        .is_empty()
    {
        api.load_yaml("apiVersion: resource.k8s.io/v1\nkind: ResourceClaimTemplate\nmetadata:\n  name: gpu\n  namespace: default\nspec:\n  spec: {}\n")
            .unwrap();
    }
    let objects = serde_json::json!([
        { "apiVersion": "v1", "kind": "Pod",
          "metadata": { "name": pod, "namespace": "default", "uid": format!("uid-{pod}") },
          "spec": { "containers": [ { "name": "c", "image": "busybox" } ],
                    "resourceClaims": [ { "name": "gpu", "resourceClaimTemplateName": "gpu" } ] } },
    ]);
    for object in objects.as_array().into_iter().flatten() {
        api.load_yaml(&serde_json::to_string(object).unwrap())
            .unwrap();
    }
}

/// The claims made for `pod`.
fn claims_of(api: &MemApi, pod: &str) -> usize {
    api.list::<ResourceClaim>()
        .iter()
        .filter(|claim| {
            claim
                .metadata
                .name
                .as_deref()
                .is_some_and(|name| name.starts_with(&format!("{pod}-gpu-")))
        })
        .count()
}

fn config() -> AppConfig {
    AppConfig {
        api_discovery_period: PERIOD,
        ..AppConfig::default()
    }
}

#[tokio::test(start_paused = true)]
async fn without_its_api_the_controller_is_reported_not_running() {
    let api = MemApi::new();
    api.withhold(API, true);
    let app = App::start(clients(&api), config()).await.unwrap();
    assert!(app.controllers().resourceclaim.is_none());
    let text = app.metrics().render().unwrap();
    assert!(
        text.contains(
            "pv_controller_controller_running{controller=\"resourceclaim-controller\"} 0"
        ),
        "{text}"
    );
    assert!(
        text.contains(
            "pv_controller_controller_running{controller=\"persistentvolume-binder-controller\"} 1"
        ),
        "{text}"
    );
}

#[tokio::test(start_paused = true)]
async fn the_resourceclaim_controller_follows_its_api_without_a_restart() {
    let api = MemApi::new();
    api.withhold(API, true);
    seed_pod(&api, "before");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let process = tokio::spawn(pv_controller::serve(clients(&api), config(), async move {
        let _ = stopped.await;
    }));
    // Half way between two of discovery's periods, so no answer races the
    // change.
    tokio::time::sleep(PERIOD * 3 + PERIOD / 2).await;
    assert_eq!(
        claims_of(&api, "before"),
        0,
        "no controller without its API"
    );

    // The control plane is upgraded: once discovery has said so three
    // periods in a row (and the moments a rebuild takes) the controller
    // runs and makes the claim; not before.
    api.withhold(API, false);
    tokio::time::sleep(PERIOD * 2 + Duration::from_secs(5)).await;
    assert_eq!(claims_of(&api, "before"), 0, "two answers are not enough");
    tokio::time::sleep(PERIOD).await;
    assert_eq!(claims_of(&api, "before"), 1, "the controller started");
    assert!(!process.is_finished(), "the same process runs on");

    // Downgraded again: the controller stops within three periods.
    api.withhold(API, true);
    tokio::time::sleep(PERIOD * 3 + Duration::from_secs(5)).await;
    seed_pod(&api, "after");
    tokio::time::sleep(PERIOD / 2).await;
    assert_eq!(claims_of(&api, "after"), 0, "the controller stopped");

    let _ = stop.send(());
    process.await.unwrap().unwrap();
}

/// API servers of two releases behind one address: discovery's answer
/// flips every period. The running controllers are never rebuilt (one
/// list of each kind, the first), and the ResourceClaim controller keeps
/// working; before, each flip stopped the controllers, released the Lease
/// and listed the cluster again.
#[tokio::test(start_paused = true)]
async fn discovery_that_flips_rebuilds_nothing() {
    let api = MemApi::new();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let process = tokio::spawn(pv_controller::serve(clients(&api), config(), async move {
        let _ = stopped.await;
    }));
    // Discovery is asked at each whole period; the answer changes half
    // way between, so each answer is the other of the one before.
    tokio::time::sleep(PERIOD / 2).await;
    for flip in 0..10 {
        api.withhold(API, flip % 2 == 0);
        tokio::time::sleep(PERIOD).await;
    }
    api.withhold(API, false);
    assert!(!process.is_finished(), "the process runs on");
    assert_eq!(
        api.requests().count(Verb::List, "persistentvolumes", None),
        1,
        "the controllers were never built again"
    );
    seed_pod(&api, "during");
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(claims_of(&api, "during"), 1, "the controller runs on");
    let _ = stop.send(());
    process.await.unwrap().unwrap();
}
