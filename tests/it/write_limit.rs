//! The write door's limit against a server that sheds load: memapi serves
//! at most a few writes at once and answers the rest 429, as kube-apiserver
//! does past `--max-mutating-requests-inflight` with API Priority and
//! Fairness off. The door learns what the server takes, and a storm stops
//! being turned away.

use crate::harness::check_invariants;
use crate::process::Running;
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use memapi::{MemApi, MemApiConfig, Reactor};
use pv_controller::pv;
use std::time::Duration;
use testkit::*;

/// The writes the server serves at once.
const SEATS: usize = 4;

/// Creates `pairs` fitting volumes and claims named after `wave`.
fn seed_wave(api: &MemApi, wave: &str, pairs: usize) {
    for i in 0..pairs {
        api.create(&volume(&format!("volume-{wave}-{i:03}"), "1Gi").build())
            .expect("seed");
        let name = format!("claim-{wave}-{i:03}");
        api.create(&claim(&name, &format!("uid-{name}"), "1Gi").build())
            .expect("seed");
    }
}

fn all_bound(api: &MemApi) -> bool {
    api.list::<PersistentVolumeClaim>()
        .iter()
        .all(|claim| claim.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound"))
}

/// 64 plans at once against a server of four seats: the first wave meets
/// 429s and cuts the limit; in the second, with the limit learned, fewer
/// than one write in four served is turned away (one in ten here; without
/// the limit, more than four were for each served).
#[tokio::test(start_paused = true)]
async fn a_storm_against_a_server_that_sheds_load_learns_what_it_takes() {
    let api = MemApi::with_config(MemApiConfig {
        max_mutating_in_flight: Some(SEATS),
        ..MemApiConfig::default()
    });
    // Each write takes 20 ms to serve, so writes sent together overlap.
    api.add_reactor(
        Reactor::any()
            .writes_only()
            .delay(Duration::from_millis(20))
            .always(),
    );
    seed_wave(&api, "first", 100);
    let running = Running::binder_with(
        &api,
        pv::Config {
            claim_workers: 64,
            ..pv::Config::default()
        },
    )
    .await;
    running.settle().await;
    assert!(all_bound(&api), "the first wave is bound");
    let first = api.requests().total_with_code(429);
    assert!(first > 0, "the first wave met the server's limit");

    api.reset_requests();
    seed_wave(&api, "second", 100);
    running.settle().await;
    assert!(all_bound(&api), "the second wave is bound");
    let stats = api.requests();
    let refused = stats.total_with_code(429);
    let served = stats
        .log()
        .iter()
        .filter(|entry| {
            entry.verb.is_write() && entry.code.is_some_and(|code| (200..300).contains(&code))
        })
        .count() as u64;
    assert!(
        refused * 4 <= served,
        "{refused} writes turned away for {served} served (first wave: {first})"
    );
    assert_eq!(check_invariants(&api), Vec::<String>::new());
    running.stop().await;
}
