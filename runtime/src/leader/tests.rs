use super::*;
use memapi::MemApi;

fn config(identity: &str) -> LeaseConfig {
    LeaseConfig::new("kube-system", "pv-controller", identity)
}

fn holder(api: &MemApi) -> Option<String> {
    api.get::<Lease>(Some("kube-system"), "pv-controller")?
        .spec?
        .holder_identity
}

/// A Lease whose transition count is already at its largest is taken
/// over without overflowing it.
#[tokio::test(start_paused = true)]
async fn a_takeover_at_the_largest_transition_count_does_not_overflow() {
    let api = MemApi::new();
    let mut a = LeaderElector::new(api.client(), config("a"), WriteGate::default());
    let mut b = LeaderElector::new(api.client(), config("b"), WriteGate::default());
    assert!(a.try_acquire_or_renew().await.unwrap());
    let mut lease = api
        .get::<Lease>(Some("kube-system"), "pv-controller")
        .unwrap();
    if let Some(spec) = lease.spec.as_mut() {
        spec.lease_transitions = Some(i32::MAX);
    }
    api.put(&lease).unwrap();
    assert!(!b.try_acquire_or_renew().await.unwrap());
    tokio::time::sleep(Duration::from_secs(16)).await;
    assert!(b.try_acquire_or_renew().await.unwrap(), "taken over");
    let lease = api
        .get::<Lease>(Some("kube-system"), "pv-controller")
        .unwrap();
    let spec = lease.spec.unwrap();
    assert_eq!(spec.holder_identity.as_deref(), Some("b"));
    assert_eq!(spec.lease_transitions, Some(i32::MAX));
}

#[tokio::test(start_paused = true)]
async fn first_candidate_creates_second_waits_for_expiry() {
    let api = MemApi::new();
    let mut a = LeaderElector::new(api.client(), config("a"), WriteGate::default());
    let mut b = LeaderElector::new(api.client(), config("b"), WriteGate::default());
    assert!(a.try_acquire_or_renew().await.unwrap());
    assert!(!b.try_acquire_or_renew().await.unwrap());
    tokio::time::sleep(Duration::from_secs(14)).await;
    assert!(!b.try_acquire_or_renew().await.unwrap(), "not expired yet");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        b.try_acquire_or_renew().await.unwrap(),
        "expired: taken over"
    );
    assert_eq!(holder(&api).as_deref(), Some("b"));
    let lease = api
        .get::<Lease>(Some("kube-system"), "pv-controller")
        .unwrap();
    assert_eq!(lease.spec.unwrap().lease_transitions, Some(1));
    assert!(
        !a.try_acquire_or_renew().await.unwrap(),
        "a sees b's fresh lease"
    );
}

#[tokio::test(start_paused = true)]
async fn renewals_keep_followers_out() {
    let api = MemApi::new();
    let mut a = LeaderElector::new(api.client(), config("a"), WriteGate::default());
    let mut b = LeaderElector::new(api.client(), config("b"), WriteGate::default());
    assert!(a.try_acquire_or_renew().await.unwrap());
    for _ in 0..20 {
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert!(a.try_acquire_or_renew().await.unwrap());
        assert!(!b.try_acquire_or_renew().await.unwrap());
    }
    assert!(a.is_leader());
    assert!(!b.is_leader());
}

#[tokio::test(start_paused = true)]
async fn release_hands_over_at_once() {
    let api = MemApi::new();
    let mut a = LeaderElector::new(api.client(), config("a"), WriteGate::default());
    let mut b = LeaderElector::new(api.client(), config("b"), WriteGate::default());
    assert!(a.try_acquire_or_renew().await.unwrap());
    assert!(!b.try_acquire_or_renew().await.unwrap());
    a.release().await.unwrap();
    assert_eq!(holder(&api), None);
    assert!(b.try_acquire_or_renew().await.unwrap());
    assert_eq!(holder(&api).as_deref(), Some("b"));
}

#[tokio::test(start_paused = true)]
async fn concurrent_takeover_has_one_winner() {
    let api = MemApi::new();
    let mut a = LeaderElector::new(api.client(), config("a"), WriteGate::default());
    let mut b = LeaderElector::new(api.client(), config("b"), WriteGate::default());
    let mut c = LeaderElector::new(api.client(), config("c"), WriteGate::default());
    assert!(a.try_acquire_or_renew().await.unwrap());
    assert!(!b.try_acquire_or_renew().await.unwrap());
    assert!(!c.try_acquire_or_renew().await.unwrap());
    tokio::time::sleep(Duration::from_secs(16)).await;
    let (won_b, won_c) = tokio::join!(b.try_acquire_or_renew(), c.try_acquire_or_renew());
    assert_eq!(
        u8::from(won_b.unwrap()) + u8::from(won_c.unwrap()),
        1,
        "exactly one takes over"
    );
}

#[tokio::test(start_paused = true)]
async fn renewals_hold_the_gate_open_until_the_renew_deadline() {
    let api = MemApi::new();
    let gate = WriteGate::default();
    let mut a = LeaderElector::new(api.client(), config("a"), gate.clone());
    let mut b = LeaderElector::new(api.client(), config("b"), WriteGate::default());
    assert!(!gate.is_open(), "closed before the lease is held");
    assert!(a.try_acquire_or_renew().await.unwrap());
    assert!(!b.try_acquire_or_renew().await.unwrap());
    assert!(gate.is_open());
    tokio::time::sleep(Duration::from_secs(9)).await;
    assert!(gate.is_open());
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        !gate.is_open(),
        "without a renewal the gate closes at the deadline"
    );
    assert!(a.try_acquire_or_renew().await.unwrap());
    assert!(gate.is_open(), "a renewal opens it again");
    a.release().await.unwrap();
    assert!(!gate.is_open(), "released: closed");
}

/// A leader whose renewals fail gives up when its gate closes, the
/// renew deadline after its last successful renewal began, and not a
/// retry period later.
#[tokio::test(start_paused = true)]
async fn a_leader_whose_renewals_fail_gives_up_when_the_gate_closes() {
    let api = MemApi::new();
    let gate = WriteGate::default();
    let mut a = LeaderElector::new(api.client(), config("a"), gate.clone());
    let acquired = Instant::now();
    assert!(a.try_acquire_or_renew().await.unwrap());
    api.add_reactor(
        memapi::Reactor::on(memapi::Verb::Update, "leases")
            .error(500)
            .always(),
    );
    a.hold().await;
    assert!(!gate.is_open());
    assert_eq!(
        acquired.elapsed(),
        a.config().renew_deadline,
        "leadership ends as the gate closes"
    );
}

#[test]
fn identities_are_unique() {
    assert_ne!(default_identity(), default_identity());
}
