use super::*;
use std::sync::atomic::{AtomicUsize, Ordering};

async fn ask(
    asked: &AtomicUsize,
    answer: Result<u32, &'static str>,
    ttl: Duration,
) -> Result<(u32, Duration), &'static str> {
    asked.fetch_add(1, Ordering::SeqCst);
    tokio::task::yield_now().await;
    answer.map(|v| (v, ttl))
}

const TEN_SECONDS: Duration = Duration::from_secs(10);

#[tokio::test]
async fn one_ask_for_a_burst_and_again_once_the_answer_expired() {
    let cache = ReviewCache::new(8);
    let asked = AtomicUsize::new(0);
    let burst = (0..100).map(|_| cache.get_or_ask("k", || ask(&asked, Ok(1), TEN_SECONDS)));
    let answers = futures::future::join_all(burst).await;
    assert!(answers.iter().all(|a| matches!(a, Ok(1))));
    assert_eq!(asked.load(Ordering::SeqCst), 1);
    assert!(matches!(
        cache
            .get_or_ask("k", || ask(&asked, Ok(2), TEN_SECONDS))
            .await,
        Ok(1)
    ));
    assert_eq!(asked.load(Ordering::SeqCst), 1, "kept for its ten seconds");

    // An answer kept for no time at all is asked for again.
    assert!(matches!(
        cache
            .get_or_ask("z", || ask(&asked, Ok(3), Duration::ZERO))
            .await,
        Ok(3)
    ));
    assert!(matches!(
        cache
            .get_or_ask("z", || ask(&asked, Ok(4), Duration::ZERO))
            .await,
        Ok(4)
    ));
    assert_eq!(asked.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn failures_are_not_kept_and_the_size_is_bounded() {
    let cache = ReviewCache::new(2);
    let asked = AtomicUsize::new(0);
    let failed = cache
        .get_or_ask("k", || ask(&asked, Err("down"), TEN_SECONDS))
        .await;
    assert_eq!(failed.unwrap_err().as_ref(), &"down");
    assert!(matches!(
        cache
            .get_or_ask("k", || ask(&asked, Ok(3), TEN_SECONDS))
            .await,
        Ok(3)
    ));
    assert_eq!(asked.load(Ordering::SeqCst), 2);
    for key in ["a", "b", "c", "d", "e", "f"] {
        cache
            .get_or_ask(key, || ask(&asked, Ok(0), TEN_SECONDS))
            .await
            .unwrap();
    }
    assert!(cache.len().await <= 2);
}

/// A time to live past what an `Instant` can hold (an absurd flag)
/// keeps the answer, without overflowing.
#[tokio::test]
async fn an_absurd_time_to_live_does_not_overflow() {
    let cache = ReviewCache::new(2);
    let asked = AtomicUsize::new(0);
    for _ in 0..2 {
        assert!(matches!(
            cache
                .get_or_ask("k", || ask(&asked, Ok(7), Duration::MAX))
                .await,
            Ok(7)
        ));
    }
    assert_eq!(asked.load(Ordering::SeqCst), 1);
}
