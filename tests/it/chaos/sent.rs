//! What each replica's clients sent, as the server got it: a recording
//! layer under each client's own layers (below its rate limit), so a run
//! can check that a client the server told to wait (429 with
//! `Retry-After`) sent nothing until the wait was over
//! (`retry-after-ignored`). The lease's client is exempt: its retry period
//! paces it, by design.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use http::header::RETRY_AFTER;
use http::{Request, Response, StatusCode};
use memapi::MemApi;
use tokio::time::Instant;
use tower::Service;

use super::steps::Violation;

/// The client of a replica whose requests need not wait for a 429's
/// `Retry-After`.
pub(crate) const LEASE: &str = "lease";

/// One request a client sent.
#[derive(Debug, Clone)]
struct Sent {
    /// `replica-3 controller`.
    client: Arc<str>,
    at: Instant,
    /// The server's resourceVersion when it was sent.
    version: u64,
    /// `PATCH /api/v1/persistentvolumes/v3`.
    what: String,
    /// For a 429: when it was answered, and the wait it asked for.
    wait: Option<(Instant, Duration)>,
}

/// The requests of every recorded client of a run. Cheap to clone.
#[derive(Clone)]
pub(crate) struct SentLog {
    started: Instant,
    sent: Arc<Mutex<Vec<Sent>>>,
}

impl SentLog {
    pub(crate) fn new() -> Self {
        Self {
            started: Instant::now(),
            sent: Arc::default(),
        }
    }

    fn push(&self, sent: Sent) -> usize {
        let mut log = self.sent.lock().unwrap_or_else(PoisonError::into_inner);
        log.push(sent);
        log.len() - 1
    }

    fn told_to_wait(&self, at: usize, wait: Duration) {
        let mut log = self.sent.lock().unwrap_or_else(PoisonError::into_inner);
        log[at].wait = Some((Instant::now(), wait));
    }

    /// `retry-after-ignored`: each request a client (but the lease's)
    /// sent after a 429 told it to wait and before the wait was over (the
    /// first such request after each 429).
    pub(crate) fn ignored_waits(&self) -> Vec<Violation> {
        let log = self.sent.lock().unwrap_or_else(PoisonError::into_inner);
        let mut found = Vec::new();
        for told in log.iter().filter(|s| !s.client.ends_with(LEASE)) {
            let Some((answered, wait)) = told.wait else {
                continue;
            };
            let early = log
                .iter()
                .find(|s| s.client == told.client && s.at > answered && s.at < answered + wait);
            if let Some(early) = early {
                found.push(Violation {
                    invariant: "retry-after-ignored",
                    object: format!("client {}", told.client),
                    version: early.version,
                    step: format!(
                        "{} at {:.2?} into the run",
                        early.what,
                        early.at - self.started
                    ),
                    detail: format!(
                        "sent {:.2?} after a 429 to {} asked it to wait {wait:?}",
                        early.at - answered,
                        told.what
                    ),
                });
            }
        }
        found
    }
}

/// memapi's service for one client of a replica, recording what the
/// client sends and which answers told it to wait.
#[derive(Clone)]
pub(crate) struct Recorded<S> {
    inner: S,
    log: SentLog,
    client: Arc<str>,
    api: MemApi,
}

impl<S> Recorded<S> {
    /// Records what `client` sends through `inner` (the service of `api`).
    pub(crate) fn new(inner: S, log: &SentLog, client: String, api: &MemApi) -> Self {
        Self {
            inner,
            log: log.clone(),
            client: client.into(),
            api: api.clone(),
        }
    }
}

/// The wait a 429 asks for: its `Retry-After` in seconds, one second
/// without one (as the controller's client reads it).
fn wait_asked<B>(response: &Response<B>) -> Option<Duration> {
    if response.status() != StatusCode::TOO_MANY_REQUESTS {
        return None;
    }
    let seconds = response
        .headers()
        .get(RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .unwrap_or(1);
    Some(Duration::from_secs(seconds))
}

impl<S, B, A> Service<Request<B>> for Recorded<S>
where
    S: Service<Request<B>, Response = Response<A>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Response<A>, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let at = self.log.push(Sent {
            client: Arc::clone(&self.client),
            at: Instant::now(),
            version: self.api.resource_version(),
            what: format!("{} {}", request.method(), request.uri().path()),
            wait: None,
        });
        let log = self.log.clone();
        let answer = self.inner.call(request);
        Box::pin(async move {
            let answer = answer.await;
            if let Ok(response) = &answer
                && let Some(wait) = wait_asked(response)
            {
                log.told_to_wait(at, wait);
            }
            answer
        })
    }
}
