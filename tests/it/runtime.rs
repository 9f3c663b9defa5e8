//! The one runtime of the three controllers, as the API server sees it:
//! one LIST and one WATCH per kind however many controllers read it, every
//! write counted once by the controller that made it, and claims that
//! compete for one volume served oldest first however many workers run.

use std::collections::BTreeMap;
use std::time::Duration;

use clap::Parser;
use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim, Pod, PodStatus};
use memapi::{MemApi, Verb};
use pv_controller::pv::{self, Settings, VolumePlugins};
use pv_controller::{App, AppConfig, Metrics, Options};
use testkit::{claim, storage_class, volume};

use crate::process::value;
use crate::process::{Running, SETTLE_QUIET, clients, settle};

/// Every kind the process watches, as the API server names it.
const KINDS: [&str; 7] = [
    "pods",
    "persistentvolumeclaims",
    "persistentvolumes",
    "storageclasses",
    "nodes",
    "resourceclaims",
    "resourceclaimtemplates",
];

/// A pod of `namespace` from its JSON spec.
fn pod(namespace: &str, name: &str, spec: &serde_json::Value) -> Pod {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }))
    .expect("pod")
}

/// Objects of every kind the three controllers read: a pair to bind, a
/// class, a node, a pod with an ephemeral volume and one with a
/// ResourceClaim template.
fn seed_every_kind(api: &MemApi) {
    api.create(&storage_class(
        "manual",
        "kubernetes.io/no-provisioner",
        "Immediate",
    ))
    .expect("class");
    api.create(&volume("pv-1", "1Gi").class("manual").build())
        .expect("volume");
    api.create(&claim("data", "uid-data", "1Gi").class("manual").build())
        .expect("claim");
    let mut node = Node::default();
    node.metadata.name = Some("node-1".into());
    api.create(&node).expect("node");
    api.create(&pod(
        "default",
        "web",
        &serde_json::json!({
            "containers": [{"name": "web", "image": "nginx"}],
            "volumes": [{"name": "cache", "ephemeral": {"volumeClaimTemplate": {"spec": {
                "accessModes": ["ReadWriteOnce"], "storageClassName": "manual",
                "resources": {"requests": {"storage": "1Gi"}},
            }}}}],
        }),
    ))
    .expect("pod with an ephemeral volume");
    let template: k8s_openapi::api::resource::v1::ResourceClaimTemplate =
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "gpu", "namespace": "default"},
            "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]}}},
        }))
        .expect("template");
    api.create(&template).expect("template");
    api.create(&pod(
        "default",
        "trainer",
        &serde_json::json!({
            "containers": [{"name": "train", "image": "trainer"}],
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "gpu"}],
        }),
    ))
    .expect("pod with a ResourceClaim template");
}

#[tokio::test(start_paused = true)]
async fn the_process_lists_and_watches_each_kind_once() {
    let api = MemApi::new();
    seed_every_kind(&api);
    let app = App::start(clients(&api), AppConfig::default())
        .await
        .expect("the process starts");
    let (idle, health) = (app.idle_probe(), app.health());
    let controllers = app.controllers().clone();
    assert!(
        controllers.persistentvolume.is_some()
            && controllers.ephemeral.is_some()
            && controllers.resourceclaim.is_some(),
        "all three controllers run"
    );
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(app.run(async move {
        let _ = stopped.await;
    }));
    settle(&api, &idle).await;
    assert!(health.readiness.is_ready());
    let _ = stop.send(());
    running.await.expect("join").expect("a clean stop");

    let stats = api.requests();
    for kind in KINDS {
        assert_eq!(stats.count(Verb::List, kind, None), 1, "lists of {kind}");
        assert_eq!(stats.count(Verb::Watch, kind, None), 1, "watches of {kind}");
    }
    assert!(
        SETTLE_QUIET < Duration::from_secs(290),
        "no watch timed out and was opened again meanwhile"
    );
    let made: Vec<String> = api
        .list::<PersistentVolumeClaim>()
        .iter()
        .filter_map(|claim| claim.metadata.name.clone())
        .collect();
    assert_eq!(made, ["data", "web-cache"], "the ephemeral volume's claim");
    assert_eq!(
        api.list::<k8s_openapi::api::resource::v1::ResourceClaim>()
            .len(),
        1,
        "the template's claim"
    );
}

#[tokio::test(start_paused = true)]
async fn a_big_kind_is_listed_in_pages_of_five_hundred() {
    let api = MemApi::new();
    for i in 0..1_201 {
        api.create(&volume(&format!("pv-{i:04}"), "1Gi").build())
            .expect("volume");
    }
    let app = App::start(clients(&api), AppConfig::default())
        .await
        .expect("the process starts");
    let idle = app.idle_probe();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(app.run(async move {
        let _ = stopped.await;
    }));
    settle(&api, &idle).await;
    let _ = stop.send(());
    running.await.expect("join").expect("a clean stop");

    let stats = api.requests();
    assert_eq!(
        stats.count(Verb::List, "persistentvolumes", None),
        3,
        "1,201 volumes in pages of 500"
    );
    assert_eq!(stats.count(Verb::List, "persistentvolumeclaims", None), 1);
    assert_eq!(
        api.list::<PersistentVolume>()
            .iter()
            .filter(
                |volume| volume.status.as_ref().and_then(|s| s.phase.as_deref())
                    == Some("Available")
            )
            .count(),
        1_201,
        "every listed volume was synced"
    );
}

/// A list whose continue token expires between its pages (the history
/// compacted past the first page's version, 410 Expired) is started again
/// from the first page, and the store ends with what the server holds.
#[tokio::test(start_paused = true)]
async fn a_list_whose_continue_token_expired_is_listed_again() {
    let api = MemApi::new();
    for i in 1..=5 {
        api.create(&volume(&format!("pv-{i}"), "1Gi").build())
            .expect("volume");
    }
    // Every page of volumes answered a second late.
    api.add_reactor(
        memapi::Reactor::on(Verb::List, "persistentvolumes")
            .delay(Duration::from_secs(1))
            .always(),
    );
    let app = App::start(
        clients(&api),
        AppConfig {
            list_page_size: 2,
            ..AppConfig::default()
        },
    )
    .await
    .expect("the process starts");
    let idle = app.idle_probe();
    let binder = app
        .controllers()
        .persistentvolume
        .clone()
        .expect("the binder runs");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(app.run(async move {
        let _ = stopped.await;
    }));
    // The first page (pv-1, pv-2) is in; the second is asked for.
    // Meanwhile a volume of the first page goes, one comes, and the
    // history is compacted.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert!(api.remove::<PersistentVolume>(None, "pv-1"));
    api.create(&volume("pv-6", "1Gi").build()).expect("volume");
    api.compact();
    settle(&api, &idle).await;
    let _ = stop.send(());
    running.await.expect("join").expect("a clean stop");

    let stats = api.requests();
    assert_eq!(
        stats.count_code(Verb::List, "persistentvolumes", None, 410),
        1,
        "the second page's token expired"
    );
    assert_eq!(
        stats.count(Verb::List, "persistentvolumes", None),
        2 + 3,
        "two pages, the second refused; then the whole list again, in three"
    );
    let available: Vec<String> = api
        .list::<PersistentVolume>()
        .iter()
        .filter(|v| v.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Available"))
        .filter_map(|v| v.metadata.name.clone())
        .collect();
    assert_eq!(
        available,
        ["pv-2", "pv-3", "pv-4", "pv-5", "pv-6"],
        "the relisted store synced every volume the server holds"
    );
    let mut stored: Vec<String> = binder
        .store()
        .volume_names()
        .iter()
        .map(|name| name.as_str().to_string())
        .collect();
    stored.sort();
    assert_eq!(
        stored, available,
        "the volume of the refused list's first page is gone from the store"
    );
}

/// `pv_controller_api_writes_total` by (controller, resource, verb,
/// subresource), every result together.
fn counted_writes(metrics: &Metrics) -> BTreeMap<(String, String, String, String), u64> {
    let text = metrics.render().expect("render");
    let mut counted = BTreeMap::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("pv_controller_api_writes_total{") else {
            continue;
        };
        let (labels, value) = rest.split_once("} ").expect("a sample");
        let label = |name: &str| {
            labels
                .split(',')
                .find_map(|pair| pair.strip_prefix(&format!("{name}=\"")))
                .map(|value| value.trim_end_matches('"').to_string())
                .expect("the label")
        };
        let key = (
            label("controller"),
            label("resource"),
            label("verb"),
            label("subresource"),
        );
        *counted.entry(key).or_insert(0) += value.parse::<u64>().expect("a count");
    }
    counted
}

/// The write verbs as the metric names them.
fn verb_label(verb: Verb) -> &'static str {
    match verb {
        Verb::Create => "create",
        Verb::Update => "update",
        Verb::Patch => "patch",
        Verb::Delete => "delete",
        Verb::DeleteCollection => "deletecollection",
        Verb::Get | Verb::List | Verb::Watch => "read",
    }
}

#[tokio::test(start_paused = true)]
async fn every_write_of_every_controller_is_counted_once() {
    let api = MemApi::new();
    api.load_yaml(include_str!("../../examples/demo.yaml"))
        .expect("the demo's objects");
    let plugins =
        pv_controller::plugin_config(&Options::parse_from(["pv-controller"])).expect("plugins");
    let config = AppConfig {
        persistentvolume: pv::Config {
            resync_period: Duration::from_secs(2),
            settings: Settings {
                plugins: VolumePlugins::from_config(&plugins),
                ..Settings::default()
            },
            ..pv::Config::default()
        },
        ..AppConfig::default()
    };
    api.reset_requests();
    let app = App::start(clients(&api), config)
        .await
        .expect("the process starts");
    let (idle, metrics) = (app.idle_probe(), app.metrics());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(app.run(async move {
        let _ = stopped.await;
    }));
    // The kubelet of the test: recycler pods run to completion at once,
    // written straight into the store (no request the controllers make).
    let kubelet = {
        let api = api.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(200)).await;
                for mut pod in api.list::<Pod>() {
                    let runs_once = pod
                        .spec
                        .as_ref()
                        .and_then(|spec| spec.restart_policy.as_deref())
                        == Some("Never");
                    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
                    if runs_once && phase != Some("Succeeded") {
                        pod.status = Some(PodStatus {
                            phase: Some("Succeeded".into()),
                            ..PodStatus::default()
                        });
                        api.put(&pod).expect("finish the recycler pod");
                    }
                }
            }
        })
    };
    settle(&api, &idle).await;
    let _ = stop.send(());
    running.await.expect("join").expect("a clean stop");
    kubelet.abort();

    let counted = counted_writes(&metrics);
    let mut by_server: BTreeMap<(String, String, String), u64> = BTreeMap::new();
    for entry in api.requests().log() {
        if entry.verb.is_write() && !["events", "leases"].contains(&entry.resource.as_str()) {
            let key = (
                entry.resource.clone(),
                verb_label(entry.verb).to_string(),
                entry.subresource.clone().unwrap_or_default(),
            );
            *by_server.entry(key).or_insert(0) += 1;
        }
    }
    let mut by_metric: BTreeMap<(String, String, String), u64> = BTreeMap::new();
    for ((_, resource, verb, subresource), count) in &counted {
        *by_metric
            .entry((resource.clone(), verb.clone(), subresource.clone()))
            .or_insert(0) += count;
    }
    assert_eq!(
        by_metric, by_server,
        "each write the server saw, counted once"
    );

    let by = |controller: &str, resource: &str, verb: &str, subresource: &str| {
        counted
            .get(&(
                controller.to_string(),
                resource.to_string(),
                verb.to_string(),
                subresource.to_string(),
            ))
            .copied()
            .unwrap_or(0)
    };
    let binder = k8s_names::PERSISTENTVOLUME_BINDER_CONTROLLER;
    let ephemeral = k8s_names::EPHEMERAL_VOLUME_CONTROLLER;
    let claims = k8s_names::RESOURCE_CLAIM_CONTROLLER;
    assert_eq!(by(ephemeral, "persistentvolumeclaims", "create", ""), 1);
    assert_eq!(by(claims, "resourceclaims", "create", ""), 1);
    assert_eq!(by(claims, "pods", "patch", "status"), 1);
    assert_eq!(by(binder, "pods", "create", ""), 1, "the recycler pod");
    assert_eq!(
        by(binder, "pods", "delete", ""),
        1,
        "deleted once it succeeded"
    );
    assert_eq!(by(binder, "persistentvolumes", "delete", ""), 1);
    assert!(by(binder, "persistentvolumes", "patch", "status") > 0);
    assert!(by(binder, "persistentvolumeclaims", "patch", "") > 0);
    for controller in [ephemeral, claims] {
        assert_eq!(by(controller, "persistentvolumes", "patch", ""), 0);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn claims_that_fit_one_volume_bind_oldest_first_under_sixteen_workers() {
    for round in 0..10 {
        let api = MemApi::new();
        for i in 0..16 {
            api.create(&claim(&format!("claim-{i:02}"), &format!("uid-{i}"), "1Gi").build())
                .expect("claim");
        }
        let running = Running::binder_with(
            &api,
            pv::Config {
                claim_workers: 16,
                ..pv::Config::default()
            },
        )
        .await;
        // Every claim found no volume and waits for one, its sync over (a
        // claim still being synced when the volume comes is queued again
        // behind the others). Pending alone says nothing: the server
        // creates claims Pending.
        while value(&running.metrics, "pv_controller_waiting_claims") != 16.0 || !running.is_idle()
        {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        api.create(&volume("the-only-one", "1Gi").build())
            .expect("volume");
        let bound_to = loop {
            let volume = api
                .get::<PersistentVolume>(None, "the-only-one")
                .expect("volume");
            if let Some(reference) = volume.spec.and_then(|s| s.claim_ref) {
                break reference.name;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        };
        running.stop().await;
        assert_eq!(
            bound_to.as_deref(),
            Some("claim-00"),
            "round {round}: the claim queued first gets the volume"
        );
    }
}
