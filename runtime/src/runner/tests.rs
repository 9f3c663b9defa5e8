//! The runner on workloads of its own: workers run while the process
//! leads, failures are retried with backoff, and a dying worker stops the
//! process and fails `/livez`.

use std::sync::Mutex;
use std::sync::atomic::AtomicUsize;

use super::*;
use crate::queue::{Turn, WorkQueue};
use crate::workload::{Outcome, Pool, SyncFailure};

/// A sync failure of the tests.
#[derive(Debug)]
struct Failed;

impl std::fmt::Display for Failed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("failed")
    }
}

impl SyncFailure for Failed {
    fn metric_label(&self) -> &'static str {
        "failed"
    }

    fn is_expected(&self) -> bool {
        false
    }
}

/// A runner of `workloads` on an in-memory API server, watching nothing.
fn runner(workloads: Vec<Workload>, leading: Leading) -> (Runner, Liveness, Arc<Metrics>) {
    let api = memapi::MemApi::new();
    let metrics = Arc::new(Metrics::new().expect("metrics"));
    let liveness = Liveness::default();
    let recorder =
        EventRecorder::new(api.client(), Arc::clone(&metrics), "test", "test").expect("recorder");
    let runner = Runner::new(RunnerParts {
        report_leader: true,
        client: api.client(),
        watch_failure_limit: Duration::from_secs(60),
        informers: Informers::default(),
        workloads,
        leading,
        recorder,
        metrics: Arc::clone(&metrics),
        readiness: Readiness::default(),
        liveness: liveness.clone(),
    });
    (runner, liveness, metrics)
}

#[tokio::test(start_paused = true)]
async fn workers_run_while_the_process_leads_and_stop_on_shutdown() {
    let queue = WorkQueue::new();
    let synced = Arc::new(Mutex::new(Vec::new()));
    let stopped = Arc::new(AtomicUsize::new(0));
    let leading = Leading::default();
    let mut workload = Workload::new("test");
    let (on_lead, seen_leading) = (queue.clone(), leading.clone());
    workload.on_lead(move || {
        assert!(seen_leading.get(), "handlers queue work from now on");
        on_lead.add("a".to_string());
        on_lead.add("b".to_string());
    });
    let recorded = Arc::clone(&synced);
    workload.pool(Pool::new(
        queue.clone(),
        2,
        |_| "thing",
        move |key: String, turn: Turn| {
            let recorded = Arc::clone(&recorded);
            async move {
                recorded.lock().expect("synced").push((key, turn.0));
                Ok::<_, Failed>(Outcome::Synced)
            }
        },
    ));
    let counted = Arc::clone(&stopped);
    workload.on_stop(move || {
        counted.fetch_add(1, Ordering::SeqCst);
    });
    let (runner, liveness, metrics) = runner(vec![workload], leading.clone());
    let idle = runner.idle_probe();
    let done = tokio::spawn(runner.run(None, tokio::time::sleep(Duration::from_secs(1))));
    done.await.expect("join").expect("a clean stop");
    let mut seen = synced.lock().expect("synced").clone();
    seen.sort();
    assert_eq!(seen, [("a".to_string(), 0), ("b".to_string(), 1)]);
    assert_eq!(stopped.load(Ordering::SeqCst), 1);
    assert!(!leading.get(), "no handler queues work after the stop");
    assert!(idle.is_idle());
    assert_eq!(liveness.failure(), None);
    let text = metrics.render().expect("render");
    assert!(
        text.contains(
            "pv_controller_sync_duration_seconds_count{controller=\"test\",kind=\"thing\",result=\"ok\"} 2"
        ),
        "{text}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_failed_key_is_retried_with_backoff() {
    let queue = WorkQueue::new();
    let tries = Arc::new(AtomicUsize::new(0));
    let mut workload = Workload::new("test");
    let adding = queue.clone();
    workload.on_lead(move || adding.add("a".to_string()));
    let counted = Arc::clone(&tries);
    workload.pool(Pool::new(
        queue,
        1,
        |_| "thing",
        move |_key: String, _| {
            let counted = Arc::clone(&counted);
            async move {
                if counted.fetch_add(1, Ordering::SeqCst) < 3 {
                    Err(Failed)
                } else {
                    Ok(Outcome::Synced)
                }
            }
        },
    ));
    let (runner, _, _) = runner(vec![workload], Leading::default());
    let idle = runner.idle_probe();
    let running = tokio::spawn(runner.run(None, std::future::pending()));
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        tries.load(Ordering::SeqCst),
        4,
        "three failures, then success"
    );
    assert!(idle.is_idle());
    running.abort();
}

#[tokio::test(start_paused = true)]
async fn a_dying_worker_stops_the_process_and_fails_livez() {
    let queue = WorkQueue::new();
    let mut workload = Workload::new("test");
    let adding = queue.clone();
    workload.on_lead(move || adding.add("boom".to_string()));
    workload.pool(Pool::new(
        queue,
        1,
        |_| "thing",
        |key: String, _| async move {
            if key == "boom" {
                panic!("a worker panics");
            }
            Ok::<_, Failed>(Outcome::Synced)
        },
    ));
    let (runner, liveness, _) = runner(vec![workload], Leading::default());
    let result = runner.run(None, std::future::pending()).await;
    let error = result.expect_err("the process stops");
    assert!(
        matches!(
            &error,
            RunError::TaskEnded {
                controller: "test",
                ..
            }
        ),
        "{error}"
    );
    let failure = liveness.failure().expect("/livez fails");
    assert!(failure.contains("worker"), "{failure}");
}

/// A periodic task of period zero is refused when the workload starts: the
/// process stops with an error that says so, and nothing panics (tokio's
/// interval panics on a zero period).
#[tokio::test(start_paused = true)]
async fn a_periodic_task_of_period_zero_stops_the_process_without_a_panic() {
    let mut workload = Workload::new("test");
    workload.every(Duration::ZERO, || {});
    let (runner, liveness, _) = runner(vec![workload], Leading::default());
    let error = runner
        .run(None, std::future::pending())
        .await
        .expect_err("the process stops");
    let text = error.to_string();
    assert!(text.contains("period is zero"), "{text}");
    assert!(!text.contains("panicked"), "{text}");
    assert!(liveness.failure().is_some());
}

#[tokio::test(start_paused = true)]
async fn a_lane_decides_in_queue_order_while_its_executions_run_beside_each_other() {
    let queue = WorkQueue::new();
    let decided = Arc::new(Mutex::new(Vec::new()));
    let running = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let mut workload = Workload::new("test");
    let adding = queue.clone();
    workload.on_lead(move || {
        for key in ["a", "b", "c", "d", "e"] {
            adding.add(key.to_string());
        }
    });
    let (order, counting, peak) = (
        Arc::clone(&decided),
        Arc::clone(&running),
        Arc::clone(&most),
    );
    workload.pool(Pool::lane(
        queue,
        2,
        |_| "thing",
        move |key: String| {
            // The decision: made at once, in the lane.
            order.lock().expect("decided").push(key);
            let (counting, peak) = (Arc::clone(&counting), Arc::clone(&peak));
            Box::pin(async move {
                let now = counting.fetch_add(1, Ordering::SeqCst) + 1;
                peak.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_secs(1)).await;
                counting.fetch_sub(1, Ordering::SeqCst);
                Ok::<_, Failed>(Outcome::Synced)
            })
        },
    ));
    let (runner, liveness, metrics) = runner(vec![workload], Leading::default());
    let done = tokio::spawn(runner.run(None, tokio::time::sleep(Duration::from_secs(10))));
    done.await.expect("join").expect("a clean stop");
    assert_eq!(*decided.lock().expect("decided"), ["a", "b", "c", "d", "e"]);
    assert_eq!(
        most.load(Ordering::SeqCst),
        2,
        "two executions at once, no more"
    );
    assert_eq!(liveness.failure(), None);
    let text = metrics.render().expect("render");
    assert!(
        text.contains(
            "pv_controller_sync_duration_seconds_count{controller=\"test\",kind=\"thing\",result=\"ok\"} 5"
        ),
        "{text}"
    );
}
