use super::*;

#[test]
fn the_first_pause_is_random_below_the_interval() {
    let pauses: Vec<Duration> = (0..50)
        .map(|_| random_fraction_of(RETRY_INTERVAL))
        .collect();
    assert!(pauses.iter().all(|p| *p < RETRY_INTERVAL), "{pauses:?}");
    assert!(
        pauses.iter().any(|p| *p != pauses[0]),
        "not all the same: {pauses:?}"
    );
}

#[test]
fn errors_are_told_apart_by_whether_a_retry_can_help() {
    let refused = kube::Error::Api(Box::new(Status {
        code: 422,
        ..Status::default()
    }));
    assert!(matches!(Failure::from(refused), Failure::Rejected(_)));
    let dropped = kube::Error::Service("connection reset".into());
    assert!(matches!(Failure::from(dropped), Failure::Transport(_)));
    let unbuildable = kube::Error::HttpError(
        http::Request::builder()
            .uri("bad uri with spaces")
            .body(())
            .expect_err("an invalid uri"),
    );
    assert!(matches!(Failure::from(unbuildable), Failure::Unsendable(_)));
}
