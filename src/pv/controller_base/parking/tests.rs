use testkit::volume;

use super::*;

fn name(text: &str) -> VolumeName {
    VolumeName::new(text)
}

#[tokio::test]
async fn a_new_volume_waits_for_the_claims_queued_before_it() {
    let claims = WorkQueue::new();
    let volumes = WorkQueue::new();
    let parking = Parking::new(claims.clone(), volumes.clone());
    let new = volume("v1", "1Gi").build();
    assert!(
        !parking.park(&name("v1"), &new),
        "no claim ahead: synced at once"
    );

    claims.add(ObjectKey::new("ns", "a"));
    claims.add(ObjectKey::new("ns", "b"));
    assert!(parking.park(&name("v1"), &new));
    assert!(parking.park(&name("v1"), &new), "parked once");
    assert_eq!(parking.parked(), 1);
    let available = volume("v2", "1Gi").phase("Available").build();
    assert!(
        !parking.park(&name("v2"), &available),
        "only new volumes wait"
    );
    let bound = volume("v3", "1Gi").bound_to("u", "a").build();
    assert!(
        !parking.park(&name("v3"), &bound),
        "a claimed volume does not wait"
    );

    let first = claims.get().await.expect("a");
    claims.done(&first);
    parking.release_passed();
    assert!(volumes.is_empty(), "b has not had its turn");
    claims.add(ObjectKey::new("ns", "c"));
    let second = claims.get().await.expect("b");
    claims.done(&second);
    parking.release_passed();
    assert_eq!(volumes.len(), 1, "c came later: v1 is queued again");
    assert_eq!(parking.parked(), 0);
    assert!(!parking.park(&name("v1"), &new), "its next sync runs");
    assert!(
        parking.park(&name("v1"), &new),
        "a later turn waits again, for c"
    );
}

#[tokio::test]
async fn a_resync_passes_parked_volumes_by() {
    let claims = WorkQueue::new();
    let parking = Parking::new(claims.clone(), WorkQueue::new());
    claims.add(ObjectKey::new("ns", "a"));
    assert!(parking.park(&name("v1"), &volume("v1", "1Gi").build()));
    let parked: Vec<bool> = ["v0", "v1", "v2"]
        .into_iter()
        .map(|name| parking.is_parked(name))
        .collect();
    assert_eq!(parked, [false, true, false]);
}

#[tokio::test]
async fn a_deleted_volume_is_forgotten() {
    let claims = WorkQueue::new();
    let parking = Parking::new(claims.clone(), WorkQueue::new());
    claims.add(ObjectKey::new("ns", "a"));
    assert!(parking.park(&name("v1"), &volume("v1", "1Gi").build()));
    parking.forget(&name("v1"));
    assert_eq!(parking.parked(), 0);
}
