//! The operation tracker's promises: names as the controller gives them, one
//! running operation per name, a backoff that doubles to its cap and clears
//! on success, a panic counted as a failure, the completion hook, waiting,
//! aborting and the concurrency limit.

use tokio::sync::{mpsc, oneshot};

use super::*;

/// An operation on the object `name`, of a kind of the tests' own.
fn named(name: &str) -> OperationName {
    OperationName::new("scrub", ObjectKey::new("", name), "uid-1")
}

fn op() -> OperationName {
    named("object1")
}

fn fail() -> std::future::Ready<Result<(), String>> {
    std::future::ready(Err("storage backend unavailable".to_string()))
}

fn succeed() -> std::future::Ready<Result<(), String>> {
    std::future::ready(Ok(()))
}

/// Starts `operation` under the test name and waits until it finished;
/// fails when the tracker refused to start it.
async fn run_to_end<F>(tracker: &OperationTracker, operation: F) -> Result<(), OperationError>
where
    F: Future<Output = Result<(), String>> + Send + 'static,
{
    tracker.run(op(), operation)?;
    tracker.wait_idle().await;
    Ok(())
}

fn remaining(result: &Result<(), OperationError>) -> Option<Duration> {
    match result {
        Err(OperationError::Backoff { remaining, .. }) => Some(*remaining),
        _ => None,
    }
}

#[test]
fn names_and_kinds_are_the_controllers() {
    let name = OperationName::new("scrub", ObjectKey::new("ns", "object"), "u2");
    assert_eq!(name.to_string(), "scrub-ns/object[u2]");
    assert_eq!(name.kind(), "scrub");
    assert_eq!(name.object(), &ObjectKey::new("ns", "object"));
    assert_eq!(name.uid(), "u2");
}

#[tokio::test(start_paused = true)]
async fn second_start_of_a_running_operation_is_refused() {
    let tracker = OperationTracker::new();
    let (release, released) = oneshot::channel::<()>();
    tracker
        .run(
            op(),
            async move { released.await.map_err(|e| e.to_string()) },
        )
        .expect("first start");
    assert!(tracker.is_running(&op()));
    assert_eq!(
        tracker.run(op(), succeed()),
        Err(OperationError::AlreadyRunning { name: op() })
    );
    // Another name is independent.
    tracker
        .run(named("other-object1"), succeed())
        .expect("other name");
    release.send(()).expect("operation waits");
    tracker.wait_idle().await;
    assert!(!tracker.is_running(&op()));
    assert_eq!(tracker.run(op(), succeed()), Ok(()));
}

#[tokio::test(start_paused = true)]
async fn failure_backoff_doubles_and_is_capped() {
    let tracker = OperationTracker::new();
    let mut expected = INITIAL_BACKOFF;
    for _ in 0..12 {
        run_to_end(&tracker, fail()).await.expect("start allowed");
        assert_eq!(remaining(&tracker.run(op(), succeed())), Some(expected));
        tokio::time::advance(expected - Duration::from_millis(1)).await;
        assert_eq!(
            remaining(&tracker.run(op(), succeed())),
            Some(Duration::from_millis(1))
        );
        tokio::time::advance(Duration::from_millis(1)).await;
        expected = (expected * 2).min(MAX_BACKOFF);
    }
    assert_eq!(expected, MAX_BACKOFF);
}

#[tokio::test(start_paused = true)]
async fn success_clears_the_backoff() {
    let tracker = OperationTracker::new();
    for _ in 0..3 {
        run_to_end(&tracker, fail()).await.expect("start allowed");
        tokio::time::advance(MAX_BACKOFF).await;
    }
    run_to_end(&tracker, succeed())
        .await
        .expect("start allowed");
    assert_eq!(tracker.run(op(), succeed()), Ok(()));
    tracker.wait_idle().await;
    run_to_end(&tracker, fail()).await.expect("start allowed");
    assert_eq!(
        remaining(&tracker.run(op(), succeed())),
        Some(INITIAL_BACKOFF)
    );
}

#[tokio::test(start_paused = true)]
async fn panic_counts_as_failure() {
    let (reports, mut received) = mpsc::unbounded_channel();
    let tracker = OperationTracker::with_completion_hook(DEFAULT_CONCURRENCY, move |report| {
        let _ = reports.send(report.clone());
    });
    tracker
        .run(op(), async {
            if true {
                panic!("plugin bug");
            }
            Ok::<(), String>(())
        })
        .expect("start allowed");
    tracker.wait_idle().await;
    let report = received.recv().await.expect("report");
    assert_eq!(report.outcome, OperationOutcome::Panicked);
    assert_eq!(
        remaining(&tracker.run(op(), succeed())),
        Some(INITIAL_BACKOFF)
    );
    assert_eq!(tracker.running_count(), 0);
}

#[tokio::test(start_paused = true)]
async fn completion_hook_gets_duration_and_outcome() {
    let (reports, mut received) = mpsc::unbounded_channel();
    let tracker = OperationTracker::with_completion_hook(DEFAULT_CONCURRENCY, move |report| {
        let _ = reports.send(report.clone());
    });
    tracker
        .run(op(), async {
            tokio::time::sleep(Duration::from_secs(7)).await;
            Err("quota exceeded")
        })
        .expect("start allowed");
    let report = received.recv().await.expect("report");
    assert_eq!(report.name, op());
    assert_eq!(report.elapsed, Duration::from_secs(7));
    assert_eq!(
        report.outcome,
        OperationOutcome::Failed("quota exceeded".to_string())
    );
    assert!(!report.outcome.is_success());
}

#[tokio::test(start_paused = true)]
async fn wait_idle_waits_for_every_running_operation() {
    let tracker = OperationTracker::new();
    for (i, secs) in [3u64, 1, 2].into_iter().enumerate() {
        let name = named(&format!("object{i}"));
        tracker
            .run(name, async move {
                tokio::time::sleep(Duration::from_secs(secs)).await;
                Ok::<(), String>(())
            })
            .expect("start allowed");
    }
    assert_eq!(tracker.running_count(), 3);
    let started = Instant::now();
    tracker.wait_idle().await;
    assert_eq!(started.elapsed(), Duration::from_secs(3));
    assert_eq!(tracker.running_count(), 0);
}

#[tokio::test(start_paused = true)]
async fn abort_all_cancels_running_operations() {
    let tracker = OperationTracker::new();
    tracker
        .run(op(), async {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            Ok::<(), String>(())
        })
        .expect("start allowed");
    tokio::task::yield_now().await;
    tracker.abort_all();
    let started = Instant::now();
    tracker.wait_idle().await;
    assert!(started.elapsed() < Duration::from_secs(1));
    assert!(!tracker.is_running(&op()));
}

#[tokio::test(start_paused = true)]
async fn wait_idle_returns_at_once_when_nothing_runs() {
    let tracker = OperationTracker::new();
    let started = Instant::now();
    tracker.wait_idle().await;
    assert_eq!(started.elapsed(), Duration::ZERO);
}

#[tokio::test(start_paused = true)]
async fn at_most_the_concurrency_limit_runs_at_once() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let tracker = OperationTracker::with_completion_hook(2, |_| {});
    let active = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    for i in 0..5 {
        let (active, most) = (Arc::clone(&active), Arc::clone(&most));
        tracker
            .run(named(&format!("object{i}")), async move {
                let now = active.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_secs(1)).await;
                active.fetch_sub(1, Ordering::SeqCst);
                Ok::<(), String>(())
            })
            .expect("started");
    }
    let started = Instant::now();
    tracker.wait_idle().await;
    assert_eq!(most.load(Ordering::SeqCst), 2);
    assert_eq!(
        started.elapsed(),
        Duration::from_secs(3),
        "five in turns of two"
    );
    assert!(
        tracker
            .run(named("object0"), async { Ok::<(), String>(()) })
            .is_ok(),
        "finished operations may run again"
    );
}
