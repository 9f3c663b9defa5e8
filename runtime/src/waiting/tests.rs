use super::*;

async fn drain(queue: &WorkQueue<String>) -> Vec<String> {
    let mut keys = vec![];
    while !queue.is_empty() {
        if let Some(key) = queue.get().await {
            queue.done(&key);
            keys.push(key);
        }
    }
    keys.sort();
    keys
}

#[tokio::test]
async fn a_wake_queues_every_waiting_key_once() {
    let queue = WorkQueue::new();
    let waiting = Waiting::new(queue.clone());
    for key in ["a", "b"] {
        let began = waiting.epoch();
        waiting.wait(&key.to_string(), began);
    }
    assert_eq!(waiting.len(), 2);
    assert!(drain(&queue).await.is_empty());
    waiting.wake(|keys| keys);
    assert_eq!(drain(&queue).await, ["a", "b"]);
    assert!(waiting.is_empty());
    waiting.wake(|keys| keys);
    assert!(drain(&queue).await.is_empty(), "no one waits any more");
}

#[tokio::test]
async fn a_wake_during_the_decision_is_not_missed() {
    let queue = WorkQueue::new();
    let waiting = Waiting::new(queue.clone());
    let began = waiting.epoch();
    waiting.wake(|keys| keys);
    waiting.wait(&"a".to_string(), began);
    assert_eq!(drain(&queue).await, ["a"], "queued again at once");
    assert!(waiting.is_empty());
}

#[tokio::test]
async fn forgotten_keys_are_not_woken() {
    let queue = WorkQueue::new();
    let waiting = Waiting::new(queue.clone());
    waiting.wait(&"a".to_string(), 0);
    waiting.wait(&"b".to_string(), 0);
    waiting.forget(&"a".to_string());
    waiting.forget(&"b".to_string());
    assert!(waiting.is_empty());
    waiting.wake(|keys| keys);
    assert!(drain(&queue).await.is_empty());
}

#[tokio::test]
async fn the_wake_orders_the_keys() {
    let queue = WorkQueue::new();
    let waiting = Waiting::new(queue.clone());
    for key in ["a", "b", "c"] {
        waiting.wait(&key.to_string(), 0);
    }
    waiting.wake(|mut keys| {
        keys.retain(|key| key != "b");
        keys
    });
    assert_eq!(drain(&queue).await, ["a", "c"]);
}
