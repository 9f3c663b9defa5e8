//! The recorder's sender task: it takes queued events one at a time, in the
//! order they were recorded, correlates them and writes them, retrying while
//! the API server cannot be reached (client-go's `recordToSink`). Each event
//! ends in exactly one [`EventOutcome`], counted and, when the event is
//! lost, logged with the object, reason and message.

use crate::ambient::random_fraction_of;
use crate::api_message::ApiMessage;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Event;
use kube::api::{Patch, PatchParams, PostParams};
use kube::core::Status;
use kube::{Api, Client};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use super::Stamps;
use super::correlate::{Correlated, Correlator, Write};
use crate::metrics::{EventOutcome, Metrics};

/// Tries per event before giving up (client-go's `maxTriesPerEvent`).
pub(super) const MAX_TRIES_PER_EVENT: u32 = 12;

/// Pause between two tries; the first pause is random up to this long, so
/// that clients do not all come back at once after an outage (client-go's
/// `defaultSleepDuration`).
pub(super) const RETRY_INTERVAL: Duration = Duration::from_secs(10);

/// Status cause of a create refused because its namespace is being deleted.
const NAMESPACE_TERMINATING_CAUSE: &str = "NamespaceTerminating";

/// What the queue carries.
#[derive(Debug)]
pub(super) enum Queued {
    /// An event to correlate and write.
    Event(Box<Event>),
    /// A flush: answered once everything queued before it is done.
    Flush(oneshot::Sender<()>),
}

/// The state of the sender task.
pub(super) struct Sink {
    pub(super) client: Client,
    pub(super) metrics: Arc<Metrics>,
    pub(super) stamps: Arc<Stamps>,
    pub(super) correlator: Correlator,
}

/// Why one try failed.
enum Failure {
    /// The API server answered with an error Status: retrying would get the
    /// same answer.
    Rejected(Box<Status>),
    /// The request could not be built: it would be built the same way again.
    Unsendable(kube::Error),
    /// The API server could not be reached, or its answer not read.
    Transport(kube::Error),
}

impl From<kube::Error> for Failure {
    fn from(error: kube::Error) -> Self {
        match error {
            kube::Error::Api(status) => Self::Rejected(status),
            error @ (kube::Error::BuildRequest(_) | kube::Error::HttpError(_)) => {
                Self::Unsendable(error)
            }
            error => Self::Transport(error),
        }
    }
}

/// How a successful try stored the event.
enum Stored {
    Created,
    Patched,
}

/// Runs until every [`EventRecorder`](super::EventRecorder) handle is gone
/// and the queue is empty.
pub(super) async fn run(mut sink: Sink, mut queue: mpsc::Receiver<Queued>) {
    while let Some(queued) = queue.recv().await {
        match queued {
            Queued::Event(event) => {
                let outcome = sink.deliver(*event).await;
                sink.metrics.event(outcome);
            }
            Queued::Flush(done) => {
                // The flusher may have stopped waiting; nothing to tell then.
                let _ = done.send(());
            }
        }
    }
}

impl Sink {
    /// Correlates and writes one event; returns what became of it.
    async fn deliver(&mut self, event: Event) -> EventOutcome {
        let correlated = self
            .correlator
            .correlate(event, Instant::now(), self.stamps.next());
        match correlated {
            Correlated::SpamFiltered(event) => {
                tracing::debug!(
                    kind = object_kind(&event),
                    object = %object_name(&event),
                    reason = event.reason.as_deref().unwrap_or_default(),
                    message = event.message.as_deref().unwrap_or_default(),
                    "too many events about this object, dropped event"
                );
                EventOutcome::SpamFiltered
            }
            Correlated::Write { write, aggregated } => {
                match self.write_with_retries(&write).await {
                    Ok(_) if aggregated => EventOutcome::Aggregated,
                    Ok(Stored::Created) => EventOutcome::Created,
                    Ok(Stored::Patched) => EventOutcome::Patched,
                    Err(lost) => lost,
                }
            }
        }
    }

    /// Writes until it is stored, refused ([`EventOutcome::Rejected`]), or
    /// could not be sent ([`EventOutcome::Failed`]: not buildable, or
    /// [`MAX_TRIES_PER_EVENT`] tries could not reach the server). A lost
    /// event is logged here with its object, reason and message.
    async fn write_with_retries(&self, write: &Write) -> Result<Stored, EventOutcome> {
        let event = write.event();
        let mut tries = 0;
        loop {
            let error = match self.try_write(write).await {
                Ok(stored) => return Ok(stored),
                Err(Failure::Rejected(status)) => {
                    log_rejected(event, &status);
                    return Err(EventOutcome::Rejected);
                }
                Err(Failure::Unsendable(error)) => {
                    tracing::error!(
                        kind = object_kind(event),
                        object = %object_name(event),
                        reason = event.reason.as_deref().unwrap_or_default(),
                        message = event.message.as_deref().unwrap_or_default(),
                        error = %ApiMessage(&error),
                        "cannot build the request for event (will not retry)"
                    );
                    return Err(EventOutcome::Failed);
                }
                Err(Failure::Transport(error)) => error,
            };
            tries += 1;
            if tries >= MAX_TRIES_PER_EVENT {
                tracing::error!(
                    kind = object_kind(event),
                    object = %object_name(event),
                    reason = event.reason.as_deref().unwrap_or_default(),
                    message = event.message.as_deref().unwrap_or_default(),
                    tries,
                    error = %ApiMessage(&error),
                    "unable to write event (retry limit exceeded)"
                );
                return Err(EventOutcome::Failed);
            }
            let pause = if tries == 1 {
                random_fraction_of(RETRY_INTERVAL)
            } else {
                RETRY_INTERVAL
            };
            tracing::warn!(
                kind = object_kind(event),
                object = %object_name(event),
                reason = event.reason.as_deref().unwrap_or_default(),
                tries,
                retry_in = ?pause,
                error = %ApiMessage(&error),
                "unable to write event (may retry after sleeping)"
            );
            tokio::time::sleep(pause).await;
        }
    }

    /// One try: a create, or a patch that turns into a create when the
    /// event is gone (expired or deleted since).
    async fn try_write(&self, write: &Write) -> Result<Stored, Failure> {
        match write {
            Write::Create(event) => self.create(event).await,
            Write::Patch { event, patch } => {
                let namespace = event.metadata.namespace.as_deref().unwrap_or_default();
                let name = event.metadata.name.as_deref().unwrap_or_default();
                let events: Api<Event> = Api::namespaced(self.client.clone(), namespace);
                match events
                    .patch(name, &PatchParams::default(), &Patch::Strategic(patch))
                    .await
                {
                    Ok(_) => Ok(Stored::Patched),
                    Err(kube::Error::Api(status)) if status.is_not_found() => {
                        tracing::debug!(
                            event = name,
                            namespace,
                            reason = event.reason.as_deref().unwrap_or_default(),
                            "event to update is gone; creating it again"
                        );
                        self.create(event).await
                    }
                    Err(error) => Err(error.into()),
                }
            }
        }
    }

    async fn create(&self, event: &Event) -> Result<Stored, Failure> {
        let namespace = event.metadata.namespace.as_deref().unwrap_or_default();
        let events: Api<Event> = Api::namespaced(self.client.clone(), namespace);
        events.create(&PostParams::default(), event).await?;
        Ok(Stored::Created)
    }
}

/// Logs an event the API server refused. AlreadyExists and a terminating
/// namespace are expected now and then (client-go logs them quietly too);
/// anything else means the events are malformed or the RBAC rules wrong.
fn log_rejected(event: &Event, status: &Status) {
    let expected = status.is_already_exists()
        || status.details.as_ref().is_some_and(|details| {
            details
                .causes
                .iter()
                .any(|cause| cause.reason == NAMESPACE_TERMINATING_CAUSE)
        });
    let kind = object_kind(event);
    let object = object_name(event);
    let reason = event.reason.as_deref().unwrap_or_default();
    let message = event.message.as_deref().unwrap_or_default();
    if expected {
        tracing::debug!(
            kind, object = %object, reason, message,
            code = status.code, server_message = %status.message,
            "server rejected event (will not retry)"
        );
    } else {
        tracing::warn!(
            kind, object = %object, reason, message,
            code = status.code, server_message = %status.message,
            "server rejected event (will not retry)"
        );
    }
}

/// The kind of the object an event is about, for logs.
fn object_kind(event: &Event) -> &str {
    event.involved_object.kind.as_deref().unwrap_or_default()
}

/// `namespace/name` (or `name` for a cluster-scoped object) of the object an
/// event is about, for logs.
fn object_name(event: &Event) -> String {
    let object = &event.involved_object;
    let name = object.name.as_deref().unwrap_or_default();
    match object.namespace.as_deref() {
        Some(namespace) if !namespace.is_empty() => format!("{namespace}/{name}"),
        _ => name.to_string(),
    }
}

#[cfg(test)]
mod tests;
