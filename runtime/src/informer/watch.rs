//! Watching a kind: a watcher with backoff, the pump that drives it while
//! supervising it, and the kind's informer, which puts each event into the
//! kind's store and tells the handlers.
//!
//! A watch that fails is retried with backoff; one that keeps failing for
//! the configured time ends its pump with an error, which stops the process
//! (so Kubernetes restarts it) instead of leaving a healthy-looking
//! controller that sees nothing.

use crate::api_message::WatchMessage;
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use futures::stream::BoxStream;
use futures::{Stream, StreamExt, TryStreamExt};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event, watcher};
use kube::{Api, Client};
use tokio::time::Instant;

use super::{Change, Handler, Incarnations, Store, Synced};
use crate::keys::ObjectKey;
use crate::kinds::{Kind, Shape};
use crate::lean::{Lean, WithManagers};
use crate::managers::{FieldManager, Managed, ManagersHandler};
use crate::version;

/// Why a watch stopped.
#[derive(Debug, thiserror::Error)]
pub enum WatchFailure {
    /// The watch failed again and again, without one success, for `limit`.
    #[error("the {kind} watch has been failing for {limit:?}: {last_error}")]
    Failing {
        /// The watched kind.
        kind: &'static str,
        /// How long it failed.
        limit: Duration,
        /// The last failure.
        last_error: String,
    },
    /// The watch stream ended, which it never should.
    #[error("the {0} watch stopped unexpectedly")]
    Ended(&'static str),
    /// The task driving a watch panicked or was cancelled.
    #[error("a watch task stopped: {0}")]
    TaskFailed(String),
}

/// Objects per page of a list by default, as client-go lists. The next
/// page is asked for once the last one is in the store, so every page is
/// a round trip: 20,000 volumes and 20,000 claims on kube-apiserver 1.20
/// list in 1.0 s in pages of 500 against 1.8 s in pages of 100. A page is
/// decoded whole before it is trimmed, which at 500 objects of a storm is
/// a few MiB.
pub const LIST_PAGE_SIZE: u32 = 500;

/// A watcher of every `K` with the watch backoff (`backoff.rs`), so a broken watch is
/// retried; its lists come in pages of `page_size` objects (a page whose
/// continue token expired, 410, starts the list again), and its objects
/// are decoded without their managedFields ([`Lean`]) and trimmed by the
/// kind's `shape`, as the store keeps them. With `managers` to tell, each
/// object's field managers are decoded too ([`WithManagers`]) and handed
/// to them before the trim.
pub(super) fn watch<K: Kind>(
    client: &Client,
    shape: &'static Shape<K>,
    managers: &Arc<[ManagersHandler<K>]>,
    page_size: u32,
) -> BoxStream<'static, Result<Event<K>, watcher::Error>> {
    let config = watcher::Config::default().page_size(page_size);
    if managers.is_empty() {
        return watcher(Api::<Lean<K>>::all(client.clone()), config)
            .backoff(super::watch_backoff())
            .map_ok(|event| match event {
                Event::Apply(Lean(object)) => Event::Apply(object),
                Event::Delete(Lean(object)) => Event::Delete(object),
                Event::Init => Event::Init,
                Event::InitApply(Lean(object)) => Event::InitApply(object),
                Event::InitDone => Event::InitDone,
            })
            .modify(move |object| shape.trim(object))
            .boxed();
    }
    let managers = Arc::clone(managers);
    let tell = move |object: &K, written: &[FieldManager], listing: bool| {
        let managed = Managed {
            object,
            managers: written,
            listing,
        };
        for handler in managers.iter() {
            handler(&managed);
        }
    };
    watcher(Api::<WithManagers<K>>::all(client.clone()), config)
        .backoff(super::watch_backoff())
        .map_ok(move |event| match event {
            Event::Apply(WithManagers(object, written)) => {
                tell(&object, &written, false);
                Event::Apply(object)
            }
            Event::Delete(WithManagers(object, _)) => Event::Delete(object),
            Event::Init => Event::Init,
            Event::InitApply(WithManagers(object, written)) => {
                tell(&object, &written, true);
                Event::InitApply(object)
            }
            Event::InitDone => Event::InitDone,
        })
        .modify(move |object| shape.trim(object))
        .boxed()
}

/// Drives the watch streams `streams` makes of `kind`, handing each event,
/// with the number of the list request its stream answers, to `on_event`.
/// A new request on `requested` replaces the stream with a fresh one, which
/// lists the kind from the server before it watches again. Fails when the
/// watch has failed without a single success (a complete list, or a
/// change) for `failure_limit`, or when the stream ends. The start of a
/// relist is no success: the watcher announces one before every attempt,
/// failing or not.
pub(super) async fn pump<K, S, M, F>(
    kind: &'static str,
    mut streams: M,
    mut requested: tokio::sync::watch::Receiver<u64>,
    failure_limit: Duration,
    mut on_event: F,
) -> Result<(), WatchFailure>
where
    M: FnMut() -> S,
    S: Stream<Item = Result<Event<K>, watcher::Error>>,
    F: FnMut(u64, Event<K>),
{
    let mut request = *requested.borrow_and_update();
    let mut stream = Box::pin(streams());
    let mut requests_open = true;
    let mut failing_since: Option<Instant> = None;
    loop {
        tokio::select! {
            biased;
            changed = requested.changed(), if requests_open => match changed {
                Ok(()) => {
                    request = *requested.borrow_and_update();
                    tracing::debug!(kind, request, "listing again on request");
                    stream = Box::pin(streams());
                }
                Err(_) => requests_open = false,
            },
            item = stream.next() => match item {
                None => return Err(WatchFailure::Ended(kind)),
                Some(Ok(event)) => {
                    if matches!(event, Event::InitDone | Event::Apply(_) | Event::Delete(_)) {
                        failing_since = None;
                    }
                    on_event(request, event);
                }
                Some(Err(error)) => {
                    let since = *failing_since.get_or_insert_with(Instant::now);
                    tracing::warn!(kind, error = %WatchMessage(&error), "watch failed, retrying");
                    if since.elapsed() >= failure_limit {
                        return Err(WatchFailure::Failing {
                            kind,
                            limit: failure_limit,
                            last_error: WatchMessage(&error).to_string(),
                        });
                    }
                }
            },
        }
    }
}

/// A running informer: the kind's store, its handlers, the keys a list
/// under way has shown so far, the newest resourceVersion its watch and
/// lists have shown, what it knows of the kind's incarnations, and the
/// list request its watch answers.
pub(super) struct Informer<K> {
    pub(super) store: Arc<dyn Store<K>>,
    pub(super) handlers: Vec<Handler<K>>,
    pub(super) listing: Option<HashSet<ObjectKey>>,
    pub(super) newest_shown: Option<u64>,
    pub(super) incarnations: Incarnations,
    pub(super) request: u64,
    pub(super) synced: Synced,
}

impl<K: Kind> Informer<K> {
    /// Whether the store's copy of `key`, which a list did not show, is
    /// one this process created after the list's snapshot was taken (a
    /// continued list is served from its first page's snapshot, and a page
    /// may be answered late): an incarnation it created that the watch has
    /// not shown, newer than every version the kind's watch and lists have
    /// shown. Its absence from the list does not mean it is gone; the watch
    /// that follows the list brings it. Any version shown at or past it
    /// proves the snapshot newer, and the object gone; an incarnation the
    /// watch has shown was there for the snapshot to show. One created and
    /// deleted while the watch was down, with nothing newer listed, is kept
    /// until a write to it finds it gone or the next list.
    fn written_after_the_listing(&self, key: &ObjectKey) -> bool {
        let Some(held) = self.store.get(key) else {
            return false;
        };
        let meta = held.meta();
        if !meta
            .uid
            .as_deref()
            .is_some_and(|uid| self.incarnations.is_unseen(uid))
        {
            return false;
        }
        match (
            version::number(meta.resource_version.as_deref()),
            self.newest_shown,
        ) {
            (Some(held), Some(shown)) => held > shown,
            (Some(_), None) => true,
            (None, _) => false,
        }
    }

    /// Records the incarnation of `last`, an object the watch or a relist
    /// shows gone, as deleted.
    fn record_deletion(&self, last: Option<&K>) {
        if let Some(uid) = last.and_then(|last| last.meta().uid.as_deref()) {
            self.incarnations.deleted(uid);
        }
    }

    fn tell(&self, change: &Change<'_, K>) {
        for handler in &self.handlers {
            handler(change);
        }
    }

    /// Puts `event` into the kind's store and tells every handler;
    /// the end of a list also tells what the list no longer showed as
    /// deleted, and says how far the kind has listed.
    pub(super) fn on_event(&mut self, event: Event<K>) {
        if let Event::Apply(object) | Event::Delete(object) | Event::InitApply(object) = &event {
            let shown = version::number(object.meta().resource_version.as_deref());
            self.newest_shown = self.newest_shown.max(shown);
            if let Some(uid) = object.meta().uid.as_deref() {
                self.incarnations.shown(uid);
            }
        }
        match event {
            Event::Apply(object) => {
                let object = Arc::new(object);
                self.store.watched(&object);
                self.tell(&Change::Applied {
                    object: &object,
                    listing: false,
                });
            }
            Event::Delete(object) => {
                let key = ObjectKey::of(&object);
                self.record_deletion(Some(&object));
                self.store.forget(&key);
                self.tell(&Change::Deleted {
                    key: &key,
                    last: Some(&Arc::new(object)),
                });
            }
            Event::Init => self.listing = Some(HashSet::new()),
            Event::InitApply(object) => {
                let object = Arc::new(object);
                self.listing
                    .get_or_insert_default()
                    .insert(ObjectKey::of(object.as_ref()));
                self.store.watched(&object);
                self.tell(&Change::Applied {
                    object: &object,
                    listing: true,
                });
            }
            Event::InitDone => {
                let listed = self.listing.take().unwrap_or_default();
                for key in self.store.keys() {
                    if !listed.contains(&key) {
                        if self.written_after_the_listing(&key) {
                            tracing::debug!(kind = K::NAME, object = %key, "not listed, but written after the list's snapshot: kept");
                            continue;
                        }
                        let last = self.store.forget(&key);
                        self.record_deletion(last.as_deref());
                        tracing::debug!(kind = K::NAME, object = %key, "gone during a relist");
                        self.tell(&Change::Deleted {
                            key: &key,
                            last: last.as_ref(),
                        });
                    }
                }
                self.tell(&Change::Listed);
                self.synced.set(self.request);
            }
        }
    }
}
