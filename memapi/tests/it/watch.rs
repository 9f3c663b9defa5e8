//! memapi watches through kube-runtime's watcher: every change is seen,
//! and a compacted version yields an in-stream 410 and a relist.

use crate::support::pv;
use futures::StreamExt;
use k8s_openapi::api::core::v1::PersistentVolume;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::watcher::{self, Event};
use memapi::{MemApi, Reactor, Verb};
use serde_json::json;
use std::collections::BTreeMap;
use std::time::Duration;
use tokio::sync::mpsc;

/// Drives a watcher on its own task, forwarding its events.
fn spawn_watcher(
    mem: &MemApi,
    config: watcher::Config,
) -> mpsc::UnboundedReceiver<Result<Event<PersistentVolume>, watcher::Error>> {
    let api: Api<PersistentVolume> = Api::all(mem.client());
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut stream = watcher::watcher(api, config).boxed();
        while let Some(ev) = stream.next().await {
            if tx.send(ev).is_err() {
                break;
            }
        }
    });
    rx
}

/// Receives events until InitDone, returning the names listed.
async fn until_init_done(
    rx: &mut mpsc::UnboundedReceiver<Result<Event<PersistentVolume>, watcher::Error>>,
) -> Vec<String> {
    let mut names = Vec::new();
    loop {
        match rx.recv().await.unwrap() {
            Ok(Event::Init) => names.clear(),
            Ok(Event::InitApply(o)) => names.push(o.name_any()),
            Ok(Event::InitDone) => return names,
            other => panic!("unexpected before InitDone: {other:?}"),
        }
    }
}

#[tokio::test(start_paused = true)]
async fn watcher_sees_every_change_from_another_client() {
    let mem = MemApi::new();
    mem.create(&pv("seed", "1Gi")).unwrap();
    let mut rx = spawn_watcher(&mem, watcher::Config::default());
    assert_eq!(until_init_done(&mut rx).await, vec!["seed".to_string()]);

    let pvs: Api<PersistentVolume> = Api::all(mem.client());
    pvs.create(&PostParams::default(), &pv("a", "1Gi"))
        .await
        .unwrap();
    let p = json!({"metadata": {"labels": {"x": "y"}}});
    pvs.patch("a", &PatchParams::default(), &Patch::Merge(p))
        .await
        .unwrap();
    pvs.delete("seed", &DeleteParams::default()).await.unwrap();

    let mut seen = Vec::new();
    while seen.len() < 3 {
        match rx.recv().await.unwrap().unwrap() {
            Event::Apply(o) => {
                seen.push(format!("apply {} {:?}", o.name_any(), o.labels().get("x")));
            }
            Event::Delete(o) => seen.push(format!("delete {}", o.name_any())),
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(
        seen,
        vec![
            "apply a None".to_string(),
            "apply a Some(\"y\")".to_string(),
            "delete seed".to_string(),
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn compacted_watch_gets_410_and_watcher_relists() {
    let mem = MemApi::new();
    mem.create(&pv("a", "1Gi")).unwrap();
    let config = watcher::Config::default().timeout(10).disable_bookmarks();
    let mut rx = spawn_watcher(&mem, config);
    assert_eq!(until_init_done(&mut rx).await, vec!["a".to_string()]);

    // The re-watch after the server-side timeout is held back while the
    // cluster changes and the history is compacted.
    mem.add_reactor(Reactor::on(Verb::Watch, "persistentvolumes").delay(Duration::from_secs(30)));
    tokio::time::sleep(Duration::from_secs(15)).await;
    mem.create(&pv("b", "1Gi")).unwrap();
    assert!(mem.remove::<PersistentVolume>(None, "a"));
    mem.compact();

    match rx.recv().await.unwrap() {
        Err(watcher::Error::WatchError(status)) => assert_eq!(status.code, 410),
        other => panic!("expected a 410, got {other:?}"),
    }
    assert_eq!(until_init_done(&mut rx).await, vec!["b".to_string()]);
    let watches = mem.requests().count(Verb::Watch, "persistentvolumes", None);
    assert!(watches >= 2, "{watches}");
}

#[tokio::test(start_paused = true)]
async fn raw_watch_resumes_from_a_version_with_bookmarks_and_selectors() {
    let mem = MemApi::new();
    let pvs: Api<PersistentVolume> = Api::all(mem.client());
    let start = mem.resource_version().to_string();
    let mut labelled = pv("l1", "1Gi");
    labelled.metadata.labels = Some(BTreeMap::from([("tier".to_string(), "gold".to_string())]));
    mem.create(&labelled).unwrap();
    mem.create(&pv("plain", "1Gi")).unwrap();

    let wp = kube::api::WatchParams::default()
        .labels("tier=gold")
        .timeout(20);
    let mut stream = pvs.watch(&wp, &start).await.unwrap().boxed();
    match stream.next().await.unwrap().unwrap() {
        kube::api::WatchEvent::Added(o) => assert_eq!(o.name_any(), "l1"),
        other => panic!("{other:?}"),
    }
    // Losing the label reads as a deletion for this watch.
    let p = json!({"metadata": {"labels": {"tier": null}}});
    pvs.patch("l1", &PatchParams::default(), &Patch::Merge(p))
        .await
        .unwrap();
    match stream.next().await.unwrap().unwrap() {
        kube::api::WatchEvent::Deleted(o) => assert_eq!(o.name_any(), "l1"),
        other => panic!("{other:?}"),
    }
    // Bookmarks come periodically when asked for; the stream ends at its timeout.
    let wp = kube::api::WatchParams::default().timeout(12);
    let now = mem.resource_version().to_string();
    let mut stream = pvs.watch(&wp, &now).await.unwrap().boxed();
    match stream.next().await.unwrap().unwrap() {
        kube::api::WatchEvent::Bookmark(b) => assert_eq!(b.metadata.resource_version, now),
        other => panic!("{other:?}"),
    }
    let rest: Vec<_> = stream.collect().await;
    assert!(
        rest.iter()
            .all(|e| matches!(e, Ok(kube::api::WatchEvent::Bookmark(_))))
    );

    // A compacted version gives an in-stream 410, not an HTTP error.
    mem.create(&pv("later", "1Gi")).unwrap();
    mem.compact();
    let mut stream = pvs
        .watch(&kube::api::WatchParams::default(), &start)
        .await
        .unwrap()
        .boxed();
    match stream.next().await.unwrap().unwrap() {
        kube::api::WatchEvent::Error(e) => assert_eq!(e.code, 410),
        other => panic!("{other:?}"),
    }
    assert!(stream.next().await.is_none());
}

#[tokio::test(start_paused = true)]
async fn streaming_list_watcher_gets_initial_events() {
    let mem = MemApi::new();
    mem.create(&pv("a", "1Gi")).unwrap();
    mem.create(&pv("b", "1Gi")).unwrap();
    let mut rx = spawn_watcher(&mem, watcher::Config::default().streaming_lists());
    assert_eq!(
        until_init_done(&mut rx).await,
        vec!["a".to_string(), "b".to_string()]
    );
    mem.create(&pv("c", "1Gi")).unwrap();
    match rx.recv().await.unwrap().unwrap() {
        Event::Apply(o) => assert_eq!(o.name_any(), "c"),
        other => panic!("{other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn a_cut_watch_fails_mid_stream_and_the_watcher_resumes_without_a_relist() {
    let mem = MemApi::new();
    mem.create(&pv("a", "1Gi")).unwrap();
    let mut rx = spawn_watcher(&mem, watcher::Config::default().disable_bookmarks());
    assert_eq!(until_init_done(&mut rx).await, vec!["a".to_string()]);
    mem.create(&pv("b", "1Gi")).unwrap();
    assert_eq!(mem.cut_watches(), 1);
    // The event sent before the cut arrives, then the broken stream.
    match rx.recv().await.unwrap() {
        Ok(Event::Apply(o)) => assert_eq!(o.name_any(), "b"),
        other => panic!("expected b, got {other:?}"),
    }
    match rx.recv().await.unwrap() {
        Err(watcher::Error::WatchFailed(_)) => {}
        other => panic!("expected the stream to fail, got {other:?}"),
    }
    mem.create(&pv("c", "1Gi")).unwrap();
    match rx.recv().await.unwrap() {
        Ok(Event::Apply(o)) => assert_eq!(o.name_any(), "c"),
        other => panic!("expected c after the re-watch, got {other:?}"),
    }
    let stats = mem.requests();
    assert_eq!(
        stats.count(Verb::List, "persistentvolumes", None),
        1,
        "no relist"
    );
    assert_eq!(stats.count(Verb::Watch, "persistentvolumes", None), 2);
}

/// A stream the server ends cleanly: no error, the watcher watches again
/// from its version; events a lag held back come with the new watch.
#[tokio::test(start_paused = true)]
async fn a_stream_ended_cleanly_is_watched_again_without_an_error() {
    let mem = MemApi::new();
    mem.create(&pv("a", "1Gi")).unwrap();
    let mut rx = spawn_watcher(&mem, watcher::Config::default().disable_bookmarks());
    assert_eq!(until_init_done(&mut rx).await, vec!["a".to_string()]);
    mem.lag_watches("persistentvolumes", Duration::from_secs(5))
        .unwrap();
    mem.create(&pv("b", "1Gi")).unwrap();
    tokio::task::yield_now().await;
    assert_eq!(mem.end_watches(), 1);
    mem.lag_watches("persistentvolumes", Duration::ZERO)
        .unwrap();
    mem.create(&pv("c", "1Gi")).unwrap();
    for want in ["b", "c"] {
        match rx.recv().await.unwrap() {
            Ok(Event::Apply(o)) => assert_eq!(o.name_any(), want),
            other => panic!("expected {want}, got {other:?}"),
        }
    }
    let stats = mem.requests();
    assert_eq!(stats.count(Verb::List, "persistentvolumes", None), 1);
    assert_eq!(stats.count(Verb::Watch, "persistentvolumes", None), 2);
}

#[tokio::test(start_paused = true)]
async fn a_cut_after_a_compaction_makes_the_watcher_relist() {
    let mem = MemApi::new();
    mem.create(&pv("a", "1Gi")).unwrap();
    let mut rx = spawn_watcher(&mem, watcher::Config::default().disable_bookmarks());
    assert_eq!(until_init_done(&mut rx).await, vec!["a".to_string()]);
    // The stream breaks; its re-watch is held back while the cluster
    // changes and the history is compacted past the watcher's version.
    mem.add_reactor(Reactor::on(Verb::Watch, "persistentvolumes").delay(Duration::from_secs(30)));
    assert_eq!(mem.cut_watches(), 1);
    assert!(mem.remove::<PersistentVolume>(None, "a"));
    mem.compact();
    mem.create(&pv("b", "1Gi")).unwrap();
    let mut errors = vec![];
    let relisted = tokio::time::timeout(Duration::from_secs(600), async {
        loop {
            match rx.recv().await.unwrap() {
                Err(e) => errors.push(e.to_string()),
                Ok(Event::Init) => return until_init_done_after_init(&mut rx).await,
                Ok(other) => panic!("unexpected before the relist: {other:?}"),
            }
        }
    })
    .await;
    let listed = relisted.unwrap_or_else(|_| panic!("no relist; errors: {errors:?}"));
    assert_eq!(listed, vec!["b".to_string()]);
    assert!(
        errors
            .iter()
            .any(|e| e.contains("too old resource version")),
        "{errors:?}"
    );
    assert_eq!(
        mem.requests().count(Verb::List, "persistentvolumes", None),
        2
    );
}

/// The names listed between an Init already received and InitDone.
async fn until_init_done_after_init(
    rx: &mut mpsc::UnboundedReceiver<Result<Event<PersistentVolume>, watcher::Error>>,
) -> Vec<String> {
    let mut names = Vec::new();
    loop {
        match rx.recv().await.unwrap() {
            Ok(Event::InitApply(o)) => names.push(o.name_any()),
            Ok(Event::InitDone) => return names,
            other => panic!("unexpected before InitDone: {other:?}"),
        }
    }
}

#[tokio::test(start_paused = true)]
async fn a_lost_event_reaches_no_open_watch_and_the_next_one_does() {
    let mem = MemApi::new();
    mem.create(&pv("a", "1Gi")).unwrap();
    let mut rx = spawn_watcher(&mem, watcher::Config::default().disable_bookmarks());
    assert_eq!(until_init_done(&mut rx).await, vec!["a".to_string()]);
    let mut observer = mem.observe::<PersistentVolume>().unwrap();
    mem.lose_events("persistentvolumes", 1).unwrap();
    mem.create(&pv("lost", "1Gi")).unwrap();
    mem.create(&pv("seen", "1Gi")).unwrap();
    match rx.recv().await.unwrap() {
        Ok(Event::Apply(o)) => assert_eq!(o.name_any(), "seen", "the lost change is skipped"),
        other => panic!("expected seen, got {other:?}"),
    }
    assert!(
        mem.get::<PersistentVolume>(None, "lost").is_some(),
        "stored"
    );
    let observed: Vec<String> = observer
        .drain()
        .into_iter()
        .map(|o| o.object.name_any())
        .collect();
    assert_eq!(observed, ["lost", "seen"], "observers are told");
    assert!(mem.lose_events("widgets", 1).is_err());
}

#[tokio::test(start_paused = true)]
async fn a_lagging_watch_delivers_late_in_order_and_a_write_is_answered_at_once() {
    let mem = MemApi::new();
    let mut rx = spawn_watcher(&mem, watcher::Config::default().disable_bookmarks());
    assert!(until_init_done(&mut rx).await.is_empty());
    mem.lag_watches("persistentvolumes", Duration::from_secs(2))
        .unwrap();
    let pvs: Api<PersistentVolume> = Api::all(mem.client());
    let started = tokio::time::Instant::now();
    let created = pvs
        .create(&PostParams::default(), &pv("a", "1Gi"))
        .await
        .unwrap();
    assert_eq!(created.name_any(), "a", "the answer is not late");
    assert_eq!(started.elapsed(), Duration::ZERO);
    mem.create(&pv("b", "1Gi")).unwrap();
    let mut seen = Vec::new();
    for _ in 0..2 {
        match rx.recv().await.unwrap() {
            Ok(Event::Apply(o)) => seen.push((o.name_any(), started.elapsed())),
            other => panic!("expected a change, got {other:?}"),
        }
    }
    assert_eq!(
        seen,
        [
            ("a".to_string(), Duration::from_secs(2)),
            ("b".to_string(), Duration::from_secs(2))
        ],
        "both late by the lag, in order"
    );
    mem.lag_watches("persistentvolumes", Duration::ZERO)
        .unwrap();
    let again = tokio::time::Instant::now();
    mem.create(&pv("c", "1Gi")).unwrap();
    match rx.recv().await.unwrap() {
        Ok(Event::Apply(o)) => assert_eq!(
            (o.name_any(), again.elapsed()),
            ("c".into(), Duration::ZERO)
        ),
        other => panic!("expected c, got {other:?}"),
    }
    assert!(mem.lag_watches("widgets", Duration::ZERO).is_err());
}
