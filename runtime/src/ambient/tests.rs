use super::*;

#[tokio::test(start_paused = true)]
async fn a_simulated_clock_moves_with_tokio_time_and_numbers_follow_the_seed() {
    let start = Timestamp::UNIX_EPOCH;
    let draws = |seed| {
        let _simulation = simulate(seed, start);
        (0..4).map(|_| random_u64()).collect::<Vec<_>>()
    };
    assert_eq!(draws(7), draws(7));
    assert_ne!(draws(7), draws(8));

    let simulation = simulate(1, start);
    assert_eq!(now(), start);
    tokio::time::sleep(Duration::from_secs(90)).await;
    assert_eq!(now().as_second(), 90);
    drop(simulation);
    assert!(now() > Timestamp::from_second(1_700_000_000).unwrap());
}

#[test]
fn a_fraction_stays_below_its_bound() {
    let _simulation = simulate(3, Timestamp::UNIX_EPOCH);
    let max = Duration::from_secs(10);
    assert!((0..1000).map(|_| random_fraction_of(max)).all(|d| d < max));
}
