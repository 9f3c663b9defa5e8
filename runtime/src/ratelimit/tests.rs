use super::*;

#[tokio::test(start_paused = true)]
async fn bursts_then_paces() {
    let start = Instant::now();
    let mut bucket = Bucket {
        qps: 10.0,
        burst: 3.0,
        tokens: 3.0,
        last: start,
        not_before: None,
    };
    for _ in 0..3 {
        assert!(bucket.take(start).is_ok());
    }
    let wait = bucket.take(start).unwrap_err();
    assert_eq!(wait, Duration::from_millis(100));
    assert!(bucket.take(start + Duration::from_millis(100)).is_ok());
    assert!(bucket.take(start + Duration::from_millis(100)).is_err());
}

#[test]
fn zero_qps_is_unlimited() {
    let now = Instant::now();
    let mut bucket = Bucket {
        qps: 0.0,
        burst: 1.0,
        tokens: 1.0,
        last: now,
        not_before: None,
    };
    for _ in 0..100 {
        assert!(bucket.take(now).is_ok());
    }
}

/// A 429 with `Retry-After: 2` holds the next request for two seconds,
/// without a client-side limit; other answers hold nothing.
#[tokio::test(start_paused = true)]
async fn a_429_pauses_requests_for_its_retry_after() {
    use tower::{Service, ServiceExt};
    let answers = Arc::new(Mutex::new(vec![
        (StatusCode::OK, None),
        (StatusCode::TOO_MANY_REQUESTS, Some("2")),
        (StatusCode::CONFLICT, None),
    ]));
    let inner = tower::service_fn(move |(): ()| {
        let answers = Arc::clone(&answers);
        async move {
            let (status, after) = answers.lock().expect("answers").remove(0);
            let mut response = Response::builder().status(status);
            if let Some(after) = after {
                response = response.header(RETRY_AFTER, after);
            }
            response.body(()).map_err(|e| e.to_string())
        }
    });
    let mut service = RateLimitLayer::new(0.0, 0).layer(inner);
    let start = Instant::now();
    let first = service.ready().await.expect("ready").call(()).await;
    assert_eq!(first.expect("answer").status(), StatusCode::OK);
    let second = service.ready().await.expect("ready").call(()).await;
    assert_eq!(
        second.expect("answer").status(),
        StatusCode::TOO_MANY_REQUESTS
    );
    assert_eq!(start.elapsed(), Duration::ZERO, "nothing held yet");
    let third = service.ready().await.expect("ready").call(()).await;
    assert_eq!(third.expect("answer").status(), StatusCode::CONFLICT);
    assert_eq!(start.elapsed(), Duration::from_secs(2), "held by the 429");
    service.ready().await.expect("ready");
    assert_eq!(
        start.elapsed(),
        Duration::from_secs(2),
        "a 409 holds nothing"
    );
}
