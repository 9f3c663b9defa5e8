use super::*;

#[test]
fn delays_double_up_to_the_cap_with_at_most_their_own_length_added() {
    let delays: Vec<Duration> = Exponential::new().take(10).collect();
    let mut base = MIN_DELAY;
    for delay in delays {
        assert!(delay >= base && delay < base * 2, "{delay:?} for {base:?}");
        base = (base * 2).min(MAX_DELAY);
    }
    let mut backoff = Exponential::new();
    backoff.nth(5);
    backoff.reset();
    assert!(backoff.next().is_some_and(|d| d < MIN_DELAY * 2));
}
