use std::time::Duration;

use super::*;

#[tokio::test(start_paused = true)]
async fn the_first_task_to_end_is_reported_by_name_and_how() {
    let mut tasks = Supervised::default();
    tasks.spawn("server", std::future::pending());
    tasks.spawn("sender", async {
        tokio::time::sleep(Duration::from_secs(5)).await;
        panic!("a bug in the sender");
    });
    let stopped = tasks.stopped().await;
    assert_eq!(stopped.task, "sender");
    assert!(stopped.how.contains("a bug in the sender"), "{stopped}");
    assert_eq!(
        tokio::time::timeout(Duration::from_secs(60), tasks.stopped())
            .await
            .ok()
            .map(|s| s.task),
        None,
        "the server runs on"
    );
    tasks.stop_all().await;
}

#[tokio::test(start_paused = true)]
async fn a_watched_task_is_reported_and_aborted_with_the_others() {
    let mut tasks = Supervised::default();
    let returns = tokio::spawn(async {
        tokio::time::sleep(Duration::from_secs(1)).await;
    });
    tasks.watch("listener", returns);
    let stopped = tasks.stopped().await;
    assert_eq!(
        (stopped.task, stopped.how.as_str()),
        ("listener", "it returned")
    );

    let (held, mut released) = tokio::sync::oneshot::channel::<()>();
    let runs = tokio::spawn(async move {
        let _held = held;
        std::future::pending::<()>().await;
    });
    tasks.watch("kubelet", runs);
    tasks.stop_all().await;
    assert!(
        matches!(
            tokio::time::timeout(Duration::from_secs(1), &mut released).await,
            Ok(Err(_))
        ),
        "the watched task was aborted: its sender is dropped"
    );
    assert!(
        tokio::time::timeout(Duration::from_secs(1), tasks.stopped())
            .await
            .is_err(),
        "nothing left to report"
    );
}
