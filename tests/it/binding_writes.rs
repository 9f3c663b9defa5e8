//! The cost of binding, counted by the in-memory API server: writes per
//! bound pair, conflicts, and what the store saves; plus recovery
//! from injected faults and from invalid objects.

use crate::harness::{Running, check_invariants, recorded_events, seed_pairs};
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use memapi::{MemApi, Reactor, Verb};
use testkit::*;

/// Runs the controller on `api` until it settles, then stops it.
async fn run_until_settled(api: &MemApi) {
    let running = Running::binder(api).await;
    running.settle().await;
    running.stop().await;
}

fn phase_of_claim(claim: &PersistentVolumeClaim) -> &str {
    claim
        .status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("")
}

struct Writes {
    volume_spec: u64,
    volume_status: u64,
    claim_spec: u64,
    claim_status: u64,
    conflicts: u64,
}

fn writes(api: &MemApi) -> Writes {
    let stats = api.requests();
    Writes {
        volume_spec: stats.count(Verb::Patch, "persistentvolumes", None),
        volume_status: stats.count(Verb::Patch, "persistentvolumes", Some("status")),
        claim_spec: stats.count(Verb::Patch, "persistentvolumeclaims", None),
        claim_status: stats.count(Verb::Patch, "persistentvolumeclaims", Some("status")),
        conflicts: stats.total_with_code(409),
    }
}

async fn bind_pairs(n: usize) {
    let api = MemApi::new();
    for i in 0..n {
        api.create(&volume(&format!("volume-{i:04}"), "1Gi").build())
            .expect("seed volume");
        api.create(&claim(&format!("claim-{i:04}"), &format!("uid-{i:04}"), "1Gi").build())
            .expect("seed claim");
    }
    api.reset_requests();
    run_until_settled(&api).await;

    let claims = api.list::<PersistentVolumeClaim>();
    assert_eq!(claims.len(), n);
    assert!(
        claims.iter().all(|c| phase_of_claim(c) == "Bound"),
        "every claim is Bound"
    );
    let mut claimed: Vec<String> = api
        .list::<PersistentVolume>()
        .iter()
        .filter_map(|v| v.spec.as_ref()?.claim_ref.as_ref()?.uid.clone())
        .collect();
    claimed.sort();
    claimed.dedup();
    assert_eq!(
        claimed.len(),
        n,
        "no volume is claimed twice, none left out"
    );
    assert_eq!(check_invariants(&api), Vec::<String>::new());

    // Four writes per pair and not one more: a new volume is offered to the
    // claims at once, and its Pending -> Available write, parked until the
    // claims queued before it had their turn, is never needed once it is
    // bound (it was the fifth write per pair before).
    let w = writes(&api);
    let n = n as u64;
    assert_eq!(w.volume_spec, n, "one claimRef write per volume");
    assert_eq!(
        w.volume_status, n,
        "one Bound write per volume, no Available"
    );
    assert_eq!(w.claim_spec, n, "one volumeName write per claim");
    assert_eq!(w.claim_status, n, "one Bound write per claim");
    assert_eq!(w.conflicts, 0, "no 409 Conflict");
}

#[tokio::test(start_paused = true)]
async fn one_pair_costs_four_binding_writes() {
    bind_pairs(1).await;
}

#[tokio::test(start_paused = true)]
async fn a_thousand_pairs_all_bind_with_four_writes_each_and_no_conflict() {
    bind_pairs(1000).await;
}

/// The four writes of a bind take turns between the two objects (volume
/// spec, claim spec, volume status, claim status), so the API server never
/// gets two writes of one object a round trip apart; a real server then
/// often checks the second against a watch store one version behind, and
/// runs the update twice.
#[tokio::test(start_paused = true)]
async fn a_bind_never_writes_one_object_twice_in_a_row() {
    let api = MemApi::new();
    seed_pairs(&api, 1);
    api.reset_requests();
    run_until_settled(&api).await;

    let writes: Vec<(String, Option<String>)> = api
        .requests()
        .log()
        .iter()
        .filter(|entry| entry.verb == Verb::Patch)
        .map(|entry| (entry.resource.clone(), entry.subresource.clone()))
        .collect();
    let status = Some("status".to_string());
    assert_eq!(
        writes,
        vec![
            ("persistentvolumes".to_string(), None),
            ("persistentvolumeclaims".to_string(), None),
            ("persistentvolumes".to_string(), status.clone()),
            ("persistentvolumeclaims".to_string(), status),
        ]
    );
}

/// A bind that stops after the claim's spec (its volume's Bound write
/// fails) is completed by the next sync: both end Bound, the claim once.
#[tokio::test(start_paused = true)]
async fn a_bind_stopped_before_the_volume_phase_is_completed() {
    let api = MemApi::new();
    seed_pairs(&api, 5);
    api.add_reactor(
        Reactor::on(Verb::Patch, "persistentvolumes")
            .subresource("status")
            .error(500)
            .times(5),
    );
    api.reset_requests();
    run_until_settled(&api).await;

    assert!(
        api.list::<PersistentVolumeClaim>()
            .iter()
            .all(|c| phase_of_claim(c) == "Bound"),
        "every claim ends Bound; events {:?}",
        recorded_events(&api)
    );
    assert!(
        api.list::<PersistentVolume>().iter().all(|v| v
            .status
            .as_ref()
            .and_then(|s| s.phase.as_deref())
            == Some("Bound"))
    );
    let w = writes(&api);
    assert_eq!(w.claim_spec, 5, "each claim's volumeName written once");
    assert_eq!(w.volume_status, 10, "five failed Bound writes, five stored");
    assert_eq!(check_invariants(&api), Vec::<String>::new());
}

/// Two claims, one volume: the store keeps the reserved volume from
/// being offered to the second claim, so there is one reservation and no
/// conflict.
#[tokio::test(start_paused = true)]
async fn a_reserved_volume_is_never_offered_to_a_second_claim() {
    let api = MemApi::new();
    api.create(&volume("volume-a", "1Gi").phase("Available").build())
        .expect("seed");
    api.create(&claim("claim-1", "uid-1", "1Gi").build())
        .expect("seed");
    api.create(&claim("claim-2", "uid-2", "1Gi").build())
        .expect("seed");
    api.reset_requests();
    run_until_settled(&api).await;

    let bound: Vec<_> = api
        .list::<PersistentVolumeClaim>()
        .into_iter()
        .filter(|c| phase_of_claim(c) == "Bound")
        .collect();
    assert_eq!(bound.len(), 1, "exactly one claim gets the volume");
    let w = writes(&api);
    assert_eq!(w.volume_spec, 1, "the volume is reserved once");
    assert_eq!(w.conflicts, 0);
    assert!(
        recorded_events(&api)
            .iter()
            .any(|e| e.starts_with("Normal FailedBinding"))
    );
    assert_eq!(check_invariants(&api), Vec::<String>::new());
}

/// Failures in the middle of binding (a conflict on the volume, an error on
/// the claim status, a dropped connection) are retried until all is bound.
#[tokio::test(start_paused = true)]
async fn binding_completes_after_injected_faults() {
    let api = MemApi::new();
    seed_pairs(&api, 20);
    api.add_reactor(
        Reactor::on(Verb::Patch, "persistentvolumes")
            .error(409)
            .times(3),
    );
    api.add_reactor(
        Reactor::on(Verb::Patch, "persistentvolumeclaims")
            .subresource("status")
            .error(500)
            .times(3),
    );
    api.add_reactor(
        Reactor::on(Verb::Patch, "persistentvolumeclaims")
            .drop_connection()
            .times(2),
    );
    run_until_settled(&api).await;

    let claims = api.list::<PersistentVolumeClaim>();
    let not_bound: Vec<_> = claims
        .iter()
        .filter(|c| phase_of_claim(c) != "Bound")
        .map(|c| {
            (
                c.metadata.name.clone(),
                c.spec.as_ref().and_then(|s| s.volume_name.clone()),
                phase_of_claim(c).to_string(),
            )
        })
        .collect();
    assert!(
        not_bound.is_empty(),
        "every claim ends Bound: {not_bound:?}; events {:?}",
        recorded_events(&api)
    );
    let volumes = api.list::<PersistentVolume>();
    assert!(
        volumes
            .iter()
            .all(|v| v.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound"))
    );
    assert_eq!(check_invariants(&api), Vec::<String>::new());
}

/// Objects the controller cannot read get a Warning event and are left
/// alone; the valid pair next to them is bound anyway.
#[tokio::test(start_paused = true)]
async fn invalid_objects_get_warnings_and_do_not_stop_the_others() {
    let api = MemApi::new();
    let mut bad_capacity = volume("volume-bad-capacity", "1Gi").build();
    if let Some(spec) = bad_capacity.spec.as_mut() {
        spec.capacity = Some(
            [(
                "storage".to_string(),
                k8s_openapi::apimachinery::pkg::api::resource::Quantity("lots".into()),
            )]
            .into(),
        );
    }
    api.create(&bad_capacity).expect("seed");
    api.create(
        &volume("volume-bad-mode", "1Gi")
            .modes(&["ReadWriteSometimes"])
            .build(),
    )
    .expect("seed");
    let mut no_namespace = volume("volume-no-namespace", "1Gi")
        .bound_to("uid-gone", "claim-gone")
        .phase("Bound")
        .policy("Delete")
        .build();
    if let Some(reference) = no_namespace
        .spec
        .as_mut()
        .and_then(|s| s.claim_ref.as_mut())
    {
        reference.namespace = None;
    }
    api.create(&no_namespace).expect("seed");
    api.create(&volume("volume-good", "1Gi").build())
        .expect("seed");
    api.create(&claim("claim-bad-request", "uid-bad", "1Qx").build())
        .expect("seed");
    api.create(
        &claim("claim-bad-mode", "uid-bad-mode", "1Gi")
            .modes(&["WriteOnlyMany"])
            .build(),
    )
    .expect("seed");
    api.create(&claim("claim-good", "uid-good", "1Gi").build())
        .expect("seed");
    run_until_settled(&api).await;

    let good = api
        .get::<PersistentVolumeClaim>(Some("default"), "claim-good")
        .expect("claim-good");
    assert_eq!(
        phase_of_claim(&good),
        "Bound",
        "events {:?}",
        recorded_events(&api)
    );
    assert_eq!(
        good.spec.and_then(|s| s.volume_name),
        Some("volume-good".to_string())
    );
    let kept = api
        .get::<PersistentVolume>(None, "volume-no-namespace")
        .expect("not deleted");
    assert_eq!(
        kept.status.and_then(|s| s.phase),
        Some("Bound".to_string()),
        "not released on a guess"
    );

    let events = recorded_events(&api);
    for expected in [
        "Warning InvalidVolume",
        "Warning FailedBinding invalid claim",
    ] {
        assert!(
            events.iter().any(|e| e.starts_with(expected)),
            "{expected:?} in {events:?}"
        );
    }
    let invalid_volume_events = events
        .iter()
        .filter(|e| e.starts_with("Warning InvalidVolume"))
        .count();
    assert!(
        invalid_volume_events >= 3,
        "one warning per invalid volume: {events:?}"
    );
    let invalid_claim_events = events
        .iter()
        .filter(|e| e.starts_with("Warning FailedBinding invalid claim"))
        .count();
    assert!(
        invalid_claim_events >= 2,
        "one warning per invalid claim: {events:?}"
    );
}

/// What the controller never reads is never kept: `managedFields` (larger
/// than the rest of a volume on a real API server) is dropped from what the
/// watchers list and from the answers of the controller's own writes,
/// while the server's copy keeps them (an update without them leaves them
/// as they are).
#[tokio::test(start_paused = true)]
async fn managed_fields_are_not_stored_and_not_wiped() {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;
    let managed = || {
        Some(vec![ManagedFieldsEntry {
            manager: Some("kubectl-create".to_string()),
            operation: Some("Update".to_string()),
            api_version: Some("v1".to_string()),
            ..ManagedFieldsEntry::default()
        }])
    };
    let api = MemApi::new();
    let mut bound = volume("volume-bound", "1Gi");
    bound.0.metadata.managed_fields = managed();
    let mut spare = volume("volume-spare", "5Gi");
    spare.0.metadata.managed_fields = managed();
    let mut data = claim("claim", "uid", "1Gi");
    data.0.metadata.managed_fields = managed();
    for seeded in [bound.build(), spare.build()] {
        api.create(&seeded).expect("seed volume");
    }
    api.create(&data.build()).expect("seed claim");
    assert!(
        api.get::<PersistentVolume>(None, "volume-spare")
            .and_then(|v| v.metadata.managed_fields)
            .is_some(),
        "the server keeps managedFields"
    );

    let running = Running::binder(&api).await;
    running.settle().await;
    let store = running.controller().store();
    for name in ["volume-bound", "volume-spare"] {
        let stored = store
            .volume(&pv_controller::pv::VolumeName::new(name))
            .expect("stored volume");
        assert_eq!(
            stored.metadata.managed_fields, None,
            "{name} stored without them"
        );
    }
    let stored = store
        .claim(&pv_controller::ObjectKey::new("default", "claim"))
        .expect("stored claim");
    assert_eq!(stored.metadata.managed_fields, None);
    running.stop().await;

    let stored = api
        .get::<PersistentVolume>(None, "volume-bound")
        .expect("volume");
    assert_eq!(
        stored
            .spec
            .and_then(|s| s.claim_ref)
            .and_then(|r| r.name)
            .as_deref(),
        Some("claim"),
        "bound"
    );
    assert!(
        stored.metadata.managed_fields.is_some(),
        "not wiped by our writes"
    );
}
