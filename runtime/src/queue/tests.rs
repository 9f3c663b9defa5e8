//! The queue's guarantees, in paused time.

use super::*;

impl<K: Clone + Eq + Hash + Send + Sync + 'static> WorkQueue<K> {
    /// How many times `key` was re-added by [`WorkQueue::add_rate_limited`]
    /// since it was last forgotten.
    fn num_requeues(&self, key: &K) -> u32 {
        self.lock().failures.get(key).copied().unwrap_or(0)
    }

    /// Whether [`WorkQueue::shut_down`] was called.
    fn is_shutting_down(&self) -> bool {
        self.lock().shutting_down
    }
}

/// Whether a worker gets a key without waiting (lets ready tasks run first).
async fn try_get(queue: &WorkQueue<&'static str>) -> Option<&'static str> {
    tokio::time::timeout(Duration::ZERO, queue.get())
        .await
        .ok()
        .flatten()
}

#[tokio::test(start_paused = true)]
async fn waiting_key_is_queued_once() {
    let queue = WorkQueue::new();
    queue.add("a");
    queue.add("b");
    queue.add("a");
    assert_eq!(queue.len(), 2);
    assert_eq!(try_get(&queue).await, Some("a"));
    assert_eq!(try_get(&queue).await, Some("b"));
    assert_eq!(try_get(&queue).await, None);
}

#[tokio::test(start_paused = true)]
async fn keys_come_out_in_insertion_order() {
    let queue = WorkQueue::new();
    for key in ["c", "a", "b"] {
        queue.add(key);
    }
    let mut order = Vec::new();
    while let Some(key) = try_get(&queue).await {
        order.push(key);
        queue.done(&key);
    }
    assert_eq!(order, ["c", "a", "b"]);
}

#[tokio::test(start_paused = true)]
async fn key_in_processing_is_not_given_to_a_second_worker() {
    let queue = WorkQueue::new();
    queue.add("a");
    assert_eq!(try_get(&queue).await, Some("a"));
    queue.add("a");
    assert_eq!(queue.len(), 0);
    let second = tokio::spawn({
        let queue = queue.clone();
        async move { queue.get().await }
    });
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert!(!second.is_finished());
    queue.done(&"a");
    assert_eq!(second.await.ok().flatten(), Some("a"));
}

#[tokio::test(start_paused = true)]
async fn key_added_while_processing_is_queued_again_once_on_done() {
    let queue = WorkQueue::new();
    queue.add("a");
    assert_eq!(try_get(&queue).await, Some("a"));
    queue.add("a");
    queue.add("a");
    queue.done(&"a");
    assert_eq!(queue.len(), 1);
    assert_eq!(try_get(&queue).await, Some("a"));
    queue.done(&"a");
    assert_eq!(try_get(&queue).await, None);
}

#[tokio::test(start_paused = true)]
async fn done_without_re_add_does_not_requeue() {
    let queue = WorkQueue::new();
    queue.add("a");
    assert_eq!(try_get(&queue).await, Some("a"));
    queue.done(&"a");
    assert!(queue.is_empty());
}

#[tokio::test(start_paused = true)]
async fn delayed_key_becomes_available_after_its_delay() {
    let queue = WorkQueue::new();
    queue.add_after("a", Duration::from_secs(10));
    assert_eq!(try_get(&queue).await, None);
    tokio::time::advance(Duration::from_millis(9_999)).await;
    assert_eq!(try_get(&queue).await, None);
    tokio::time::advance(Duration::from_millis(1)).await;
    assert_eq!(queue.len(), 1);
    assert_eq!(try_get(&queue).await, Some("a"));
}

#[tokio::test(start_paused = true)]
async fn waiting_worker_wakes_for_a_delayed_key() {
    let queue = WorkQueue::new();
    let worker = tokio::spawn({
        let queue = queue.clone();
        async move { queue.get().await }
    });
    tokio::task::yield_now().await;
    queue.add_after("a", Duration::from_secs(3));
    let started = Instant::now();
    assert_eq!(worker.await.ok().flatten(), Some("a"));
    assert_eq!(started.elapsed(), Duration::from_secs(3));
}

#[tokio::test(start_paused = true)]
async fn delayed_key_keeps_its_earliest_due_time() {
    let queue = WorkQueue::new();
    queue.add_after("a", Duration::from_secs(10));
    queue.add_after("a", Duration::from_secs(2));
    queue.add_after("a", Duration::from_secs(5));
    tokio::time::advance(Duration::from_secs(2)).await;
    assert_eq!(try_get(&queue).await, Some("a"));
    queue.done(&"a");
    tokio::time::advance(Duration::from_secs(20)).await;
    assert_eq!(try_get(&queue).await, None);
}

#[tokio::test(start_paused = true)]
async fn rate_limited_backoff_doubles_per_failure() {
    let queue = WorkQueue::new();
    for (failures, delay_ms) in [(0u32, 5u64), (1, 10), (2, 20), (3, 40)] {
        assert_eq!(queue.num_requeues(&"a"), failures);
        queue.add_rate_limited("a");
        tokio::time::advance(Duration::from_millis(delay_ms - 1)).await;
        assert_eq!(try_get(&queue).await, None, "before {delay_ms} ms");
        tokio::time::advance(Duration::from_millis(1)).await;
        assert_eq!(try_get(&queue).await, Some("a"), "after {delay_ms} ms");
        queue.done(&"a");
    }
    assert_eq!(queue.num_requeues(&"a"), 4);
}

#[tokio::test(start_paused = true)]
async fn forget_resets_the_backoff() {
    let queue = WorkQueue::new();
    for _ in 0..5 {
        queue.add_rate_limited("a");
    }
    queue.forget(&"a");
    assert_eq!(queue.num_requeues(&"a"), 0);
    // The five adds above are still scheduled (earliest at 5 ms); take it.
    tokio::time::advance(Duration::from_millis(5)).await;
    assert_eq!(try_get(&queue).await, Some("a"));
    queue.done(&"a");
    // Without the forget this retry would wait 5 ms * 2^5.
    queue.add_rate_limited("a");
    tokio::time::advance(Duration::from_millis(5)).await;
    assert_eq!(try_get(&queue).await, Some("a"));
    assert_eq!(queue.num_requeues(&"a"), 1);
}

#[test]
fn backoff_is_capped() {
    assert_eq!(backoff_delay(0), Duration::from_millis(5));
    assert_eq!(backoff_delay(17), Duration::from_millis(5 << 17));
    assert_eq!(backoff_delay(18), BACKOFF_MAX);
    assert_eq!(backoff_delay(40), BACKOFF_MAX);
    assert_eq!(backoff_delay(u32::MAX), BACKOFF_MAX);
}

#[tokio::test(start_paused = true)]
async fn shut_down_wakes_every_waiting_worker() {
    let queue: WorkQueue<&'static str> = WorkQueue::new();
    let workers: Vec<_> = (0..3)
        .map(|_| {
            let queue = queue.clone();
            tokio::spawn(async move { queue.get().await })
        })
        .collect();
    tokio::task::yield_now().await;
    queue.shut_down();
    for worker in workers {
        assert_eq!(worker.await.ok().flatten(), None);
    }
}

#[tokio::test(start_paused = true)]
async fn shut_down_drops_waiting_keys_and_ignores_adds() {
    let queue = WorkQueue::new();
    queue.add("a");
    queue.add_after("b", Duration::from_secs(1));
    queue.shut_down();
    queue.add("c");
    assert!(queue.is_shutting_down());
    assert_eq!(queue.get().await, None);
    tokio::time::advance(Duration::from_secs(2)).await;
    assert_eq!(queue.get().await, None);
}

#[tokio::test(start_paused = true)]
async fn added_key_wakes_a_waiting_worker() {
    let queue = WorkQueue::new();
    let worker = tokio::spawn({
        let queue = queue.clone();
        async move { queue.get().await }
    });
    tokio::task::yield_now().await;
    queue.add("a");
    assert_eq!(worker.await.ok().flatten(), Some("a"));
}

#[tokio::test(start_paused = true)]
async fn changes_go_before_resyncs() {
    let queue = WorkQueue::new();
    queue.add_resync("r1");
    queue.add_resync("r2");
    queue.add("c1");
    queue.add_resync("c1");
    let mut order = Vec::new();
    while let Some(key) = try_get(&queue).await {
        order.push(key);
        queue.done(&key);
    }
    assert_eq!(order, ["c1", "r1", "r2"]);
}

#[tokio::test(start_paused = true)]
async fn only_keys_waiting_in_a_lane_count_as_waiting() {
    let queue = WorkQueue::new();
    queue.add("taken");
    queue.add("change");
    queue.add_resync("resync");
    queue.add_after("delayed", Duration::from_secs(5));
    assert_eq!(try_get(&queue).await, Some("taken"));
    let keys = vec!["new", "change", "resync", "taken", "delayed", "new2"];
    let not_waiting: Vec<&str> = keys
        .into_iter()
        .filter(|key| !queue.is_waiting(key))
        .collect();
    assert_eq!(not_waiting, ["new", "taken", "delayed", "new2"]);
}

#[tokio::test(start_paused = true)]
async fn a_change_moves_a_resync_key_ahead_once() {
    let queue = WorkQueue::new();
    queue.add("c1");
    queue.add_resync("r1");
    queue.add_resync("r2");
    queue.add("r2");
    queue.add("r2");
    assert_eq!(queue.len(), 3, "still queued once");
    let mut order = Vec::new();
    while let Some(key) = try_get(&queue).await {
        order.push(key);
        queue.done(&key);
    }
    assert_eq!(order, ["c1", "r2", "r1"]);
}

#[tokio::test(start_paused = true)]
async fn a_key_added_while_processing_comes_back_in_the_more_urgent_lane() {
    let queue = WorkQueue::new();
    queue.add("a");
    assert_eq!(try_get(&queue).await, Some("a"));
    queue.add_resync("b");
    queue.add_resync("a");
    queue.add("a");
    queue.done(&"a");
    assert_eq!(try_get(&queue).await, Some("a"));
    queue.done(&"a");
    assert_eq!(try_get(&queue).await, Some("b"));
}

#[tokio::test(start_paused = true)]
async fn a_mark_passes_once_every_earlier_key_was_processed() {
    let queue = WorkQueue::new();
    assert!(
        queue.passed(queue.mark()),
        "an empty queue has nothing ahead"
    );
    queue.add("a");
    queue.add_resync("b");
    assert_eq!(try_get(&queue).await, Some("a"));
    let mark = queue.mark();
    queue.add("c");
    assert!(!queue.passed(mark));
    queue.done(&"a");
    assert!(!queue.passed(mark), "b still waits");
    assert_eq!(try_get(&queue).await, Some("c"));
    queue.done(&"c");
    assert!(!queue.passed(mark), "c came after the mark, b did not");
    assert_eq!(try_get(&queue).await, Some("b"));
    assert!(!queue.passed(mark), "b is being processed");
    queue.done(&"b");
    assert!(queue.passed(mark));
}

#[tokio::test(start_paused = true)]
async fn a_key_waiting_for_its_retry_does_not_hold_a_mark() {
    let queue = WorkQueue::new();
    queue.add("a");
    assert_eq!(try_get(&queue).await, Some("a"));
    let mark = queue.mark();
    queue.add_rate_limited("a");
    queue.done(&"a");
    assert!(queue.passed(mark));
}

#[tokio::test(start_paused = true)]
async fn keys_added_at_once_reach_as_many_waiting_workers() {
    let queue = WorkQueue::new();
    let workers: Vec<_> = (0..3)
        .map(|_| {
            let queue = queue.clone();
            tokio::spawn(async move { queue.get().await })
        })
        .collect();
    tokio::task::yield_now().await;
    queue.add("a");
    queue.add("b");
    queue.add("c");
    let mut got = Vec::new();
    for worker in workers {
        let key = tokio::time::timeout(Duration::from_secs(1), worker)
            .await
            .expect("every waiting worker gets a key, none is left asleep")
            .expect("joined");
        got.extend(key);
    }
    got.sort_unstable();
    assert_eq!(got, ["a", "b", "c"]);
}

#[tokio::test(start_paused = true)]
async fn an_earlier_due_time_rearms_a_waiting_worker() {
    let queue = WorkQueue::new();
    queue.add_after("late", Duration::from_secs(60));
    let worker = tokio::spawn({
        let queue = queue.clone();
        async move { queue.get().await }
    });
    tokio::task::yield_now().await;
    queue.add_after("soon", Duration::from_secs(1));
    let key = tokio::time::timeout(Duration::from_secs(2), worker)
        .await
        .expect("woken for the earlier key, not the later one")
        .expect("joined");
    assert_eq!(key, Some("soon"));
}

#[tokio::test(start_paused = true)]
async fn a_queue_drained_after_a_burst_gives_its_table_back() {
    let queue: WorkQueue<u32> = WorkQueue::new();
    for key in 0..100_000 {
        queue.add_resync(key);
    }
    let full = queue.lock().waiting.capacity();
    for _ in 0..99_990 {
        let key = queue.get().await.expect("a key");
        queue.done(&key);
    }
    assert_eq!(queue.len(), 10);
    let left = queue.lock().waiting.capacity();
    assert!(left < full / 16, "{left} of {full} slots kept for 10 keys");
    for expected in 99_990..100_000 {
        assert_eq!(
            queue.get().await,
            Some(expected),
            "what is left keeps its order"
        );
        queue.done(&expected);
    }
}
