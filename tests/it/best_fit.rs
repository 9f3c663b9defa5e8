//! Best fit whatever the arrival order and concurrency: a claim gets the
//! smallest fitting volume it would get in a quiet cluster, new volumes are
//! candidates before their own phase write, and several workers never
//! reserve one volume.

use std::time::Duration;

use crate::harness::{Running, check_invariants, recorded_events};
use k8s_names::ANN_STORAGE_PROVISIONER;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use memapi::{MemApi, Reactor, Verb};
use pv_controller::pv;
use testkit::*;

/// Runs the controller with `claim_workers` and `volume_workers` on `api`
/// until it settles.
async fn settle_with_workers(api: &MemApi, claim_workers: usize, volume_workers: usize) {
    let running = Running::binder_with(
        api,
        pv::Config {
            claim_workers,
            volume_workers,
            ..pv::Config::default()
        },
    )
    .await;
    running.settle().await;
    running.stop().await;
}

fn volume_name_of(api: &MemApi, claim: &str) -> Option<String> {
    api.get::<PersistentVolumeClaim>(Some("default"), claim)
        .and_then(|c| c.spec?.volume_name)
}

fn phase_of_volume(api: &MemApi, name: &str) -> Option<String> {
    api.get::<PersistentVolume>(None, name)
        .and_then(|v| v.status?.phase)
}

/// The race of issue 11: three new volumes and one claim, all there before
/// the controller starts. The claim used to wait for the first volume to
/// turn Available, and the first one was the large one (name order); now
/// every new volume is a candidate from the first sync, and the claim gets
/// the small one, whatever the names, the order of creation or the number
/// of workers.
#[tokio::test(start_paused = true)]
async fn a_claim_there_before_the_controller_gets_the_smallest_new_volume() {
    let shapes = [
        ["a-large", "b-medium", "c-small"],
        ["c-large", "b-medium", "a-small"],
        ["b-large", "c-medium", "a-small"],
    ];
    for names in shapes {
        for (claim_workers, volume_workers) in [(1, 1), (4, 4), (16, 4)] {
            let api = MemApi::new();
            for (name, size) in names.iter().zip(["10Gi", "5Gi", "1Gi"]) {
                api.create(&volume(name, size).build()).expect("seed");
            }
            api.create(&claim("claim", "uid", "1Gi").build())
                .expect("seed");
            api.reset_requests();
            settle_with_workers(&api, claim_workers, volume_workers).await;

            let small = names[2];
            assert_eq!(
                volume_name_of(&api, "claim").as_deref(),
                Some(small),
                "{names:?} with {claim_workers}/{volume_workers} workers; events {:?}",
                recorded_events(&api)
            );
            assert_eq!(phase_of_volume(&api, small).as_deref(), Some("Bound"));
            for other in &names[..2] {
                assert_eq!(phase_of_volume(&api, other).as_deref(), Some("Available"));
            }
            let stats = api.requests();
            let volume_status = stats.count(Verb::Patch, "persistentvolumes", Some("status"));
            assert_eq!(
                volume_status, 3,
                "Bound for the small one, Available for the others, nothing for the small one's Pending"
            );
            assert_eq!(stats.total_with_code(409), 0);
            assert_eq!(check_invariants(&api), Vec::<String>::new());
        }
    }
}

/// Many claims, few volumes, several workers: 40 claims, four of each size
/// from 1 to 10 Gi, and one volume of each size, with every volume write
/// slowed down so that many bindings are under way at once. Each volume
/// goes to exactly one claim, of its own size (its best fit); no volume is
/// reserved twice (one claimRef write each, no conflict), and the other 30
/// claims wait, Pending.
#[tokio::test(start_paused = true)]
async fn several_workers_never_reserve_one_volume() {
    let api = MemApi::new();
    for size in 1..=10 {
        api.create(&volume(&format!("volume-{size:02}"), &format!("{size}Gi")).build())
            .expect("seed");
        for copy in 0..4 {
            let name = format!("claim-{size:02}-{copy}");
            api.create(&claim(&name, &format!("uid-{name}"), &format!("{size}Gi")).build())
                .expect("seed");
        }
    }
    api.add_reactor(
        Reactor::on(Verb::Patch, "persistentvolumes")
            .delay(Duration::from_millis(50))
            .always(),
    );
    api.reset_requests();
    settle_with_workers(&api, 8, 4).await;
    api.clear_reactors();

    let claims = api.list::<PersistentVolumeClaim>();
    let mut bound = 0;
    for claim in &claims {
        let name = claim.metadata.name.clone().unwrap_or_default();
        let phase = claim.status.as_ref().and_then(|s| s.phase.clone());
        match claim.spec.as_ref().and_then(|s| s.volume_name.clone()) {
            Some(volume) => {
                bound += 1;
                let size = &name["claim-".len().."claim-".len() + 2];
                assert_eq!(volume, format!("volume-{size}"), "{name} got its best fit");
                assert_eq!(phase.as_deref(), Some("Bound"), "{name}");
            }
            None => assert_eq!(phase.as_deref(), Some("Pending"), "{name} waits"),
        }
    }
    assert_eq!(bound, 10, "every volume is bound, each once");
    let stats = api.requests();
    assert_eq!(
        stats.count(Verb::Patch, "persistentvolumes", None),
        10,
        "one reservation write per volume"
    );
    assert_eq!(stats.total_with_code(409), 0);
    assert_eq!(check_invariants(&api), Vec::<String>::new());
}

/// Claims keep their queue order when several workers sync them at once:
/// the 10Gi claim leaves the queue first (largest first), but its sync is
/// slowed by a write before its search (its migration annotation); the 1Gi
/// claim, synced meanwhile by another worker, prefers the ReadWriteOnce
/// 10Gi volume (fewer access modes win over a smaller size, as upstream)
/// and would take it. Reserved in queue order, the 10Gi volume is the large
/// claim's, and the small claim takes the 1Gi ReadWriteOnce+ReadOnlyMany
/// one, exactly as one worker syncing them one by one would decide.
#[tokio::test(start_paused = true)]
async fn claims_reserve_volumes_in_queue_order_whatever_the_workers() {
    for claim_workers in [1, 2, 8, 128] {
        let api = MemApi::new();
        api.create(&volume("volume-rwo-10", "10Gi").modes(&[RWO]).build())
            .expect("seed");
        api.create(&volume("volume-rwo-rox-1", "1Gi").modes(&[RWO, ROX]).build())
            .expect("seed");
        for (name, size) in [("claim-large", "10Gi"), ("claim-small", "1Gi")] {
            api.create(
                &claim(name, &format!("uid-{name}"), size)
                    .modes(&[RWO])
                    .annotation(ANN_STORAGE_PROVISIONER, "kubernetes.io/aws-ebs")
                    .build(),
            )
            .expect("seed");
        }
        api.add_reactor(
            Reactor::on(Verb::Patch, "persistentvolumeclaims")
                .name("claim-large")
                .delay(Duration::from_secs(1))
                .times(1),
        );
        settle_with_workers(&api, claim_workers, 4).await;

        assert_eq!(
            volume_name_of(&api, "claim-large").as_deref(),
            Some("volume-rwo-10"),
            "{claim_workers} workers; events {:?}",
            recorded_events(&api)
        );
        assert_eq!(
            volume_name_of(&api, "claim-small").as_deref(),
            Some("volume-rwo-rox-1"),
            "{claim_workers} workers"
        );
        assert_eq!(check_invariants(&api), Vec::<String>::new());
    }
}
