//! A decision's writes stay conditional on the copies it read: when a
//! volume or a claim changes between the decision and its plan's writes
//! (and the store has seen the change), the plan does not bind what the
//! decision never checked. The key is decided again from the newest copy
//! and ends bound correctly, or Pending with its reason.

pub(crate) mod support;

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Event, PersistentVolume, PersistentVolumeClaim};
use memapi::MemApi;
use testkit::{claim, volume};

use crate::pv::keys::VolumeName;
use crate::runtime::keys::ObjectKey;
use support::Tested;

/// A memapi and a controller whose store holds `v1` (10Gi, no class,
/// ReadWriteOnce, Available) and the claim `default/c1` (5Gi, no class,
/// ReadWriteOnce, Pending) as the server does.
fn seeded() -> (
    MemApi,
    Tested,
    Arc<PersistentVolume>,
    Arc<PersistentVolumeClaim>,
) {
    let api = MemApi::new();
    let controller = support::controller(&api);
    let v1 = api
        .create(&volume("v1", "10Gi").phase("Available").build())
        .expect("volume");
    let c1 = api
        .create(&claim("c1", "", "5Gi").phase("Pending").build())
        .expect("claim");
    let store = controller.store();
    store.offer_listed_volume(v1.clone()).expect("store volume");
    store.offer_listed_claim(c1.clone()).expect("store claim");
    (api, controller, Arc::new(v1), Arc::new(c1))
}

/// Puts `changed` on the server in place of its object, and into the
/// store as its watch event would.
fn change_volume(api: &MemApi, controller: &Tested, changed: &PersistentVolume) {
    let stored = api.put(changed).expect("change volume");
    controller
        .store()
        .offer_listed_volume(stored)
        .expect("store changed volume");
}

/// Deletes the volume `name` on the server and creates `again` under its
/// name (a new UID), the store seeing both.
fn recreate_volume(api: &MemApi, controller: &Tested, again: &PersistentVolume) {
    let name = again.metadata.name.as_deref().unwrap_or_default();
    assert!(api.remove::<PersistentVolume>(None, name), "volume removed");
    controller.store().remove_volume(&VolumeName::new(name));
    let created = api.create(again).expect("re-create volume");
    controller
        .store()
        .offer_listed_volume(created)
        .expect("store re-created volume");
}

/// The decision binding `c1`, made before anything changed, then carried
/// out after the change; then every object synced from the newest copies
/// until nothing changes (a few rounds).
async fn decide_change_execute(
    controller: &Tested,
    claim: &Arc<PersistentVolumeClaim>,
    change: impl FnOnce(),
) {
    let plan = controller.binder().decide_claim(claim);
    assert!(
        plan.lines().iter().any(|line| line.contains("claimRef")),
        "the decision binds the claim: {:?}",
        plan.lines()
    );
    change();
    // The plan's end does not matter here, only what it wrote.
    let _ = controller.executor.execute(plan).await;
    for _ in 0..3 {
        let store = controller.store();
        for key in store.claim_keys() {
            if let Some(claim) = store.claim(&key) {
                controller.sync_claim(&claim).await;
            }
        }
        for name in store.volume_names() {
            if let Some(volume) = store.volume(&name) {
                controller.sync_volume(&volume).await;
            }
        }
    }
}

fn server_claim(api: &MemApi) -> PersistentVolumeClaim {
    api.get::<PersistentVolumeClaim>(Some("default"), "c1")
        .expect("claim on the server")
}

fn server_volume(api: &MemApi) -> PersistentVolume {
    api.get::<PersistentVolume>(None, "v1")
        .expect("volume on the server")
}

/// The claim's events on the server, as (reason, message), once the
/// recorder has sent what it holds.
async fn claim_events(api: &MemApi, controller: &Tested) -> Vec<(String, String)> {
    controller.recorder.flush().await;
    api.list::<Event>()
        .into_iter()
        .filter(|event| event.involved_object.name.as_deref() == Some("c1"))
        .map(|event| {
            (
                event.reason.unwrap_or_default(),
                event.message.unwrap_or_default(),
            )
        })
        .collect()
}

/// The claim is Pending with its reason (a FailedBinding event that ends
/// with `why`), names no volume, and `v1` names no claim.
async fn assert_left_pending(api: &MemApi, controller: &Tested, why: &str) {
    let events = claim_events(api, controller).await;
    assert!(
        events
            .iter()
            .any(|(reason, message)| reason == "FailedBinding"
                && message.starts_with("no persistent volumes available for this claim")
                && message.ends_with(why)),
        "{events:?}"
    );
    let claim = server_claim(api);
    let phase = claim.status.as_ref().and_then(|s| s.phase.as_deref());
    let volume_name = claim.spec.as_ref().and_then(|s| s.volume_name.as_deref());
    assert_eq!(phase, Some("Pending"), "{claim:?}");
    assert_eq!(volume_name, None, "{claim:?}");
    let volume = server_volume(api);
    let claim_ref = volume.spec.as_ref().and_then(|s| s.claim_ref.as_ref());
    assert!(claim_ref.is_none(), "{volume:?}");
}

#[tokio::test]
async fn a_volume_shrunk_below_the_request_after_the_decision_is_not_bound() {
    let (api, controller, v1, c1) = seeded();
    decide_change_execute(&controller, &c1, || {
        let mut shrunk = PersistentVolume::clone(&v1);
        if let Some(spec) = shrunk.spec.as_mut() {
            spec.capacity = volume("v1", "1Gi").build().spec.and_then(|s| s.capacity);
        }
        change_volume(&api, &controller, &shrunk);
    })
    .await;
    assert_left_pending(&api, &controller, "v1 too small (1Gi < 5Gi)").await;
}

#[tokio::test]
async fn a_volume_whose_class_changed_after_the_decision_is_not_bound() {
    let (api, controller, v1, c1) = seeded();
    decide_change_execute(&controller, &c1, || {
        let mut other = PersistentVolume::clone(&v1);
        if let Some(spec) = other.spec.as_mut() {
            spec.storage_class_name = Some("silver".to_string());
        }
        change_volume(&api, &controller, &other);
    })
    .await;
    assert_left_pending(&api, &controller, "no storage class is set").await;
}

#[tokio::test]
async fn a_volume_whose_access_modes_changed_after_the_decision_is_not_bound() {
    let (api, controller, v1, c1) = seeded();
    decide_change_execute(&controller, &c1, || {
        let mut other = PersistentVolume::clone(&v1);
        if let Some(spec) = other.spec.as_mut() {
            spec.access_modes = Some(vec!["ReadOnlyMany".to_string()]);
        }
        change_volume(&api, &controller, &other);
    })
    .await;
    assert_left_pending(&api, &controller, "v1 lacks ReadWriteOnce").await;
}

#[tokio::test]
async fn a_volume_re_created_too_small_after_the_decision_is_not_bound() {
    let (api, controller, _, c1) = seeded();
    decide_change_execute(&controller, &c1, || {
        let again = volume("v1", "1Gi").phase("Available").build();
        recreate_volume(&api, &controller, &again);
    })
    .await;
    assert_left_pending(&api, &controller, "v1 too small (1Gi < 5Gi)").await;
}

#[tokio::test]
async fn a_claim_re_created_after_the_decision_binds_as_itself() {
    let (api, controller, _, c1) = seeded();
    decide_change_execute(&controller, &c1, || {
        assert!(api.remove::<PersistentVolumeClaim>(Some("default"), "c1"));
        controller
            .store()
            .remove_claim(&ObjectKey::new("default", "c1"));
        let again = api
            .create(&claim("c1", "", "5Gi").phase("Pending").build())
            .expect("re-create claim");
        controller
            .store()
            .offer_listed_claim(again)
            .expect("store re-created claim");
    })
    .await;
    let claim = server_claim(&api);
    let volume = server_volume(&api);
    let claim_ref = volume.spec.as_ref().and_then(|s| s.claim_ref.as_ref());
    assert_eq!(
        claim_ref.and_then(|r| r.uid.as_deref()),
        claim.metadata.uid.as_deref(),
        "the volume names the claim that exists: {volume:?}"
    );
    assert_eq!(
        claim.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Bound")
    );
    assert_eq!(
        volume.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Bound")
    );
}

/// A volume sync against a store that still holds a claim the server has
/// deleted: the volume stays Released.
#[tokio::test]
async fn a_released_volume_is_not_bound_again_to_a_claim_only_the_store_holds() {
    let api = MemApi::new();
    let controller = support::controller(&api);
    let gone = api
        .create(&claim("c", "uid-c", "1Gi").volume_name("v").build())
        .expect("claim");
    controller
        .store()
        .offer_claim(Arc::new(gone))
        .expect("store claim");
    assert!(api.remove::<PersistentVolumeClaim>(Some("default"), "c"));
    let released = api
        .put(
            &volume("v", "1Gi")
                .bound_to("uid-c", "c")
                .phase("Released")
                .build(),
        )
        .expect("volume");
    let released = Arc::new(released);
    controller
        .store()
        .offer_volume(Arc::clone(&released))
        .expect("store volume");

    let ended = Box::pin(controller.sync_volume(&released)).await;
    assert_eq!(ended, crate::runtime::workload::Ended::Done);

    let now = api.get::<PersistentVolume>(None, "v").expect("volume");
    assert_eq!(
        now.status.and_then(|status| status.phase).as_deref(),
        Some("Released"),
        "the volume stays released"
    );
}
