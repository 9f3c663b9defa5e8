//! The API server's write ceiling for the controller's write mix: N
//! concurrent writers, each taking its own pairs of the storm's shape in
//! turn through the four writes of a bind (volume spec, claim spec, claim
//! status, volume status), each write on the answer of the one before; N
//! doubles until the writes a second stop rising. The pairs are many
//! (writes spread over many objects, as a storm's are), so the server
//! is not measured on a few objects it keeps hot. The server sends the
//! changes to the watches a storm run has open (the controller's of
//! volumes and claims, the bench's of claims), as it must during a run. A
//! storm's pairs per second against `ceiling / writes per pair` is then
//! how close the controller comes to what the server can take.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ObjectReference, PersistentVolume, PersistentVolumeClaim};
use kube::Api;
use kube::api::{ListParams, PostParams};
use kube::runtime::watcher::{self, watcher};
use tokio::task::JoinHandle;

use crate::cluster::Server;
use crate::workload::{self, LABEL, Shape};

/// The name prefix of the probe's claims and volumes.
const PREFIX: &str = "ceil";

/// How long each number of writers writes.
const STEP: Duration = Duration::from_secs(5);

/// The most writers tried.
const MAX_WRITERS: usize = 256;

/// How many pairs the writers share.
const PAIRS: usize = 4096;

/// The probe's finding.
pub(crate) struct Ceiling {
    /// The most writes a second any number of writers reached.
    pub(crate) writes_per_second: f64,
    /// With how many writers.
    pub(crate) writers: usize,
}

/// One pair of the probe, as the server last answered.
struct Pair {
    volume: PersistentVolume,
    claim: PersistentVolumeClaim,
}

/// Measures the ceiling on `server`, seeding its own pairs of the storm's
/// shapes (the `plain` mix or the full one; removed with the storm's
/// objects by the server's clean-up).
pub(crate) async fn probe(server: &Server, plain: bool) -> Ceiling {
    let claims = (0..PAIRS)
        .map(|i| workload::claim_of(PREFIX, i, &Shape::of(i, plain), "default"))
        .collect();
    server.create_claims(claims).await;
    let volumes = (0..PAIRS)
        .map(|i| workload::volume_of(PREFIX, i, &Shape::of(i, plain), None))
        .collect();
    server.create_volumes(volumes).await;
    let client = server.client();
    let volumes: Api<PersistentVolume> = Api::all(client.clone());
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), "default");
    let watches = [
        drain(Api::<PersistentVolume>::all(client.clone())),
        drain(Api::<PersistentVolumeClaim>::all(client.clone())),
        drain(Api::<PersistentVolumeClaim>::all(client)),
    ];
    let is_probe = |name: &Option<String>| {
        name.as_deref()
            .is_some_and(|n| n.starts_with(&format!("{PREFIX}-")))
    };
    let listed = ListParams::default().labels(&format!("{}={}", LABEL.0, LABEL.1));
    let mut by_name: HashMap<String, PersistentVolume> = volumes
        .list(&listed)
        .await
        .expect("probe volumes")
        .items
        .into_iter()
        .filter(|v| is_probe(&v.metadata.name))
        .map(|v| (v.metadata.name.clone().unwrap_or_default(), v))
        .collect();
    let mut pairs: Vec<Pair> = claims
        .list(&listed)
        .await
        .expect("probe claims")
        .items
        .into_iter()
        .filter(|c| is_probe(&c.metadata.name))
        .filter_map(|claim| {
            let volume = by_name.remove(claim.metadata.name.as_deref()?)?;
            Some(Pair { volume, claim })
        })
        .collect();
    assert_eq!(pairs.len(), PAIRS, "every probe pair listed");
    let mut best = Ceiling {
        writes_per_second: 0.0,
        writers: 0,
    };
    let mut writers = 1;
    let mut flat = 0;
    while writers <= MAX_WRITERS && flat < 2 {
        let (rate, back) = step(&volumes, &claims, pairs, writers).await;
        pairs = back;
        eprintln!("ceiling probe: {writers} writers, {rate:.0} writes/s");
        if rate > best.writes_per_second * 1.05 {
            flat = 0;
        } else {
            flat += 1;
        }
        if rate > best.writes_per_second {
            best = Ceiling {
                writes_per_second: rate,
                writers,
            };
        }
        writers *= 2;
    }
    for watch in watches {
        watch.abort();
    }
    best
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
async fn step(
    volumes: &Api<PersistentVolume>,
    claims: &Api<PersistentVolumeClaim>,
    pairs: Vec<Pair>,
    writers: usize,
) -> (f64, Vec<Pair>) {
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
            let (volumes, claims) = (volumes.clone(), claims.clone());
            let (written, stop) = (Arc::clone(&written), Arc::clone(&stop));
            tokio::spawn(async move { write_loop(&volumes, &claims, share, &written, &stop).await })
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
    volumes: &Api<PersistentVolume>,
    claims: &Api<PersistentVolumeClaim>,
    mut share: Vec<Pair>,
    written: &AtomicU64,
    stop: &AtomicBool,
) -> Vec<Pair> {
    let params = PostParams::default();
    let mut round = 0u64;
    let mut turn = 0;
    while !stop.load(Ordering::Relaxed) {
        let count = share.len();
        let pair = &mut share[turn];
        turn = (turn + 1) % count;
        let name = pair.volume.metadata.name.clone().unwrap_or_default();
        round += 1;
        let bound = round % 2 == 1;
        let mark = |meta: &mut k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta| {
            meta.annotations
                .get_or_insert_with(Default::default)
                .insert(
                    "pv.kubernetes.io/bound-by-controller".into(),
                    round.to_string(),
                );
        };
        mark(&mut pair.volume.metadata);
        if let Some(spec) = pair.volume.spec.as_mut() {
            spec.claim_ref = Some(ObjectReference {
                kind: Some("PersistentVolumeClaim".into()),
                namespace: Some("default".into()),
                name: pair.claim.metadata.name.clone(),
                uid: pair.claim.metadata.uid.clone(),
                ..ObjectReference::default()
            });
        }
        pair.volume = volumes
            .replace(&name, &params, &pair.volume)
            .await
            .expect("volume spec");
        mark(&mut pair.claim.metadata);
        if let Some(spec) = pair.claim.spec.as_mut() {
            spec.volume_name = Some(name.clone());
        }
        pair.claim = claims
            .replace(&name, &params, &pair.claim)
            .await
            .expect("claim spec");
        let claim_phase = if bound { "Bound" } else { "Pending" };
        pair.claim.status.get_or_insert_with(Default::default).phase = Some(claim_phase.into());
        pair.claim = claims
            .replace_status(&name, &params, &pair.claim)
            .await
            .expect("claim status");
        let volume_phase = if bound { "Bound" } else { "Available" };
        pair.volume
            .status
            .get_or_insert_with(Default::default)
            .phase = Some(volume_phase.into());
        pair.volume = volumes
            .replace_status(&name, &params, &pair.volume)
            .await
            .expect("volume status");
        written.fetch_add(4, Ordering::Relaxed);
    }
    share
}
