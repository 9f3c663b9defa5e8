//! The periodic resync on a settled cluster: bindings a sync found complete
//! are passed by while neither of their two objects changes, and free
//! volumes found Available while they do not change; everything else is
//! synced at every period.

use std::time::Duration;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use memapi::MemApi;
use pv_controller::pv;
use testkit::*;

use crate::harness::{Running, seed_pairs};
use crate::process::value;

const PERIOD: Duration = Duration::from_secs(5);

/// The binder's configuration with the resync period of these tests.
fn every_period() -> pv::Config {
    pv::Config {
        resync_period: PERIOD,
        ..pv::Config::default()
    }
}

/// `object` with the label `team=a` added, as a user's edit.
fn labelled<K: kube::Resource>(mut object: K) -> K {
    object
        .meta_mut()
        .labels
        .get_or_insert_with(Default::default)
        .insert("team".into(), "a".into());
    object
}

/// How many syncs of `kind` ended well so far.
fn synced(running: &Running, kind: &str) -> f64 {
    value(
        &running.metrics,
        &format!(
            "pv_controller_sync_duration_seconds_count{{controller=\"{}\",kind=\"{kind}\",result=\"ok\"}}",
            k8s_names::PERSISTENTVOLUME_BINDER_CONTROLLER
        ),
    )
}

/// Syncs of claims and of volumes during three and a half resync periods
/// (paused time moves on only once the syncs due at one moment are done).
async fn syncs_over_three_periods(running: &Running) -> (f64, f64) {
    let claims = synced(running, "claim");
    let volumes = synced(running, "volume");
    tokio::time::sleep(PERIOD * 3 + PERIOD / 2).await;
    (
        synced(running, "claim") - claims,
        synced(running, "volume") - volumes,
    )
}

#[tokio::test(start_paused = true)]
async fn the_resync_passes_settled_bindings_by_until_one_of_their_objects_changes() {
    let api = MemApi::new();
    for i in 0..3 {
        api.create(&volume(&format!("volume-{i}"), "1Gi").build())
            .expect("seed");
        api.create(&claim(&format!("claim-{i}"), &format!("uid-{i}"), "1Gi").build())
            .expect("seed");
    }
    api.create(&claim("too-big", "uid-big", "100Gi").build())
        .expect("seed");
    api.create(&volume("spare", "5Gi").build()).expect("seed");
    let running = Running::binder_with(&api, every_period()).await;
    running.settle().await;
    let bound = api
        .list::<PersistentVolumeClaim>()
        .iter()
        .filter(|c| {
            c.spec
                .as_ref()
                .and_then(|s| s.volume_name.as_ref())
                .is_some()
        })
        .count();
    assert_eq!(bound, 3);

    // Settling took several periods: every binding has been found complete
    // by now, and the spare volume found Available, and only the claim
    // still waiting is synced at each period (three or four periods,
    // depending on where the sleep falls).
    let (claims, volumes) = syncs_over_three_periods(&running).await;
    assert!(
        (3.0..=4.0).contains(&claims),
        "claims synced {claims} times"
    );
    assert_eq!(volumes, 0.0);

    // A user labels one bound claim: its own event syncs the claim, and
    // the next resync syncs its volume once, whose binding record names the
    // claim's older version; then both are passed by again.
    let claim = api
        .get::<PersistentVolumeClaim>(Some("default"), "claim-1")
        .expect("claim");
    api.put(&labelled(claim)).expect("label");
    let (claims, volumes) = syncs_over_three_periods(&running).await;
    assert!(
        (4.0..=5.0).contains(&claims),
        "claims synced {claims} times"
    );
    assert_eq!(volumes, 1.0);

    let (claims, volumes) = syncs_over_three_periods(&running).await;
    assert!(
        (3.0..=4.0).contains(&claims),
        "claims synced {claims} times"
    );
    assert_eq!(volumes, 0.0);

    // A user labels the spare volume: its own event syncs it once, and the
    // resync passes it by again.
    let spare = api.get::<PersistentVolume>(None, "spare").expect("spare");
    api.put(&labelled(spare)).expect("label");
    let (_, volumes) = syncs_over_three_periods(&running).await;
    assert_eq!(volumes, 1.0);
    let (_, volumes) = syncs_over_three_periods(&running).await;
    assert_eq!(volumes, 0.0);
    running.stop().await;
}

/// Writes of every kind the server was asked for since its counters were
/// reset, as `verb resource/subresource`.
fn writes(api: &MemApi) -> Vec<String> {
    api.requests()
        .log()
        .iter()
        .filter(|entry| entry.verb.is_write())
        .map(|entry| {
            format!(
                "{} {}/{}",
                entry.verb,
                entry.resource,
                entry.subresource.as_deref().unwrap_or("")
            )
        })
        .collect()
}

#[tokio::test(start_paused = true)]
async fn a_controller_started_on_a_settled_cluster_writes_nothing() {
    let api = MemApi::new();
    seed_pairs(&api, 20);
    for i in 0..5 {
        api.create(&volume(&format!("spare-{i}"), "5Gi").build())
            .expect("seed");
    }
    let first = Running::binder_with(&api, every_period()).await;
    first.settle().await;
    api.delete::<PersistentVolumeClaim>(Some("default"), "claim-00")
        .expect("delete a claim of a retained volume");
    first.settle().await;
    first.stop().await;
    let released = api
        .get::<PersistentVolume>(None, "volume-00")
        .expect("volume");
    assert_eq!(
        released.status.and_then(|s| s.phase).as_deref(),
        Some("Released")
    );

    api.reset_requests();
    let second = Running::binder_with(&api, every_period()).await;
    second.settle().await;
    tokio::time::sleep(PERIOD * 3).await;
    second.settle().await;
    assert_eq!(
        writes(&api),
        Vec::<String>::new(),
        "bound pairs, free volumes and a retained volume are settled"
    );
    assert!(synced(&second, "volume") >= 25.0, "every volume was synced");
    second.stop().await;
}

/// A watch that lost a change of a volume leaves the controller's copy
/// stale: the bind written on it meets a 409, and the controller then reads
/// the volume again, so the retry binds on the server's copy (keeping the
/// change it never saw) instead of meeting the same 409 forever.
#[tokio::test(start_paused = true)]
async fn a_change_a_watch_lost_is_repaired_by_the_retry_after_a_conflict() {
    let api = MemApi::new();
    api.create(&volume("volume", "1Gi").build()).expect("seed");
    let running = Running::binder_with(&api, every_period()).await;
    running.settle().await;

    api.lose_events("persistentvolumes", 1).expect("served");
    let volume = api.get::<PersistentVolume>(None, "volume").expect("volume");
    api.put(&labelled(volume)).expect("label");
    api.reset_requests();
    api.create(&claim("claim", "uid", "1Gi").build())
        .expect("claim");

    let deadline = tokio::time::Instant::now() + PERIOD * 12;
    let bound = loop {
        let claim = api
            .get::<PersistentVolumeClaim>(Some("default"), "claim")
            .expect("claim");
        let phase = claim.status.and_then(|s| s.phase);
        if phase.as_deref() == Some("Bound") || tokio::time::Instant::now() >= deadline {
            break phase;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(bound.as_deref(), Some("Bound"));
    let volume = api.get::<PersistentVolume>(None, "volume").expect("volume");
    assert_eq!(
        volume
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("team"))
            .map(String::as_str),
        Some("a"),
        "the change the watch lost is kept"
    );
    assert_eq!(
        api.requests().total_with_code(409),
        1,
        "one conflict, then the bind on the server's copy"
    );
    running.stop().await;
}
