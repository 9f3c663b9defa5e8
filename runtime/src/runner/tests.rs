//! The runner on workloads of its own: workers run while the process
//! leads, failures are retried with backoff, and a dying worker stops the
//! process and fails `/livez`.

use std::any::Any;
use std::sync::Mutex;
use std::sync::atomic::AtomicUsize;

use k8s_openapi::api::core::v1::Pod;

use super::*;
use crate::executor::{Executor, NoEffects, Parts, Reserver};
use crate::informer::{MemStore, StoreRef};
use crate::kinds::{Shape, drop_managed_fields};
use crate::plan::{Failure, Plan, Reservation};
use crate::queue::WorkQueue;
use crate::workload::Pool;
use crate::write::{Door, WriterSet};

/// Pods, encoded whole.
static POD: Shape<Pod> = Shape::new(drop_managed_fields);

/// Counts the plans running (each reserves its key) and the most at once.
#[derive(Default)]
struct Running {
    now: Arc<AtomicUsize>,
    most: Arc<AtomicUsize>,
}

/// Ends a running plan when dropped.
struct Ends(Arc<AtomicUsize>);

impl Drop for Ends {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Reserver for Running {
    fn reserve(&self, _: &Reservation) -> Result<Box<dyn Any + Send>, String> {
        let now = self.now.fetch_add(1, Ordering::SeqCst) + 1;
        self.most.fetch_max(now, Ordering::SeqCst);
        Ok(Box::new(Ends(Arc::clone(&self.now))))
    }
}

/// An executor of plans creating pods on `api`, taking reservations with
/// `reserver`.
fn executor(api: &memapi::MemApi, reserver: Running) -> Executor<()> {
    let metrics = Arc::new(Metrics::new().expect("metrics"));
    let store = StoreRef::new(&POD);
    store.fix(Arc::new(MemStore::<Pod>::default()));
    let door = Door::new(api.client(), Arc::clone(&metrics));
    Executor::new(Parts {
        controller: "test",
        writers: WriterSet::default().with(door.writer("test", store)),
        recorder: EventRecorder::new(api.client(), metrics, "test", "test").expect("recorder"),
        effects: Arc::new(NoEffects),
        reserver: Some(Arc::new(reserver)),
        operations: None,
        shadow: None,
    })
}

/// A plan that creates the pod `key`, reserving its name.
fn create_pod(key: &str) -> Plan<()> {
    let mut plan = Plan::default();
    let mut pod = Pod::default();
    pod.metadata.namespace = Some("ns".into());
    pod.metadata.name = Some(key.into());
    plan.create(pod);
    plan.reserve(Reservation {
        for_key: crate::keys::ObjectKey::new("ns", key),
        for_uid: key.into(),
        reserved: key.into(),
    });
    plan
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
        watch_settings: crate::informer::WatchSettings {
            failure_limit: Duration::from_secs(60),
            list_page_size: crate::informer::LIST_PAGE_SIZE,
        },
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
    let api = memapi::MemApi::new();
    let queue = WorkQueue::new();
    let decided = Arc::new(Mutex::new(Vec::new()));
    let stopped = Arc::new(AtomicUsize::new(0));
    let leading = Leading::default();
    let mut workload = Workload::new("test");
    let (on_lead, seen_leading) = (queue.clone(), leading.clone());
    workload.on_lead(move || {
        assert!(seen_leading.get(), "handlers queue work from now on");
        on_lead.add("a".to_string());
        on_lead.add("b".to_string());
    });
    let recorded = Arc::clone(&decided);
    workload.pool(Pool::new(
        queue.clone(),
        2,
        |_| "thing",
        move |key: &String, _| {
            recorded.lock().expect("decided").push(key.clone());
            create_pod(key)
        },
        executor(&api, Running::default()),
    ));
    let counted = Arc::clone(&stopped);
    workload.on_stop(move || {
        counted.fetch_add(1, Ordering::SeqCst);
    });
    let (runner, liveness, metrics) = runner(vec![workload], leading.clone());
    let idle = runner.idle_probe();
    let done = tokio::spawn(runner.run(None, tokio::time::sleep(Duration::from_secs(1))));
    done.await.expect("join").expect("a clean stop");
    let mut seen = decided.lock().expect("decided").clone();
    seen.sort();
    assert_eq!(seen, ["a", "b"]);
    assert_eq!(api.list::<Pod>().len(), 2, "both plans carried out");
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
    let api = memapi::MemApi::new();
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
        move |_: &String, _| {
            if counted.fetch_add(1, Ordering::SeqCst) < 3 {
                Plan::failed(Failure {
                    reason: "failed".into(),
                    label: "failed",
                    expected: false,
                })
            } else {
                Plan::default()
            }
        },
        executor(&api, Running::default()),
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
    let api = memapi::MemApi::new();
    let queue = WorkQueue::new();
    let mut workload = Workload::new("test");
    let adding = queue.clone();
    workload.on_lead(move || adding.add("boom".to_string()));
    workload.pool(Pool::new(
        queue,
        1,
        |_| "thing",
        |key: &String, _| {
            if key == "boom" {
                panic!("a decision panics");
            }
            Plan::default()
        },
        executor(&api, Running::default()),
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
async fn a_lane_decides_in_queue_order_while_its_plans_run_beside_each_other() {
    let api = memapi::MemApi::new();
    api.add_reactor(
        memapi::Reactor::on(memapi::Verb::Create, "pods")
            .delay(Duration::from_secs(1))
            .always(),
    );
    let queue = WorkQueue::new();
    let decided = Arc::new(Mutex::new(Vec::new()));
    let running = Running::default();
    let most = Arc::clone(&running.most);
    let mut workload = Workload::new("test");
    let adding = queue.clone();
    workload.on_lead(move || {
        for key in ["a", "b", "c", "d", "e"] {
            adding.add(key.to_string());
        }
    });
    let order = Arc::clone(&decided);
    workload.pool(
        Pool::new(
            queue,
            2,
            |_| "thing",
            move |key: &String, _| {
                order.lock().expect("decided").push(key.clone());
                create_pod(key)
            },
            executor(&api, running),
        )
        .in_one_lane(),
    );
    let (runner, liveness, metrics) = runner(vec![workload], Leading::default());
    let done = tokio::spawn(runner.run(None, tokio::time::sleep(Duration::from_secs(10))));
    done.await.expect("join").expect("a clean stop");
    assert_eq!(*decided.lock().expect("decided"), ["a", "b", "c", "d", "e"]);
    assert_eq!(most.load(Ordering::SeqCst), 2, "two plans at once, no more");
    assert_eq!(api.list::<Pod>().len(), 5);
    assert_eq!(liveness.failure(), None);
    let text = metrics.render().expect("render");
    assert!(
        text.contains(
            "pv_controller_sync_duration_seconds_count{controller=\"test\",kind=\"thing\",result=\"ok\"} 5"
        ),
        "{text}"
    );
}
