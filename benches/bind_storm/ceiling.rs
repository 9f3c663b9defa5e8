//! The API server's write ceiling for the controller's write mix, in two
//! passes.
//!
//! 1. **Burst.** N concurrent writers, each taking its own pairs of the
//!    storm's shape in turn through the four writes of a bind in the
//!    controller's order (volume spec, claim spec, volume status, claim
//!    status), each write on the answer of the one before, for 5 s; N doubles until the writes a second stop
//!    rising. The pairs are many (writes spread over many objects, as a
//!    storm's are), so the server is not measured on a few objects it keeps
//!    hot. This finds the number of writers that gets the most out of the
//!    server, and the best 5 s it gave.
//! 2. **Sustained.** That many writers, then twice as many, bind as many
//!    fresh pairs as the storm has, each pair once, as fast as the server
//!    lets them: the storm's writes without a controller (no watch-driven
//!    syncs, no cache, no decisions). The faster pass's writes a second are
//!    the ceiling a run is held against. The best of several 5 s samples is above what the server
//!    keeps up for the length of a storm: a server's pace moves by a tenth
//!    or more from one 5 s to the next, and falls as the writes of a long
//!    run pile up in etcd (20,000 pairs written twice over: about 2,500
//!    writes a second in the first pass, 2,100 in the second).
//!
//! With `--ceiling` the sustained pass runs once more after each run, with
//! the writers that won it ([`after`]): the server's pace once the storm's
//! writes are in etcd, beside the one measured before it. Each run reports
//! its efficiency against the pace before it, and against the mean of the
//! two (the server it ran on sat between them).
//!
//! The writers send the controller's User-Agent, so the server records a
//! second field manager on each object, as it does when the controller
//! writes an object the bench created: the same work for every write.
//!
//! The server sends the changes to the watches a storm run has open (the
//! controller's of volumes and claims, the bench's of claims), as it must
//! during a run; in the protobuf form the watches ask for protobuf too, as
//! a controller speaking protobuf would.
//!
//! On a real server the probe also reads the CPU the API server and etcd
//! spent on the sustained pass (`/proc/PID/stat`): their CPU per write, the
//! server's cost of each wire form. A storm's pairs per second against `ceiling / writes per
//! pair` is then how close the controller comes to what the server can
//! take.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ObjectReference, PersistentVolume, PersistentVolumeClaim};
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::runtime::watcher::{self, watcher};
use serde_json::json;
use tokio::task::JoinHandle;

use crate::cluster::Server;
use crate::proto;
use crate::workload::{self, LABEL, Shape};

/// The name prefix of the burst pass's claims and volumes.
const PREFIX: &str = "ceil";

/// The name prefix of the sustained passes' claims and volumes (with the
/// pass's number).
const SUSTAINED_PREFIX: &str = "ceil-run";

/// The name prefix of the pass after the runs.
const AFTER_PREFIX: &str = "ceil-after";

/// How long each number of writers writes.
const STEP: Duration = Duration::from_secs(5);

/// The most writers tried.
const MAX_WRITERS: usize = 256;

/// How many pairs the writers of the burst pass share.
const PAIRS: usize = 4096;

/// The probe's finding.
pub(crate) struct Ceiling {
    /// Writes a second of the sustained pass: the ceiling.
    pub(crate) writes_per_second: f64,
    /// The most writes a second any number of writers reached in one step
    /// of the burst pass.
    pub(crate) burst_writes_per_second: f64,
    /// With how many writers the sustained pass reached it.
    pub(crate) writers: usize,
    /// How the writers wrote.
    pub(crate) wire_form: WireForm,
    /// CPU seconds of the API server per write of the faster sustained
    /// pass (watch events included), on a real server.
    pub(crate) server_cpu_per_write: Option<f64>,
    /// The same for etcd.
    pub(crate) etcd_cpu_per_write: Option<f64>,
}

/// How the probe's writers send a write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WireForm {
    /// PUT of the whole object or its status (`--wire-form replace`).
    Replace,
    /// A JSON merge patch of the fields the write changes, carrying the
    /// resourceVersion, as the controller writes (`--wire-form
    /// merge-patch`, the default).
    MergePatch,
    /// PUT of the whole object or its status in protobuf, answers and
    /// watch events in protobuf (`--wire-form protobuf-replace`; a real
    /// server only).
    ProtobufReplace,
}

impl WireForm {
    /// The form named on the command line.
    pub(crate) fn parse(name: &str) -> Self {
        match name {
            "replace" => Self::Replace,
            "merge-patch" => Self::MergePatch,
            "protobuf-replace" => Self::ProtobufReplace,
            other => {
                panic!("--wire-form is replace, merge-patch or protobuf-replace, not {other:?}")
            }
        }
    }

    /// The form's name in the results.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Replace => "replace",
            Self::MergePatch => "merge-patch",
            Self::ProtobufReplace => "protobuf-replace",
        }
    }
}

/// The probe's writers: their APIs of volumes and claims, and the form
/// their writes take.
#[derive(Clone)]
struct Writers {
    volumes: Api<PersistentVolume>,
    claims: Api<PersistentVolumeClaim>,
    client: kube::Client,
    form: WireForm,
}

/// One pair of the probe, as the server last answered.
struct Pair {
    volume: PersistentVolume,
    claim: PersistentVolumeClaim,
    /// The pair in protobuf, for the protobuf form.
    proto: Option<Box<ProtoPair>>,
}

/// A pair as k8s-pb's messages.
struct ProtoPair {
    volume: k8s_pb::api::core::v1::PersistentVolume,
    claim: k8s_pb::api::core::v1::PersistentVolumeClaim,
}

/// CPU seconds of the API server and of etcd so far, on a real server.
fn server_cpu(server: &Server) -> Option<(f64, f64)> {
    if !server.is_real() {
        return None;
    }
    let apiserver = crate::process::pid_of("kube-apiserver")?;
    let etcd = crate::process::pid_of("etcd")?;
    Some((
        crate::process::cpu_seconds(&apiserver),
        crate::process::cpu_seconds(&etcd),
    ))
}

/// Measures the ceiling on `server` for a storm of `storm` pairs, seeding
/// its own pairs of the storm's shapes (the `plain` mix or the full one;
/// removed with the storm's objects by the server's clean-up).
pub(crate) async fn probe(server: &Server, plain: bool, storm: usize, form: WireForm) -> Ceiling {
    assert!(
        form != WireForm::ProtobufReplace || server.is_real(),
        "the protobuf form needs a real API server (--kubeconfig)"
    );
    let mut pairs = seed(server, PREFIX, PAIRS, plain, form).await;
    let (writers_api, watches) = writers_and_watches(server, form);
    let (mut best_rate, mut best_writers) = (0.0, 1);
    let mut writers = 1;
    let mut flat = 0;
    while writers <= MAX_WRITERS && flat < 2 {
        let cpu = crate::process::cpu_seconds("self");
        let (rate, back) = step(&writers_api, pairs, writers).await;
        // The writers' own cost, to hold against the controller's CPU per
        // write in a storm (the watches' share included in both).
        let cpu_per_write =
            (crate::process::cpu_seconds("self") - cpu) / (rate * STEP.as_secs_f64());
        pairs = back;
        eprintln!(
            "ceiling probe: {writers} writers, {rate:.0} writes/s, {:.0} µs of the bench's CPU per write",
            cpu_per_write * 1e6
        );
        if rate > best_rate * 1.05 {
            flat = 0;
        } else {
            flat += 1;
        }
        if rate > best_rate {
            (best_rate, best_writers) = (rate, writers);
        }
        writers *= 2;
    }
    // The best number of writers moves with the server's noise (the
    // plateau is flat within it), so the sustained pass tries it and twice
    // it, and keeps the faster.
    let mut sustained = (0.0, best_writers, None);
    for (pass, writers) in [best_writers, best_writers * 2].into_iter().enumerate() {
        if writers > MAX_WRITERS {
            continue;
        }
        let prefix = format!("{SUSTAINED_PREFIX}{pass}");
        let fresh = seed(server, &prefix, storm, plain, form).await;
        let cpu = server_cpu(server);
        let rate = once_each(&writers_api, fresh, writers).await;
        let written = (storm * 4) as f64;
        let per_write = cpu
            .zip(server_cpu(server))
            .map(|((api, etcd), (api_now, etcd_now))| {
                ((api_now - api) / written, (etcd_now - etcd) / written)
            });
        eprintln!(
            "ceiling probe, sustained: {writers} writers bound {storm} fresh pairs once each at {rate:.0} writes/s{}",
            per_write.map_or(String::new(), |(api, etcd)| format!(
                ", {:.0} µs of the API server's CPU and {:.0} µs of etcd's per write",
                api * 1e6,
                etcd * 1e6
            ))
        );
        if rate > sustained.0 {
            sustained = (rate, writers, per_write);
        }
    }
    for watch in watches {
        watch.abort();
    }
    Ceiling {
        writes_per_second: sustained.0,
        burst_writes_per_second: best_rate,
        writers: sustained.1,
        wire_form: form,
        server_cpu_per_write: sustained.2.map(|(api, _)| api),
        etcd_cpu_per_write: sustained.2.map(|(_, etcd)| etcd),
    }
}

/// The sustained pass once more, with `writers` writers on `storm` fresh
/// pairs: writes a second, on a server that has taken the runs' writes.
pub(crate) async fn after(
    server: &Server,
    plain: bool,
    storm: usize,
    writers: usize,
    form: WireForm,
) -> f64 {
    let (writers_api, watches) = writers_and_watches(server, form);
    let fresh = seed(server, AFTER_PREFIX, storm, plain, form).await;
    let rate = once_each(&writers_api, fresh, writers).await;
    for watch in watches {
        watch.abort();
    }
    rate
}

/// The writers' APIs, and the watches a storm run has open (the
/// controller's of volumes and claims, the bench's of claims).
fn writers_and_watches(server: &Server, form: WireForm) -> (Writers, [JoinHandle<()>; 3]) {
    let writer = server.writer_client();
    let writers = Writers {
        volumes: Api::all(writer.clone()),
        claims: Api::namespaced(writer.clone(), "default"),
        client: writer,
        form,
    };
    let client = server.client();
    let watches = if form == WireForm::ProtobufReplace {
        [
            "/api/v1/persistentvolumes",
            "/api/v1/persistentvolumeclaims",
            "/api/v1/persistentvolumeclaims",
        ]
        .map(|path| tokio::spawn(proto::drain_watch(client.clone(), path.to_string())))
    } else {
        [
            drain(Api::<PersistentVolume>::all(client.clone())),
            drain(Api::<PersistentVolumeClaim>::all(client.clone())),
            drain(Api::<PersistentVolumeClaim>::all(client)),
        ]
    };
    (writers, watches)
}

/// Creates `count` pairs named `prefix`-i of the storm's shapes, none
/// pre-bound (every pair takes the four writes), and returns them as the
/// server listed them (in protobuf too, for the protobuf form).
async fn seed(
    server: &Server,
    prefix: &str,
    count: usize,
    plain: bool,
    form: WireForm,
) -> Vec<Pair> {
    let claims = (0..count)
        .map(|i| workload::claim_of(prefix, i, &Shape::of(i, plain), "default"))
        .collect();
    server.create_claims(claims).await;
    let volumes = (0..count)
        .map(|i| workload::volume_of(prefix, i, &Shape::of(i, plain), None))
        .collect();
    server.create_volumes(volumes).await;
    let client = server.client();
    let ours = |name: &Option<String>| {
        name.as_deref().is_some_and(|n| {
            n.strip_prefix(prefix)
                .and_then(|rest| rest.strip_prefix('-'))
                .is_some_and(|index| index.bytes().all(|b| b.is_ascii_digit()))
        })
    };
    let listed = ListParams::default().labels(&format!("{}={}", LABEL.0, LABEL.1));
    let mut by_name: HashMap<String, PersistentVolume> =
        Api::<PersistentVolume>::all(client.clone())
            .list(&listed)
            .await
            .expect("probe volumes")
            .items
            .into_iter()
            .filter(|v| ours(&v.metadata.name))
            .map(|v| (v.metadata.name.clone().unwrap_or_default(), v))
            .collect();
    let mut protos = if form == WireForm::ProtobufReplace {
        listed_in_protobuf(&client).await
    } else {
        HashMap::new()
    };
    let pairs: Vec<Pair> = Api::<PersistentVolumeClaim>::namespaced(client, "default")
        .list(&listed)
        .await
        .expect("probe claims")
        .items
        .into_iter()
        .filter(|c| ours(&c.metadata.name))
        .filter_map(|claim| {
            let name = claim.metadata.name.clone()?;
            let volume = by_name.remove(&name)?;
            let proto = protos.remove(&name).map(Box::new);
            Some(Pair {
                volume,
                claim,
                proto,
            })
        })
        .collect();
    assert_eq!(pairs.len(), count, "every probe pair listed");
    assert!(
        form != WireForm::ProtobufReplace || pairs.iter().all(|p| p.proto.is_some()),
        "every probe pair listed in protobuf"
    );
    pairs
}

/// The bench's volumes and claims as listed in protobuf, by name (a pair's
/// volume and claim share it).
async fn listed_in_protobuf(client: &kube::Client) -> HashMap<String, ProtoPair> {
    use k8s_pb::api::core::v1::{PersistentVolumeClaimList, PersistentVolumeList};
    let selector = format!("labelSelector={}%3D{}", LABEL.0, LABEL.1);
    let volumes: PersistentVolumeList = proto::request(
        client,
        http::Method::GET,
        &format!("/api/v1/persistentvolumes?{selector}"),
        None,
    )
    .await;
    let claims: PersistentVolumeClaimList = proto::request(
        client,
        http::Method::GET,
        &format!("/api/v1/namespaces/default/persistentvolumeclaims?{selector}"),
        None,
    )
    .await;
    let name = |meta: &Option<k8s_pb::apimachinery::pkg::apis::meta::v1::ObjectMeta>| {
        meta.as_ref()
            .and_then(|m| m.name.clone())
            .unwrap_or_default()
    };
    let mut volumes: HashMap<String, _> = volumes
        .items
        .into_iter()
        .map(|v| (name(&v.metadata), v))
        .collect();
    claims
        .items
        .into_iter()
        .filter_map(|claim| {
            let key = name(&claim.metadata);
            let volume = volumes.remove(&key)?;
            Some((key, ProtoPair { volume, claim }))
        })
        .collect()
}

/// `writers` writers taking the `pairs` from one shared list until it is
/// empty, each pair through the four writes of a bind once: writes a
/// second, from the first write to the last answer.
async fn once_each(writers_api: &Writers, pairs: Vec<Pair>, writers: usize) -> f64 {
    let left = Arc::new(Mutex::new(pairs));
    let written = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let tasks: Vec<_> = (0..writers)
        .map(|_| {
            let writers_api = writers_api.clone();
            let (left, written) = (Arc::clone(&left), Arc::clone(&written));
            tokio::spawn(async move {
                loop {
                    let next = left.lock().expect("pairs left").pop();
                    let Some(mut pair) = next else { break };
                    bind(&writers_api, &mut pair, 1).await;
                    written.fetch_add(4, Ordering::Relaxed);
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("writer");
    }
    written.load(Ordering::Relaxed) as f64 / start.elapsed().as_secs_f64()
}

/// A watch of every object of `api`, its events read and dropped.
fn drain<K>(api: Api<K>) -> JoinHandle<()>
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + 'static,
{
    tokio::spawn(async move {
        let mut events = std::pin::pin!(watcher(api, watcher::Config::default()));
        while events.next().await.is_some() {}
    })
}

/// `writers` writers for [`STEP`], the pairs dealt out among them:
/// writes a second, and the pairs as last written.
async fn step(writers_api: &Writers, pairs: Vec<Pair>, writers: usize) -> (f64, Vec<Pair>) {
    let written = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let mut shares: Vec<Vec<Pair>> = (0..writers).map(|_| Vec::new()).collect();
    for (i, pair) in pairs.into_iter().enumerate() {
        shares[i % writers].push(pair);
    }
    let start = Instant::now();
    let tasks: Vec<_> = shares
        .into_iter()
        .map(|share| {
            let writers_api = writers_api.clone();
            let (written, stop) = (Arc::clone(&written), Arc::clone(&stop));
            tokio::spawn(async move { write_loop(&writers_api, share, &written, &stop).await })
        })
        .collect();
    tokio::time::sleep(STEP).await;
    stop.store(true, Ordering::Relaxed);
    let mut back = Vec::new();
    for task in tasks {
        back.extend(task.await.expect("writer"));
    }
    let rate = written.load(Ordering::Relaxed) as f64 / start.elapsed().as_secs_f64();
    (rate, back)
}

/// The four writes of a bind on each pair of `share` in turn, over and
/// over, until `stop`: each round sets the claimRef and the volume name
/// again (with a new bind annotation, so every write changes the object)
/// and flips both phases between Bound and Available/Pending.
async fn write_loop(
    writers_api: &Writers,
    mut share: Vec<Pair>,
    written: &AtomicU64,
    stop: &AtomicBool,
) -> Vec<Pair> {
    let mut round = 0u64;
    let mut turn = 0;
    while !stop.load(Ordering::Relaxed) {
        let count = share.len();
        let pair = &mut share[turn];
        turn = (turn + 1) % count;
        round += 1;
        bind(writers_api, pair, round).await;
        written.fetch_add(4, Ordering::Relaxed);
    }
    share
}

/// The four writes of a bind on `pair`: the claimRef and the volume name
/// set (with a bind annotation naming `round`, so every write changes the
/// object), and both phases Bound in odd rounds, Available/Pending in even
/// ones; each write in the writers' [`WireForm`].
async fn bind(writers: &Writers, pair: &mut Pair, round: u64) {
    let name = pair.volume.metadata.name.clone().unwrap_or_default();
    let bound = round % 2 == 1;
    let mark = |meta: &mut k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta| {
        meta.annotations
            .get_or_insert_with(Default::default)
            .insert(k8s_names::ANN_BOUND_BY_CONTROLLER.into(), round.to_string());
    };
    let claim_ref = ObjectReference {
        kind: Some("PersistentVolumeClaim".into()),
        namespace: Some("default".into()),
        name: pair.claim.metadata.name.clone(),
        uid: pair.claim.metadata.uid.clone(),
        ..ObjectReference::default()
    };
    let volume_phase = if bound { "Bound" } else { "Available" };
    let claim_phase = if bound { "Bound" } else { "Pending" };
    match writers.form {
        WireForm::ProtobufReplace => {
            let proto = pair.proto.as_mut().expect("listed in protobuf");
            let client = &writers.client;
            let volume_path = format!("/api/v1/persistentvolumes/{name}");
            let claim_path = format!("/api/v1/namespaces/default/persistentvolumeclaims/{name}");
            let mark =
                |meta: &mut Option<k8s_pb::apimachinery::pkg::apis::meta::v1::ObjectMeta>| {
                    meta.get_or_insert_with(Default::default)
                        .annotations
                        .insert(k8s_names::ANN_BOUND_BY_CONTROLLER.into(), round.to_string());
                };
            mark(&mut proto.volume.metadata);
            proto
                .volume
                .spec
                .get_or_insert_with(Default::default)
                .claim_ref = Some(k8s_pb::api::core::v1::ObjectReference {
                kind: claim_ref.kind.clone(),
                namespace: claim_ref.namespace.clone(),
                name: claim_ref.name.clone(),
                uid: claim_ref.uid.clone(),
                ..Default::default()
            });
            proto.volume = proto::put(
                client,
                &volume_path,
                proto::encode("v1", "PersistentVolume", &proto.volume),
            )
            .await;
            mark(&mut proto.claim.metadata);
            proto
                .claim
                .spec
                .get_or_insert_with(Default::default)
                .volume_name = Some(name.clone());
            proto.claim = proto::put(
                client,
                &claim_path,
                proto::encode("v1", "PersistentVolumeClaim", &proto.claim),
            )
            .await;
            proto
                .volume
                .status
                .get_or_insert_with(Default::default)
                .phase = Some(volume_phase.into());
            proto.volume = proto::put(
                client,
                &format!("{volume_path}/status"),
                proto::encode("v1", "PersistentVolume", &proto.volume),
            )
            .await;
            proto
                .claim
                .status
                .get_or_insert_with(Default::default)
                .phase = Some(claim_phase.into());
            proto.claim = proto::put(
                client,
                &format!("{claim_path}/status"),
                proto::encode("v1", "PersistentVolumeClaim", &proto.claim),
            )
            .await;
        }
        WireForm::Replace => {
            let params = PostParams::default();
            mark(&mut pair.volume.metadata);
            if let Some(spec) = pair.volume.spec.as_mut() {
                spec.claim_ref = Some(claim_ref);
            }
            pair.volume = writers
                .volumes
                .replace(&name, &params, &pair.volume)
                .await
                .expect("volume spec");
            mark(&mut pair.claim.metadata);
            if let Some(spec) = pair.claim.spec.as_mut() {
                spec.volume_name = Some(name.clone());
            }
            pair.claim = writers
                .claims
                .replace(&name, &params, &pair.claim)
                .await
                .expect("claim spec");
            pair.volume
                .status
                .get_or_insert_with(Default::default)
                .phase = Some(volume_phase.into());
            pair.volume = writers
                .volumes
                .replace_status(&name, &params, &pair.volume)
                .await
                .expect("volume status");
            pair.claim.status.get_or_insert_with(Default::default).phase = Some(claim_phase.into());
            pair.claim = writers
                .claims
                .replace_status(&name, &params, &pair.claim)
                .await
                .expect("claim status");
        }
        WireForm::MergePatch => {
            let params = PatchParams::default();
            let version = |meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta| {
                meta.resource_version.clone().unwrap_or_default()
            };
            let annotations = json!({"pv.kubernetes.io/bound-by-controller": round.to_string()});
            let body = json!({
                "metadata": {"resourceVersion": version(&pair.volume.metadata), "annotations": annotations},
                "spec": {"claimRef": claim_ref},
            });
            pair.volume = writers
                .volumes
                .patch(&name, &params, &Patch::Merge(body))
                .await
                .expect("volume spec");
            let body = json!({
                "metadata": {"resourceVersion": version(&pair.claim.metadata), "annotations": annotations},
                "spec": {"volumeName": name},
            });
            pair.claim = writers
                .claims
                .patch(&name, &params, &Patch::Merge(body))
                .await
                .expect("claim spec");
            let body = json!({
                "metadata": {"resourceVersion": version(&pair.volume.metadata)},
                "status": {"phase": volume_phase},
            });
            pair.volume = writers
                .volumes
                .patch_status(&name, &params, &Patch::Merge(body))
                .await
                .expect("volume status");
            let body = json!({
                "metadata": {"resourceVersion": version(&pair.claim.metadata)},
                "status": {"phase": claim_phase},
            });
            pair.claim = writers
                .claims
                .patch_status(&name, &params, &Patch::Merge(body))
                .await
                .expect("claim status");
        }
    }
}
