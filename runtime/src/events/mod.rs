//! Kubernetes events about the controllers' objects, recorded the way
//! kube-controller-manager's controllers record them (client-go's
//! `tools/record`): core/v1 Events from the recording controller's
//! component as source, queued and written by a background task, with
//! repeats folded into one object.
//!
//! Why core/v1 and not events.k8s.io/v1: an events.k8s.io event carries an
//! `eventTime`, and for such an event about a cluster-scoped object the API
//! server wants the namespace `kube-system` and answers 422 for any other.
//! A core/v1 event without `eventTime` about a cluster-scoped object lives
//! in `default`, where `kubectl describe` finds it, as upstream's do.
//!
//! How an event travels:
//!
//! 1. [`EventRecorder::record`] builds the event object
//!    (`object.rs`: named `<object>.<unix nanoseconds in hex>`, count 1,
//!    first and last timestamps now) and puts it on a queue of
//!    [`QUEUE_CAPACITY`]. It never waits: a sync does not slow down for an
//!    event. When the queue is full the event is dropped, logged and counted.
//! 2. One sender task (`sink.rs`) takes the events in order and correlates
//!    them (`correlate.rs`): many similar events about one object are
//!    combined, an identical repeat becomes a count-incrementing PATCH of
//!    the earlier object, and a per-object spam filter drops floods.
//! 3. It writes each event, retrying while the API server cannot be reached
//!    (up to 12 tries, 10 s apart); an API server that refuses an event is
//!    not asked again.
//!
//! Every recorded event ends in exactly one outcome of
//! `pv_controller_events_total`, and every lost one is logged: events are
//! never lost silently. [`EventRecorder::flush`] waits for the queue, for
//! tests and for a graceful shutdown.

mod correlate;
mod object;
mod sink;

use std::sync::{Arc, Mutex, PoisonError};

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::{Client, Resource};
use tokio::sync::mpsc::{self, error::TrySendError};
use tokio::sync::oneshot;

use crate::metrics::{EventOutcome, Metrics};
use sink::{Queued, Sink};

/// Events that may wait to be written; one more is dropped (client-go's
/// `maxQueuedEvents`).
pub const QUEUE_CAPACITY: usize = 1000;

/// Whether an event is informational or reports a problem.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EventType {
    /// Something worth knowing happened (`Normal`).
    Normal,
    /// Something went wrong or needs attention (`Warning`).
    Warning,
}

impl EventType {
    /// The type as the API spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Normal => "Normal",
            Self::Warning => "Warning",
        }
    }
}

/// A reference to `object` for an event's `involvedObject`: kind,
/// apiVersion, namespace, name, uid and resourceVersion, so `kubectl
/// describe` finds the event and a reader can tell which incarnation it was
/// about.
pub fn reference_of<K: Resource<DynamicType = ()>>(object: &K) -> ObjectReference {
    let meta = object.meta();
    ObjectReference {
        api_version: Some(K::api_version(&()).into_owned()),
        kind: Some(K::kind(&()).into_owned()),
        namespace: meta.namespace.clone(),
        name: meta.name.clone(),
        uid: meta.uid.clone(),
        resource_version: meta.resource_version.clone(),
        field_path: None,
    }
}

/// Why the recorder could not start: it was built outside a tokio runtime,
/// so it has nowhere to run its sender task.
#[derive(Debug, thiserror::Error)]
#[error("starting the event recorder's sender task: {0}")]
pub struct RecorderError(#[from] tokio::runtime::TryCurrentError);

/// Records events for the controller: [`record`](Self::record) queues, a
/// background task writes. Cloning gives another handle on the same queue,
/// correlation memory and task; the task ends once every handle is dropped
/// and the queue is empty.
#[derive(Clone)]
pub struct EventRecorder {
    queue: mpsc::Sender<Queued>,
    stamps: Arc<Stamps>,
    metrics: Arc<Metrics>,
    component: &'static str,
    reporting_instance: Arc<str>,
    /// Records nothing (a process that must not act writes no event).
    silent: bool,
}

impl std::fmt::Debug for EventRecorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventRecorder")
            .field("component", &self.component)
            .field("reporting_instance", &self.reporting_instance)
            .finish_non_exhaustive()
    }
}

impl EventRecorder {
    /// A recorder writing through `client` and counting outcomes in
    /// `metrics`, reporting as `component` (the controller's name in
    /// `kubectl describe`, as upstream's controller reports it);
    /// `reporting_instance` (this replica's identity, may be empty) goes into
    /// each event's `reportingInstance` so replicas can be told apart. Spawns
    /// the sender task on the current tokio runtime, and fails when there is
    /// none.
    pub fn new(
        client: Client,
        metrics: Arc<Metrics>,
        component: &'static str,
        reporting_instance: impl Into<String>,
    ) -> Result<Self, RecorderError> {
        let runtime = tokio::runtime::Handle::try_current()?;
        let (queue, queued) = mpsc::channel(QUEUE_CAPACITY);
        let stamps = Arc::new(Stamps::default());
        let sink = Sink {
            client,
            metrics: Arc::clone(&metrics),
            stamps: Arc::clone(&stamps),
            correlator: correlate::Correlator::default(),
        };
        runtime.spawn(sink::run(sink, queued));
        Ok(Self {
            queue,
            stamps,
            metrics,
            component,
            reporting_instance: reporting_instance.into().into(),
            silent: false,
        })
    }

    /// The same recorder, recording nothing: a process that must not act
    /// on the cluster writes no event.
    pub fn silenced(self) -> Self {
        Self {
            silent: true,
            ..self
        }
    }

    /// A handle on the same queue, correlation memory and sender task that
    /// reports as `component`: the process's controllers each report under
    /// their own name and share one sender.
    pub fn for_component(&self, component: &'static str) -> Self {
        Self {
            component,
            ..self.clone()
        }
    }

    /// Records that `reason` happened to `regarding`, with `message` for
    /// people to read. Returns at once: the event is queued and written in
    /// the background, so a sync never waits on the API server for an
    /// event. When [`QUEUE_CAPACITY`] events are already waiting, this one is
    /// dropped (logged and counted as `dropped_queue_full`).
    pub fn record(
        &self,
        regarding: &ObjectReference,
        type_: EventType,
        reason: &str,
        message: String,
    ) {
        if self.silent {
            return;
        }
        let event = object::make_event(
            regarding,
            type_,
            reason,
            message,
            self.component,
            &self.reporting_instance,
            self.stamps.next(),
        );
        let error = match self.queue.try_send(Queued::Event(Box::new(event))) {
            Ok(()) => return,
            Err(error) => error,
        };
        let full = matches!(error, TrySendError::Full(_));
        let message = match error.into_inner() {
            Queued::Event(event) => event.message.unwrap_or_default(),
            Queued::Flush(_) => String::new(),
        };
        let kind = regarding.kind.as_deref().unwrap_or_default();
        let namespace = regarding.namespace.as_deref().unwrap_or_default();
        let object = regarding.name.as_deref().unwrap_or_default();
        if full {
            tracing::warn!(
                kind,
                namespace,
                object,
                reason,
                message,
                "too many queued events, dropped event"
            );
            self.metrics.event(EventOutcome::DroppedQueueFull);
        } else {
            tracing::error!(
                kind,
                namespace,
                object,
                reason,
                message,
                "the event sender task has stopped, dropped event"
            );
            self.metrics.event(EventOutcome::Failed);
        }
    }

    /// Resolves when the sender task has stopped (it runs as long as the
    /// process: its end, by a panic, means every later event is lost), so
    /// the process can stop with an error rather than go on recording
    /// into nothing.
    pub async fn sender_stopped(&self) {
        self.queue.closed().await;
    }

    /// Waits until every event recorded before this call has been written,
    /// dropped or given up on. Returns at once if the sender task is gone.
    pub async fn flush(&self) {
        let (done, finished) = oneshot::channel();
        if self.queue.send(Queued::Flush(done)).await.is_err() {
            return;
        }
        // An error means the task is gone: nothing is left to wait for.
        let _ = finished.await;
    }
}

/// Wall-clock stamps for event names and timestamps, each later than the one
/// before, so that two events never get the same name.
#[derive(Debug, Default)]
struct Stamps {
    last: Mutex<Timestamp>,
}

impl Stamps {
    /// Now, or one nanosecond after the last stamp when the clock has not
    /// moved on.
    fn next(&self) -> Timestamp {
        let mut last = self.last.lock().unwrap_or_else(PoisonError::into_inner);
        let now = crate::ambient::now();
        let stamp = if now > *last {
            now
        } else {
            last.checked_add(SignedDuration::from_nanos(1))
                .unwrap_or(now)
        };
        *last = stamp;
        stamp
    }
}

#[cfg(test)]
mod tests;
