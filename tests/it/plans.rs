//! The binder's plans as data: a decision made with no server says, in
//! order, which fields of which object it writes (and on which version it
//! decided), which events it records and which operation it starts.

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use pv_controller::pv::Settings;
use pv_controller::testing::{OfflineObjects, Rehearsed, Server, Then, offline_binder};
use testkit::{claim, volume};

/// The claim `default/c1` decided with no server, knowing `volumes` and
/// `claims` (store and server alike), its plan rehearsed.
fn rehearse_c1(volumes: Vec<PersistentVolume>, claims: Vec<PersistentVolumeClaim>) -> Rehearsed {
    let binder = offline_binder(
        Settings::default(),
        OfflineObjects {
            volumes: volumes.clone(),
            claims: claims.clone(),
            ..OfflineObjects::default()
        },
    )
    .unwrap();
    let stored = binder
        .store()
        .claim(&pv_controller::ObjectKey::new("default", "c1"))
        .unwrap();
    binder.rehearse_claim(&stored, &Server { volumes, claims })
}

#[tokio::test]
async fn a_bind_is_four_writes_volume_first_taking_turns() {
    let rehearsed = rehearse_c1(
        vec![volume("pv1", "1Gi").phase("Available").rv("10").build()],
        vec![claim("c1", "uid-c1", "1Gi").rv("20").build()],
    );
    assert_eq!(
        rehearsed.lines,
        [
            "update PersistentVolume pv1 at 10: claimRef default/c1",
            "update PersistentVolumeClaim default/c1 at 20: volumeName pv1",
            "update PersistentVolume pv1 status at 10: phase Bound",
            "update PersistentVolumeClaim default/c1 status at 20: phase Bound",
        ]
    );
    assert!(rehearsed.events.is_empty(), "{:?}", rehearsed.events);
    assert!(
        matches!(rehearsed.outcome, Ok(Then::Done)),
        "{:?}",
        rehearsed.outcome
    );
    let bound = &rehearsed.claims[0];
    assert_eq!(
        bound.status.as_ref().unwrap().phase.as_deref(),
        Some("Bound")
    );
}

#[tokio::test]
async fn a_claim_nothing_fits_waits_with_an_event_and_no_write_when_already_pending() {
    let rehearsed = rehearse_c1(
        vec![volume("pv1", "1Gi").phase("Available").rv("10").build()],
        vec![claim("c1", "uid-c1", "5Gi").rv("20").build()],
    );
    assert_eq!(rehearsed.lines.len(), 1, "{:?}", rehearsed.lines);
    assert!(
        rehearsed.lines[0].starts_with(
            "event Normal FailedBinding on PersistentVolumeClaim default/c1: no persistent volumes available"
        ),
        "{:?}",
        rehearsed.lines
    );
    assert!(
        matches!(rehearsed.outcome, Ok(Then::Wait)),
        "{:?}",
        rehearsed.outcome
    );
}

#[tokio::test]
async fn a_released_volume_of_policy_delete_is_marked_released_then_its_delete_starts() {
    let mut volume = volume("pv1", "1Gi")
        .phase("Bound")
        .bound_to("uid-gone", "gone")
        .policy("Delete")
        .rv("10")
        .build();
    volume.metadata.uid = Some("uid-pv1".to_string());
    let binder = offline_binder(
        Settings::default(),
        OfflineObjects {
            volumes: vec![volume.clone()],
            ..OfflineObjects::default()
        },
    )
    .unwrap();
    let stored = binder
        .store()
        .volume(&pv_controller::pv::VolumeName::new("pv1"))
        .unwrap();
    // The claim is missing from the store: the decision asks the server,
    // which has none either.
    let rehearsed = binder.rehearse_volume(
        &stored,
        &Server {
            volumes: vec![volume],
            claims: vec![],
        },
    );
    assert_eq!(
        rehearsed.lines,
        [
            "update PersistentVolume pv1 status at 10: phase Released",
            "start delete-pv1[uid-pv1]",
        ]
    );
    assert_eq!(rehearsed.started, ["delete-pv1[uid-pv1]"]);
}
