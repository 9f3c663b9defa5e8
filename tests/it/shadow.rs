//! Shadow mode (`--shadow`) on memapi: a normal process runs the cluster while a second
//! process runs `--shadow` beside it, through a mixed workload (static
//! binding among equivalent volumes, pre-bound pairs, a hand-off to an
//! external provisioner, the default class given after the fact, recycle
//! and delete of released hostPath volumes, a pod's ephemeral volume, a
//! pod's ResourceClaim from a template): every decision of shadow mode
//! agrees with what the reference did, and shadow mode sent no write at all
//! (counted by a service in front of memapi). A divergent actor that binds
//! a claim to a larger volume than the best fit is reported with both
//! choices.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use kube::client::ClientBuilder;
use memapi::{MemApi, MemApiService};
use pv_controller::pv::{self, Settings, VolumePlugins};
use pv_controller::testing::stand_in_kubelet;
use pv_controller::{App, AppConfig, ClientOptions, Clients, ShadowConfig, ShadowReport};
use serde_json::Value;
use testkit::{claim, default_class, pod, storage_class, volume, with_ephemeral_volume};

use crate::process::settle;

/// memapi's service, counting the requests that are not reads.
#[derive(Clone)]
struct CountingWrites {
    inner: MemApiService,
    writes: Arc<AtomicU64>,
}

impl tower::Service<http::Request<kube::client::Body>> for CountingWrites {
    type Response = <MemApiService as tower::Service<http::Request<kube::client::Body>>>::Response;
    type Error = <MemApiService as tower::Service<http::Request<kube::client::Body>>>::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<kube::client::Body>) -> Self::Future {
        if request.method() != http::Method::GET {
            self.writes.fetch_add(1, Ordering::SeqCst);
        }
        Box::pin(self.inner.call(request))
    }
}

/// Shadow mode's clients, whose every non-read request is counted.
fn counted_clients(api: &MemApi, writes: &Arc<AtomicU64>) -> Clients {
    let service = || CountingWrites {
        inner: api.service(),
        writes: Arc::clone(writes),
    };
    Clients::build(
        ClientBuilder::new(service(), "default"),
        ClientBuilder::new(service(), "default"),
        ClientBuilder::new(service(), "default"),
        ClientOptions::default(),
    )
}

fn plain_clients(api: &MemApi) -> Clients {
    Clients::build(
        ClientBuilder::new(api.service(), "default"),
        ClientBuilder::new(api.service(), "default"),
        ClientBuilder::new(api.service(), "default"),
        ClientOptions::default(),
    )
}

fn config(shadow: bool) -> AppConfig {
    let options = <pv_controller::Options as clap::Parser>::parse_from(["pv-controller"]);
    let plugins = pv_controller::plugin_config(&options).unwrap();
    AppConfig {
        persistentvolume: pv::Config {
            resync_period: Duration::from_secs(5),
            settings: Settings {
                plugins: VolumePlugins::from_config(&plugins),
                ..Settings::default()
            },
            ..pv::Config::default()
        },
        shadow: shadow.then(|| ShadowConfig {
            window: Duration::from_secs(60),
        }),
        ..AppConfig::default()
    }
}

/// A process running until the returned sender fires.
struct Running {
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
    idle: pv_controller::IdleProbe,
    metrics: Arc<pv_controller::Metrics>,
}

async fn start(clients: Clients, config: AppConfig) -> (Running, Option<ShadowReport>) {
    let app = App::start(clients, config).await.expect("starts");
    let comparison = app.shadow_report();
    let idle = app.idle_probe();
    let metrics = app.metrics();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        app.run(async move {
            let _ = stopped.await;
        })
        .await
        .expect("clean stop");
    });
    (
        Running {
            stop,
            task,
            idle,
            metrics,
        },
        comparison,
    )
}

impl Running {
    /// The requests the process tried that are not reads (a write the
    /// closed gate refused counts too).
    fn tried_writes(&self) -> Vec<String> {
        self.metrics
            .render()
            .unwrap()
            .lines()
            .filter(|l| l.starts_with("pv_controller_api_requests_total{"))
            .filter(|l| !l.contains("method=\"GET\""))
            .map(str::to_string)
            .collect()
    }

    async fn stop(self) {
        let _ = self.stop.send(());
        self.task.await.expect("joined");
    }
}

/// The mixed workload's objects.
fn seed(api: &MemApi, scratch: &std::path::Path) {
    api.create(&storage_class(
        "external",
        "example.com/external",
        "Immediate",
    ))
    .unwrap();
    api.create(&default_class(storage_class(
        "default",
        "example.com/default",
        "Immediate",
    )))
    .unwrap();
    for (i, size) in ["1Gi", "1Gi", "1Gi", "2Gi", "5Gi"].iter().enumerate() {
        api.create(&volume(&format!("pool-{i}"), size).build())
            .unwrap();
    }
    for i in 0..3 {
        api.create(
            &claim(&format!("static-{i}"), &format!("uid-static-{i}"), "1Gi")
                .class("")
                .build(),
        )
        .unwrap();
    }
    api.create(
        &volume("pre-bound", "1Gi")
            .bound_to("uid-pre", "pre")
            .build(),
    )
    .unwrap();
    api.create(&claim("pre", "uid-pre", "1Gi").class("").build())
        .unwrap();
    api.create(
        &claim("external", "uid-external", "1Gi")
            .class("external")
            .build(),
    )
    .unwrap();
    // Larger than any volume: it gets the default class, then a provisioner.
    let mut unclassed = claim("unclassed", "uid-unclassed", "10Gi").build();
    unclassed.spec.as_mut().unwrap().storage_class_name = None;
    api.create(&unclassed).unwrap();
    for (name, policy) in [("deleted", "Delete"), ("recycled", "Recycle")] {
        let released = volume(name, "1Gi")
            .bound_to(&format!("uid-gone-{name}"), &format!("gone-{name}"))
            .phase("Bound")
            .policy(policy)
            .host_path(&scratch.join(name).display().to_string())
            .build();
        api.create(&released).unwrap();
    }
    let web = with_ephemeral_volume(
        pod("web", &[], "Pending", None),
        "cache",
        claim("template", "", "1Gi").class("external").build(),
    );
    api.create(&web).unwrap();
    for object in [
        serde_json::json!({ "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": { "name": "gpu", "namespace": "default" }, "spec": { "spec": {} } }),
        serde_json::json!({ "apiVersion": "v1", "kind": "Pod",
            "metadata": { "name": "trainer", "namespace": "default", "uid": "uid-trainer" },
            "spec": { "containers": [ { "name": "c", "image": "busybox" } ],
                      "resourceClaims": [ { "name": "gpu", "resourceClaimTemplateName": "gpu" } ] } }),
    ] {
        api.load_yaml(&object.to_string()).unwrap();
    }
}

/// The kinds of decisions judged so far, from `/shadow`'s report.
fn kinds(report: &Value) -> Vec<String> {
    report["counts"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|row| row["kind"].as_str().map(str::to_string))
        .collect()
}

#[tokio::test(start_paused = true)]
async fn shadow_mode_beside_the_reference_agrees_on_every_decision_and_writes_nothing() {
    let api = MemApi::new();
    let scratch = std::env::temp_dir().join(format!("pv-controller-shadow-{}", std::process::id()));
    for name in ["deleted", "recycled"] {
        std::fs::create_dir_all(scratch.join(name)).unwrap();
    }
    seed(&api, &scratch);
    let kubelet = tokio::spawn(stand_in_kubelet(api.client()));
    let writes = Arc::new(AtomicU64::new(0));
    let (shadow, comparison) = start(counted_clients(&api, &writes), config(true)).await;
    let comparison = comparison.expect("shadow mode's comparison");
    // Shadow mode decides first; the reference does the work a moment
    // later, well within the window.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let (reference, none) = start(plain_clients(&api), config(false)).await;
    assert!(none.is_none());
    settle(&api, &reference.idle).await;
    // The external provisioner makes the hand-off's volumes.
    for claim in api.list::<PersistentVolumeClaim>() {
        let handed = claim
            .metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(k8s_names::ANN_STORAGE_PROVISIONER));
        let uid = claim.metadata.uid.clone().unwrap_or_default();
        let name = format!("pvc-{uid}");
        if handed && api.get::<PersistentVolume>(None, &name).is_none() {
            let spec = claim.spec.clone().unwrap_or_default();
            let size = spec
                .resources
                .and_then(|r| r.requests)
                .and_then(|r| r.get("storage").map(|q| q.0.clone()))
                .unwrap_or_default();
            let class = spec.storage_class_name.unwrap_or_default();
            let mut provisioned = volume(&name, &size)
                .bound_to(&uid, claim.metadata.name.as_deref().unwrap_or_default())
                .class(&class)
                .build();
            provisioned
                .metadata
                .annotations
                .get_or_insert_with(Default::default)
                .insert(
                    k8s_names::ANN_DYNAMICALLY_PROVISIONED.into(),
                    format!("example.com/{class}"),
                );
            if let Some(reference) = provisioned.spec.as_mut().and_then(|s| s.claim_ref.as_mut()) {
                reference.namespace = claim.metadata.namespace.clone();
            }
            api.create(&provisioned).unwrap();
        }
    }
    settle(&api, &reference.idle).await;
    // A claim's deletion releases its volume: reclaimed by both.
    assert!(api.remove::<PersistentVolumeClaim>(Some("default"), "static-0"));
    settle(&api, &reference.idle).await;
    tokio::time::sleep(Duration::from_secs(120)).await;
    settle(&api, &shadow.idle).await;
    let report = comparison.report();
    let tried = shadow.tried_writes();
    shadow.stop().await;
    reference.stop().await;
    kubelet.abort();
    std::fs::remove_dir_all(&scratch).ok();

    assert_eq!(
        writes.load(Ordering::SeqCst),
        0,
        "shadow mode sent no write"
    );
    assert!(tried.is_empty(), "nor tried one: {tried:?}");
    let (agree, differ) = comparison.totals();
    println!("shadow mode beside the reference: {agree} decisions agree, {differ} differ");
    assert_eq!(differ, 0, "every decision agrees: {report:#}");
    assert!(agree >= 15, "decisions judged: {agree}: {report:#}");
    let judged = kinds(&report);
    // The recycle is judged by its pod: shadow mode follows the reference's
    // recycle, and finds the volume Available already (no unbind of its own).
    for kind in [
        "bind",
        "provisioning",
        "default_class",
        "volume_phase",
        "delete_volume",
        "recycle",
        "create_claim",
        "generate_claim",
        "record_claims",
    ] {
        assert!(
            judged.iter().any(|k| k == kind),
            "{kind} judged: {judged:?}"
        );
    }
    assert_eq!(report["pending"], 0, "{report:#}");
}

#[tokio::test(start_paused = true)]
async fn a_divergent_bind_is_reported_with_both_choices() {
    let api = MemApi::new();
    api.create(&volume("small", "1Gi").build()).unwrap();
    api.create(&volume("big", "5Gi").build()).unwrap();
    api.create(&claim("c", "uid-c", "1Gi").class("").build())
        .unwrap();
    // The other controller binds the claim to the larger volume first.
    api.put(
        &volume("big", "5Gi")
            .bound_to("uid-c", "c")
            .phase("Bound")
            .build(),
    )
    .unwrap();
    api.put(
        &claim("c", "uid-c", "1Gi")
            .class("")
            .volume_name("big")
            .phase("Bound")
            .annotation(k8s_names::ANN_BIND_COMPLETED, "yes")
            .build(),
    )
    .unwrap();
    let writes = Arc::new(AtomicU64::new(0));
    let (shadow, comparison) = start(counted_clients(&api, &writes), config(true)).await;
    let comparison = comparison.expect("shadow mode's comparison");
    settle(&api, &shadow.idle).await;
    // A second claim, bound by the divergent actor while shadow mode watches.
    api.create(&volume("small-2", "1Gi").build()).unwrap();
    api.create(&volume("big-2", "5Gi").build()).unwrap();
    api.create(&claim("d", "uid-d", "1Gi").class("").build())
        .unwrap();
    api.put(
        &volume("big-2", "5Gi")
            .bound_to("uid-d", "d")
            .phase("Bound")
            .build(),
    )
    .unwrap();
    api.put(
        &claim("d", "uid-d", "1Gi")
            .class("")
            .volume_name("big-2")
            .phase("Bound")
            .annotation(k8s_names::ANN_BIND_COMPLETED, "yes")
            .build(),
    )
    .unwrap();
    settle(&api, &shadow.idle).await;
    tokio::time::sleep(Duration::from_secs(120)).await;
    let report = comparison.report();
    shadow.stop().await;
    assert_eq!(writes.load(Ordering::SeqCst), 0);
    let differences = report["differences"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let named = differences.iter().any(|d| {
        d["kind"] == "bind"
            && d["object"]
                .as_str()
                .is_some_and(|o| o.ends_with("default/d"))
            && d["ours"]
                .as_str()
                .is_some_and(|ours| ours.starts_with("bind to volume small"))
            && d["upstream"] == "bound to volume big-2"
    });
    assert!(named, "the divergent bind of d is named: {report:#}");
}

#[tokio::test(start_paused = true)]
async fn a_volume_reserved_for_an_intended_bind_stays_reserved_across_resyncs() {
    let api = MemApi::new();
    api.create(&volume("only", "1Gi").build()).unwrap();
    api.create(&claim("a", "uid-a", "1Gi").class("").build())
        .unwrap();
    let writes = Arc::new(AtomicU64::new(0));
    let (shadow, comparison) = start(counted_clients(&api, &writes), config(true)).await;
    let comparison = comparison.expect("shadow mode's comparison");
    settle(&api, &shadow.idle).await;
    // A second claim for the same volume, synced again and again while
    // nobody carries out the first claim's bind.
    api.create(&claim("b", "uid-b", "1Gi").class("").build())
        .unwrap();
    tokio::time::sleep(Duration::from_secs(120)).await;
    let report = comparison.report();
    shadow.stop().await;
    assert_eq!(writes.load(Ordering::SeqCst), 0);
    let binds: Vec<_> = report["differences"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|d| d["kind"] == "bind")
        .map(|d| d["object"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(
        binds,
        ["persistentvolumeclaims default/a"],
        "only the first claim would have been bound to the one volume: {report:#}"
    );
}
