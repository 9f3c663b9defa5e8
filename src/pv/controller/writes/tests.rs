//! The door's promises: a write acts on the newest copy, refuses when the
//! object moved on, skips what is already so, and two writers of one object
//! never meet in a conflict.

use std::sync::Arc;

use memapi::{MemApi, Verb};
use testkit::{claim, volume};

use super::*;

/// A controller on a fresh memapi whose shadow cache holds `volumes`.
fn controller(api: &MemApi) -> Controller {
    super::super::testing::controller(api)
}

fn seed(api: &MemApi, controller: &Controller, v: &PersistentVolume) -> Arc<PersistentVolume> {
    let stored = Arc::new(api.create(v).expect("seed volume"));
    controller
        .cache()
        .offer_volume(Arc::clone(&stored))
        .expect("cache volume");
    stored
}

#[tokio::test]
async fn a_phase_write_is_refused_when_the_claim_ref_changed() {
    let api = MemApi::new();
    let controller = controller(&api);
    let basis = seed(
        &api,
        &controller,
        &volume("v1", "1Gi")
            .phase("Available")
            .bound_to("uid-a", "claim-a")
            .build(),
    );
    // Another task bound the volume to another claim and made it Bound.
    let mut taken = PersistentVolume::clone(&basis);
    taken.spec.as_mut().expect("spec").claim_ref = Some(crate::pv::objects::claim_reference(
        &claim("claim-b", "uid-b", "1Gi").build(),
    ));
    taken.status.get_or_insert_with(Default::default).phase = Some("Bound".into());
    let taken = Arc::new(api.put(&taken).expect("put"));
    controller.cache().offer_volume(taken).expect("cache");

    let result = controller
        .set_volume_phase(&basis, VolumePhase::Bound, None)
        .await;
    assert!(
        matches!(result, Err(Error::Stale { .. })),
        "a Bound copy of another binding must not pass for this one: {result:?}"
    );
}

#[tokio::test]
async fn a_write_edits_the_newest_copy_and_skips_what_is_already_so() {
    let api = MemApi::new();
    let controller = controller(&api);
    let basis = seed(
        &api,
        &controller,
        &volume("v1", "1Gi").phase("Pending").build(),
    );
    let first = controller
        .set_volume_phase(&basis, VolumePhase::Available, None)
        .await
        .expect("first write");
    // The same decision from the old copy again: the cache's newer copy is
    // already Available, so nothing is sent (and nothing conflicts).
    api.reset_requests();
    let second = controller
        .set_volume_phase(&basis, VolumePhase::Available, None)
        .await
        .expect("second write");
    assert_eq!(
        second.metadata.resource_version,
        first.metadata.resource_version
    );
    assert_eq!(
        api.requests()
            .count(Verb::Update, "persistentvolumes", Some("status")),
        0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_writers_of_one_volume_never_conflict() {
    let api = MemApi::new();
    let controller = controller(&api);
    for round in 0..20 {
        let name = format!("v{round}");
        let basis = seed(
            &api,
            &controller,
            &volume(&name, "1Gi").phase("Pending").build(),
        );
        let (a, b) = (controller.clone(), controller.clone());
        let (basis_a, basis_b) = (Arc::clone(&basis), Arc::clone(&basis));
        let one = tokio::spawn(async move {
            a.set_volume_phase(&basis_a, VolumePhase::Available, None)
                .await
        });
        let two = tokio::spawn(async move {
            b.write_volume(&basis_b, Part::Spec, |v| {
                v.metadata
                    .labels
                    .get_or_insert_with(Default::default)
                    .insert("touched".into(), "yes".into());
                Edit::Changed
            })
            .await
        });
        one.await.expect("join").expect("phase write");
        two.await.expect("join").expect("label write");
    }
    let stats = api.requests();
    assert_eq!(
        stats.count_code(Verb::Update, "persistentvolumes", None, 409)
            + stats.count_code(Verb::Update, "persistentvolumes", Some("status"), 409),
        0,
        "the door serialises writers of one object"
    );
    assert_eq!(
        controller.write_locks.len(),
        0,
        "locks are forgotten after use"
    );
}
