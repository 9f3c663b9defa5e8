//! The controller's writes through the door: a phase write refuses when
//! the volume's binding moved on, and acts on the newest copy, skipping
//! what is already so.

use std::sync::Arc;

use memapi::{MemApi, Verb};
use testkit::{claim, volume};

use super::*;
use crate::pv::error::Error;
use crate::pv::keys::VolumeName;

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

/// Plans `phase` for `basis` and carries the plan out; returns the volume
/// as the shadow cache then holds it.
async fn set_phase(
    controller: &Controller,
    basis: &Arc<PersistentVolume>,
    phase: VolumePhase,
) -> Result<Arc<PersistentVolume>> {
    let mut plan = PvPlan::default();
    controller.set_volume_phase(&mut plan, basis, phase, None)?;
    controller.carry_out(plan).await?;
    Ok(controller
        .cache()
        .volume(&VolumeName::of(basis))
        .expect("volume cached"))
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

    let result = set_phase(&controller, &basis, VolumePhase::Bound).await;
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
    let first = set_phase(&controller, &basis, VolumePhase::Available)
        .await
        .expect("first write");
    // The same decision from the old copy again: the cache's newer copy is
    // already Available, so nothing is sent (and nothing conflicts).
    api.reset_requests();
    let second = set_phase(&controller, &basis, VolumePhase::Available)
        .await
        .expect("second write");
    assert_eq!(
        second.metadata.resource_version,
        first.metadata.resource_version
    );
    assert_eq!(
        api.requests()
            .count(Verb::Patch, "persistentvolumes", Some("status")),
        0
    );
}
