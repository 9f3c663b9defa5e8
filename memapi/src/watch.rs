//! The watch response: a streaming body of newline-delimited JSON events.
//!
//! Events come from the watcher's channel (filled under the store lock, so
//! catch-up and live events neither gap nor repeat). The stream also sends
//! periodic BOOKMARKs when asked, ends after `timeoutSeconds`, ends after
//! an in-stream ERROR (such as 410 Expired) or when the server ends it
//! ([`MemApi::end_watches`](super::MemApi::end_watches)), and fails with
//! [`StreamCut`] when its connection is cut. A resource's events can be made late
//! ([`MemApi::lag_watches`](super::MemApi::lag_watches)), each by the lag
//! set when it reached the stream, in order. All timers are tokio timers,
//! so paused-time tests work.

use super::body::{ResponseBody, StreamCut};
use super::resources::ResourceKind;
use super::store::{ChangeType, Store, WatchItem};
use super::table;
use bytes::Bytes;
use futures::StreamExt;
use http_body::Frame;
use http_body_util::{BodyExt, StreamBody};
use serde_json::json;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::time::{Instant, Interval};

/// How often a watch that asked for bookmarks gets one.
pub(crate) const BOOKMARK_PERIOD: Duration = Duration::from_secs(5);

/// How one watch stream renders and paces its events.
#[derive(Debug, Clone, Copy)]
pub(crate) struct WatchOptions {
    /// The watched resource.
    pub kind: &'static ResourceKind,
    /// When the stream ends (`timeoutSeconds`).
    pub timeout: Duration,
    /// Whether to send periodic bookmarks.
    pub bookmarks: bool,
    /// Whether objects are rendered as kubectl Tables.
    pub as_table: bool,
}

struct WatchState {
    store: Arc<Mutex<Store>>,
    rx: mpsc::UnboundedReceiver<WatchItem>,
    /// Whether `rx` may still bring items.
    rx_open: bool,
    /// Items to send, each with the time it is due (its kind's lag after
    /// it reached this stream), in order.
    pending: VecDeque<(Instant, WatchItem)>,
    deadline: Instant,
    bookmarks: Option<Interval>,
    opts: WatchOptions,
    done: bool,
}

/// One event as a JSON line; `None` for the item that cuts the stream.
fn render(opts: &WatchOptions, item: &WatchItem) -> Option<Bytes> {
    let event = match item {
        WatchItem::Event(ty, obj) => {
            let ty = match ty {
                ChangeType::Added => "ADDED",
                ChangeType::Modified => "MODIFIED",
                ChangeType::Deleted => "DELETED",
            };
            let object = if opts.as_table {
                table::table(opts.kind, &[obj.as_ref()], None, false)
            } else {
                obj.as_ref().clone()
            };
            json!({ "type": ty, "object": object })
        }
        WatchItem::Bookmark(rv, initial_end) => {
            let mut metadata = json!({ "resourceVersion": rv.to_string() });
            if *initial_end {
                metadata["annotations"] = json!({ "k8s.io/initial-events-end": "true" });
            }
            json!({
                "type": "BOOKMARK",
                "object": {
                    "kind": opts.kind.kind,
                    "apiVersion": opts.kind.api_version(),
                    "metadata": metadata,
                }
            })
        }
        WatchItem::Error(err) => json!({ "type": "ERROR", "object": err.to_status() }),
        WatchItem::Cut | WatchItem::End => return None,
    };
    let mut line = serde_json::to_vec(&event).unwrap_or_default();
    line.push(b'\n');
    Some(Bytes::from(line))
}

impl WatchState {
    /// The next line to send, `None` when the stream is over, or the cut
    /// that ends it with an error.
    async fn next_line(&mut self) -> Option<Result<Bytes, StreamCut>> {
        loop {
            let due = self.pending.front().map(|(due, _)| *due);
            if due.is_some_and(|due| due <= Instant::now())
                && let Some((_, item)) = self.pending.pop_front()
            {
                if matches!(item, WatchItem::End) {
                    return None;
                }
                if matches!(item, WatchItem::Error(_) | WatchItem::Cut) {
                    self.done = true;
                }
                return Some(render(&self.opts, &item).ok_or(StreamCut));
            }
            if self.done || (!self.rx_open && due.is_none()) {
                return None;
            }
            let tick = async {
                match self.bookmarks.as_mut() {
                    Some(i) => {
                        i.tick().await;
                    }
                    None => std::future::pending::<()>().await,
                }
            };
            let next_due = async {
                match due {
                    Some(due) => tokio::time::sleep_until(due).await,
                    None => std::future::pending::<()>().await,
                }
            };
            tokio::select! {
                biased;
                item = self.rx.recv(), if self.rx_open => match item {
                    Some(item) => self.receive(item),
                    None => self.rx_open = false,
                },
                () = tokio::time::sleep_until(self.deadline) => return None,
                () = next_due => {}
                () = tick => self.queue_bookmark(),
            }
        }
    }

    /// Takes an item from the channel: due after the kind's lag, or, for
    /// a cut or an end, at once and in place of everything not yet sent.
    fn receive(&mut self, item: WatchItem) {
        let now = Instant::now();
        if matches!(item, WatchItem::Cut | WatchItem::End) {
            self.pending.clear();
            self.pending.push_back((now, item));
            return;
        }
        let lag = self
            .store
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .lag(self.opts.kind);
        self.pending.push_back((now + lag, item));
    }

    /// Queues a bookmark at the current version after every event up to it:
    /// those are already in the channel, as writes notify under the lock.
    fn queue_bookmark(&mut self) {
        let store = self
            .store
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let rv = store.rv();
        let lag = store.lag(self.opts.kind);
        let mut items = Vec::new();
        while let Ok(item) = self.rx.try_recv() {
            items.push(item);
        }
        drop(store);
        for item in items {
            self.receive(item);
        }
        let due = Instant::now() + lag;
        // Never before the events it follows.
        let due = self.pending.back().map_or(due, |(last, _)| due.max(*last));
        self.pending
            .push_back((due, WatchItem::Bookmark(rv, false)));
    }
}

/// The streaming body for a registered watcher.
pub(crate) fn stream_body(
    store: Arc<Mutex<Store>>,
    rx: mpsc::UnboundedReceiver<WatchItem>,
    initial: Vec<WatchItem>,
    opts: WatchOptions,
) -> ResponseBody {
    let now = Instant::now();
    let state = WatchState {
        store,
        rx,
        rx_open: true,
        pending: initial.into_iter().map(|item| (now, item)).collect(),
        deadline: now + opts.timeout,
        bookmarks: opts
            .bookmarks
            .then(|| tokio::time::interval_at(now + BOOKMARK_PERIOD, BOOKMARK_PERIOD)),
        opts,
        done: false,
    };
    let stream = futures::stream::unfold(state, |mut st| async move {
        st.next_line().await.map(|line| (line, st))
    })
    .map(|line| line.map(Frame::data));
    StreamBody::new(stream).boxed_unsync()
}
