//! The informers on hand-fed watch events: what each handler is told,
//! what the store keeps, and an object gone during a relist told as
//! deleted; and on memapi, the field managers of each watched version.

use std::sync::Mutex;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{PersistentVolume, Pod};
use kube::runtime::watcher::Event;

use super::watch::Informer;
use super::*;
use crate::kinds::drop_managed_fields;
use crate::managers::Managed;

/// Pods, trimmed of their managedFields.
static POD: Shape<Pod> = Shape::new(drop_managed_fields);

/// Volumes, trimmed of their managedFields.
static VOLUME: Shape<PersistentVolume> = Shape::new(drop_managed_fields);

/// Volumes as another controller would hand them: another value.
static OTHER_VOLUME: Shape<PersistentVolume> = Shape::new(drop_managed_fields);

fn pod(name: &str, version: &str) -> Pod {
    let mut pod = Pod::default();
    pod.metadata.namespace = Some("ns".into());
    pod.metadata.name = Some(name.into());
    pod.metadata.uid = Some(format!("uid-{name}"));
    pod.metadata.resource_version = Some(version.into());
    pod
}

/// What a handler was told, as text.
fn told(change: &Change<'_, Pod>) -> String {
    match change {
        Change::Applied { object, listing } => format!(
            "applied {} listing={listing}",
            ObjectKey::of(object.as_ref())
        ),
        Change::Deleted { key, last } => {
            format!("deleted {key} last={}", last.is_some())
        }
        Change::Listed => "listed".to_string(),
    }
}

/// What the recording handler was told, in order.
type Told = Arc<Mutex<Vec<String>>>;

/// An informer of pods into a [`MemStore`], with one recording handler.
fn informer() -> (Informer<Pod>, Arc<MemStore<Pod>>, Told) {
    let store = Arc::new(MemStore::default());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let recorded = Arc::clone(&seen);
    let informer = Informer {
        store: Arc::clone(&store) as Arc<dyn Store<Pod>>,
        handlers: vec![Box::new(move |change: &Change<'_, Pod>| {
            recorded.lock().expect("seen").push(told(change));
        })],
        listing: None,
        newest_shown: None,
        incarnations: Incarnations::default(),
        request: FIRST_LIST,
        synced: Synced::default(),
    };
    (informer, store, seen)
}

/// A whole list of `pods` as the watcher hands it: its start, each
/// object, its end.
fn list(informer: &mut Informer<Pod>, pods: impl IntoIterator<Item = Pod>) {
    informer.on_event(Event::Init);
    for pod in pods {
        informer.on_event(Event::InitApply(pod));
    }
    informer.on_event(Event::InitDone);
}

fn take(seen: &Mutex<Vec<String>>) -> Vec<String> {
    std::mem::take(&mut *seen.lock().expect("seen"))
}

#[tokio::test]
async fn a_relist_tells_an_object_gone_meanwhile_as_deleted() {
    let (mut informer, store, seen) = informer();
    list(&mut informer, [pod("a", "1"), pod("b", "1")]);
    assert_eq!(
        take(&seen),
        [
            "applied ns/a listing=true",
            "applied ns/b listing=true",
            "listed"
        ]
    );
    informer.synced.wait_for(FIRST_LIST).await;
    informer.on_event(Event::Apply(pod("a", "2")));
    informer.on_event(Event::Delete(pod("c", "3")));
    assert_eq!(
        take(&seen),
        ["applied ns/a listing=false", "deleted ns/c last=true"]
    );
    // The watch could not resume: "b" was deleted while it was down.
    list(&mut informer, [pod("a", "2")]);
    assert_eq!(
        take(&seen),
        [
            "applied ns/a listing=true",
            "deleted ns/b last=true",
            "listed"
        ]
    );
    assert_eq!(store.keys(), [ObjectKey::new("ns", "a")]);
}

/// A relist's continued pages come from its first page's snapshot, and a
/// page may be answered late: an object this process created after the
/// snapshot is missing from the list without being gone. An incarnation
/// the watch has shown, missing from a list, is gone, however new the
/// store's copy.
#[tokio::test]
async fn a_relist_keeps_what_this_process_created_after_its_snapshot_and_drops_what_it_proves_gone()
{
    let (mut informer, store, seen) = informer();
    list(&mut informer, [pod("a", "5")]);
    informer.synced.wait_for(FIRST_LIST).await;
    informer.on_event(Event::Apply(pod("c", "8")));
    take(&seen);
    // The watch breaks; the relist's snapshot is taken at version 9 (c
    // was deleted before it), then "new" is created at 12 by a write of
    // this process, its answer stored.
    informer.on_event(Event::Init);
    informer.incarnations.created("uid-new");
    store.written(Arc::new(pod("new", "12"))).expect("stored");
    for event in [Event::InitApply(pod("a", "9")), Event::InitDone] {
        informer.on_event(event);
    }
    assert_eq!(
        take(&seen),
        [
            "applied ns/a listing=true",
            "deleted ns/c last=true",
            "listed"
        ]
    );
    assert_eq!(
        store.keys(),
        [ObjectKey::new("ns", "a"), ObjectKey::new("ns", "new")],
        "created after the snapshot: kept"
    );
    // The next relist shows a version past it: what it lacks is gone.
    list(&mut informer, [pod("a", "20")]);
    assert_eq!(
        take(&seen),
        [
            "applied ns/a listing=true",
            "deleted ns/new last=true",
            "listed"
        ]
    );
    // "x", shown by the watch, then written by this process (the answer
    // newer than anything shown) and deleted while the watch was down: a
    // list without it proves it gone.
    informer.on_event(Event::Apply(pod("x", "30")));
    store.written(Arc::new(pod("x", "31"))).expect("stored");
    take(&seen);
    list(&mut informer, [pod("a", "20")]);
    assert_eq!(
        take(&seen),
        [
            "applied ns/a listing=true",
            "deleted ns/x last=true",
            "listed"
        ]
    );
    assert_eq!(store.keys(), [ObjectKey::new("ns", "a")]);
}

#[test]
fn each_kind_has_one_store_and_one_slot() {
    let mut informers = Informers::default();
    let first = informers.store(&POD).expect("a store");
    let mem = informers.mem_store(&POD).expect("the default store");
    informers
        .index(&POD, "by-name", |pod| vec![ObjectKey::of(pod)])
        .expect("an index on it");
    informers.store(&VOLUME).expect("a store");
    assert_eq!(informers.kinds(), ["pod", "persistentvolume"]);
    assert!(matches!(
        informers.provide(&POD, mem),
        Err(WiringError::StoreProvidedTwice("pod"))
    ));
    let provided: Arc<dyn Store<PersistentVolume>> = Arc::new(MemStore::default());
    informers
        .provide(&VOLUME, Arc::clone(&provided))
        .expect("the first store brought for the kind");
    assert!(informers.provide(&VOLUME, provided).is_err());
    assert!(informers.mem_store(&VOLUME).is_err());
    assert!(first.store().is_none(), "fixed only when the watches start");
    assert!(std::ptr::eq(first.shape(), &POD));
}

#[test]
fn a_kind_asked_for_with_another_shape_is_refused() {
    let mut informers = Informers::default();
    informers.store(&VOLUME).expect("a store");
    assert!(matches!(
        informers.store(&OTHER_VOLUME),
        Err(WiringError::ShapedTwice("persistentvolume"))
    ));
    assert!(informers.on(&OTHER_VOLUME, |_| {}).is_err());
    informers.on(&VOLUME, |_| {}).expect("the same shape");
}

/// A list request replaces the watch's stream mid-list: the list under way
/// is abandoned, and only the new stream's complete list answers the
/// request, with the object it vanished from gone from the store.
#[tokio::test(start_paused = true)]
async fn a_list_request_lists_again_and_only_the_new_list_answers_it() {
    let (mut informer, store, seen) = informer();
    let synced = informer.synced.clone();
    let (requests, requested) = tokio::sync::watch::channel(FIRST_LIST);
    let lists = [
        vec![
            Event::Init,
            Event::InitApply(pod("a", "1")),
            Event::InitDone,
        ],
        // Abandoned before its end by the request below.
        vec![Event::Init, Event::InitApply(pod("b", "2"))],
        vec![
            Event::Init,
            Event::InitApply(pod("b", "2")),
            Event::InitDone,
        ],
    ];
    let mut streams = lists.into_iter().map(|events| {
        futures::stream::iter(
            events
                .into_iter()
                .map(Ok::<_, kube::runtime::watcher::Error>),
        )
        .chain(futures::stream::pending())
    });
    let pump = tokio::spawn(watch::pump(
        "pod",
        move || futures::stream::iter(streams.next()).flatten().boxed(),
        requested,
        Duration::from_secs(60),
        move |request, event| {
            informer.request = request;
            informer.on_event(event);
        },
    ));
    tokio::time::timeout(Duration::from_secs(5), synced.wait_for(FIRST_LIST))
        .await
        .expect("the first list answers request 1");
    assert_eq!(store.keys(), [ObjectKey::new("ns", "a")]);

    requests.send_replace(2);
    tokio::time::sleep(Duration::from_millis(1)).await;
    assert!(!synced.listed(2), "the abandoned list answers nothing");
    requests.send_replace(3);
    tokio::time::timeout(Duration::from_secs(5), synced.wait_for(3))
        .await
        .expect("the list made for request 3 answers it");
    assert_eq!(store.keys(), [ObjectKey::new("ns", "b")]);
    assert_eq!(
        take(&seen),
        [
            "applied ns/a listing=true",
            "listed",
            "applied ns/b listing=true",
            "applied ns/b listing=true",
            "deleted ns/a last=true",
            "listed"
        ]
    );
    pump.abort();
}

/// A subscriber to a kind's field managers is told who wrote each watched
/// version, before the store takes it in: the store still holds the
/// version before. Kinds nobody asks this of are decoded without them.
#[tokio::test]
async fn field_managers_are_told_before_the_store_takes_the_version_in() {
    use tower::ServiceExt;

    let api = memapi::MemApi::new();
    let mut volume = PersistentVolume::default();
    volume.metadata.name = Some("pv-1".into());
    api.create(&volume).expect("seed");
    let mut informers = Informers::default();
    let store = informers.mem_store(&VOLUME).expect("store");
    let seen = Arc::new(Mutex::new(Vec::new()));
    let recorded = Arc::clone(&seen);
    let held = Arc::clone(&store);
    informers
        .on_managers(&VOLUME, move |managed: &Managed<'_, PersistentVolume>| {
            let phase = |v: &PersistentVolume| {
                v.status
                    .as_ref()
                    .and_then(|s| s.phase.clone())
                    .unwrap_or_default()
            };
            let before = held
                .get(&ObjectKey::of(managed.object))
                .map(|v| phase(&v))
                .unwrap_or_default();
            let writers: Vec<String> = managed
                .managers
                .iter()
                .filter(|m| m.owns("status.phase"))
                .map(|m| m.manager.clone())
                .collect();
            recorded.lock().expect("seen").push(format!(
                "{before}->{} by {writers:?} listing={}",
                phase(managed.object),
                managed.listing
            ));
        })
        .expect("subscribe");
    let mut watches = informers.start(
        &api.client(),
        super::WatchSettings {
            failure_limit: std::time::Duration::from_secs(60),
            list_page_size: super::LIST_PAGE_SIZE,
        },
    );
    Watches::wait(&watches.synced).await;
    let request = http::Request::patch("/api/v1/persistentvolumes/pv-1/status")
        .header("content-type", "application/merge-patch+json")
        .header("user-agent", "kube-controller-manager/v1.20.2")
        .body(kube::client::Body::from(
            br#"{"status":{"phase":"Bound"}}"#.to_vec(),
        ))
        .expect("request");
    let answer = api.service().oneshot(request).await.expect("answer");
    assert_eq!(answer.status(), 200);
    for _ in 0..200 {
        if seen.lock().expect("seen").len() == 2 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert_eq!(
        *seen.lock().expect("seen"),
        [
            "->Pending by [] listing=true",
            "Pending->Bound by [\"kube-controller-manager\"] listing=false"
        ]
    );
    watches.stop().await;
}
