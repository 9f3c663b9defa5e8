//! The controller's API clients, and what stands between them and the API
//! server.
//!
//! Three clients, never one: the leader lease is renewed on a client of its
//! own, so no burst of controller traffic (a rate limiter's queue, a slow
//! server) can delay a renewal past the renew deadline and cost the lease;
//! and the admin port's delegated reviews (TokenReview,
//! SubjectAccessReview) go through a third, with its own rate limit,
//! timeout and 429 pause (upstream's delegated authentication client:
//! [`ReviewClientOptions`]), so whoever reaches the admin port with made-up
//! tokens spends that client's budget, never the controllers'.
//!
//! The controller's client passes every request through, outermost first:
//! - the rate limit (`--kube-api-qps`, `--kube-api-burst`), a token bucket
//!   that makes requests wait their turn;
//! - the [`WriteGate`], checked when a request has its turn: a mutating
//!   request (POST, PUT, PATCH, DELETE) is refused unless the gate is open,
//!   and leader election opens it only until the renew deadline after each
//!   renewal, so a replica that is not leader, or stops being leader,
//!   writes nothing, at once;
//! - the count of the server's answers by status code (shared with the
//!   lease's client: [`RequestCounts`]), so a refused request (403, say)
//!   shows on `/metrics` whatever it was;
//! - a timeout on every request but watches (which end on their own
//!   `timeoutSeconds`), so no sync hangs on an answer that never comes.
//!
//! Both clients name the controller in a `User-Agent` header
//! ([`USER_AGENT`]): the API server takes its first word as the field
//! manager of every write, so `kubectl get -o yaml --show-managed-fields`
//! and the audit log say `pv-controller` where they would say `unknown`.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use http::{Method, Request};
use kube::Client;
use kube::client::ClientBuilder;
use tokio::time::Instant;
use tower::filter::FilterLayer;
use tower::util::MapRequestLayer;
use tower::{BoxError, Layer, Service};

use crate::ratelimit::RateLimitLayer;
use crate::requests::RequestCounts;

/// What the clients send as their `User-Agent`: the program and its
/// version, as kube-controller-manager sends its own.
pub const USER_AGENT: &str = concat!("pv-controller/", env!("CARGO_PKG_VERSION"));

/// What the review client sends as its `User-Agent`: the program's, with
/// the client's purpose after it, as client-go's `AddUserAgent` makes it.
pub const REVIEWS_USER_AGENT: &str = concat!(
    "pv-controller/",
    env!("CARGO_PKG_VERSION"),
    "/delegated-auth"
);

/// Sets the `User-Agent` of a request that has none to `agent`.
fn user_agent(
    agent: &'static str,
) -> impl Fn(Request<kube::client::Body>) -> Request<kube::client::Body> + Clone {
    move |mut request| {
        request
            .headers_mut()
            .entry(http::header::USER_AGENT)
            .or_insert(http::HeaderValue::from_static(agent));
        request
    }
}

/// How the controller's client talks to the API server.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ClientOptions {
    /// Requests per second on average; 0 or less means no client-side limit.
    pub qps: f64,
    /// Requests allowed in a burst above the steady rate.
    pub burst: u32,
    /// How long a request other than a watch may take before it fails.
    pub request_timeout: Duration,
    /// The review client's limits.
    pub reviews: ReviewClientOptions,
}

impl Default for ClientOptions {
    fn default() -> Self {
        Self {
            qps: 0.0,
            burst: 0,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            reviews: ReviewClientOptions::default(),
        }
    }
}

/// Default time limit of one request (`--kube-api-timeout`).
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// How the review client (the admin port's TokenReviews and
/// SubjectAccessReviews) talks to the API server; the defaults are those
/// of upstream's delegated authentication and authorization clients.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ReviewClientOptions {
    /// Reviews per second on average.
    pub qps: f64,
    /// Reviews allowed in a burst above the steady rate.
    pub burst: u32,
    /// How long one review may take before it fails.
    pub timeout: Duration,
}

impl Default for ReviewClientOptions {
    fn default() -> Self {
        Self {
            qps: 200.0,
            burst: 400,
            timeout: Duration::from_secs(10),
        }
    }
}

/// The controller's client, the lease's client, the admin port's review
/// client, and the gate that ties the first to the second's success.
#[derive(Clone)]
pub struct Clients {
    /// For everything the controller reads and writes.
    pub controller: Client,
    /// For the leader lease only.
    pub lease: Client,
    /// For the admin port's delegated reviews only.
    pub reviews: Client,
    /// Open while this replica may write.
    pub gate: WriteGate,
    /// The answers to the clients' requests, by status code.
    pub requests: RequestCounts,
}

#[cfg(any(test, feature = "testing"))]
impl Clients {
    /// The three clients as they are, writing through `gate` and counting
    /// nothing: for replicas a test hands one gate it opens and shuts.
    pub fn with_gate(controller: Client, lease: Client, reviews: Client, gate: WriteGate) -> Self {
        Self {
            controller,
            lease,
            reviews,
            gate,
            requests: RequestCounts::default(),
        }
    }
}

impl Clients {
    /// The controller's client from `controller`, the lease's from `lease`
    /// and the review client from `reviews`: three builders of one
    /// transport (a kube `Config`'s, or an in-memory server's), so no two
    /// share a connection or a queue.
    pub fn build<S, B>(
        controller: ClientBuilder<S>,
        lease: ClientBuilder<S>,
        reviews: ClientBuilder<S>,
        options: ClientOptions,
    ) -> Self
    where
        S: Service<Request<kube::client::Body>, Response = http::Response<B>> + Send + 'static,
        S::Future: Send + 'static,
        S::Error: Into<BoxError>,
        B: http_body::Body<Data = bytes::Bytes> + Send + 'static,
        B::Error: Into<BoxError>,
    {
        let gate = WriteGate::default();
        let requests = RequestCounts::default();
        let timeout = TimeoutLayer(options.request_timeout);
        let agent = MapRequestLayer::new(user_agent(USER_AGENT));
        let controller = controller
            .with_layer(&agent)
            .with_layer(&timeout)
            .with_layer(&requests.layer("controller"))
            .with_layer(&gate.layer())
            .with_layer(&RateLimitLayer::new(options.qps, options.burst))
            .build();
        let lease = lease
            .with_layer(&agent)
            .with_layer(&timeout)
            .with_layer(&requests.layer("lease"))
            .build();
        let limits = options.reviews;
        let reviews = reviews
            .with_layer(&MapRequestLayer::new(user_agent(REVIEWS_USER_AGENT)))
            .with_layer(&TimeoutLayer(limits.timeout))
            .with_layer(&requests.layer("reviews"))
            .with_layer(&RateLimitLayer::new(limits.qps, limits.burst))
            .build();
        Self {
            controller,
            lease,
            reviews,
            gate,
            requests,
        }
    }
}

/// Whether this replica may write now. Cheap to clone; clones share state.
/// Starts closed.
#[derive(Clone, Debug, Default)]
pub struct WriteGate {
    state: Arc<Mutex<GateState>>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum GateState {
    #[default]
    Closed,
    OpenUntil(Instant),
    Open,
}

impl WriteGate {
    /// Opens the gate for good (a controller running without election).
    pub fn open(&self) {
        *self.lock() = GateState::Open;
    }

    /// Opens the gate until `deadline` (the renew deadline after the last
    /// renewal of the lease); it closes by itself then.
    pub fn open_until(&self, deadline: Instant) {
        *self.lock() = GateState::OpenUntil(deadline);
    }

    /// Closes the gate: every write is refused from now on.
    pub fn close(&self) {
        *self.lock() = GateState::Closed;
    }

    /// Whether a write may go out now.
    pub fn is_open(&self) -> bool {
        match *self.lock() {
            GateState::Closed => false,
            GateState::OpenUntil(deadline) => Instant::now() < deadline,
            GateState::Open => true,
        }
    }

    /// The layer that refuses writes (see [`is_write`]) while the gate is
    /// closed, with [`ClientError::NotLeader`].
    fn layer<B>(
        &self,
    ) -> FilterLayer<impl Fn(Request<B>) -> Result<Request<B>, ClientError> + Clone + use<B>> {
        let gate = self.clone();
        FilterLayer::new(move |request: Request<B>| {
            if is_write(request.method(), request.uri().path()) && !gate.is_open() {
                let error = ClientError::NotLeader {
                    method: request.method().clone(),
                    path: request.uri().path().to_string(),
                };
                tracing::warn!(%error, "write refused");
                return Err(error);
            }
            Ok(request)
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, GateState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Why a request did not go out.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// A write while this replica is not the leader.
    #[error("{method} {path} refused: this replica does not hold the leader lease")]
    NotLeader {
        /// The request's method.
        method: Method,
        /// The request's path.
        path: String,
    },
    /// No answer within the request timeout.
    #[error("{method} {path}: no answer within {timeout:?}")]
    Timeout {
        /// The request's method.
        method: Method,
        /// The request's path.
        path: String,
        /// The limit that passed.
        timeout: Duration,
    },
}

/// Whether a request failed only because the gate refused it: this
/// replica does not hold the lease (any more), so the server never saw it
/// and what follows from it is for the next leader to decide.
pub fn refused_as_follower(error: &kube::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(current) = source {
        if let Some(ClientError::NotLeader { .. }) = current.downcast_ref::<ClientError>() {
            return true;
        }
        source = current.source();
    }
    false
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = Result<T, BoxError>> + Send>>;

/// Whether a request changes what the API server stores. Reviews
/// (TokenReview, SubjectAccessReview) are created to be answered and store
/// nothing, so a follower's admin server may ask them.
fn is_write(method: &Method, path: &str) -> bool {
    let review = *method == Method::POST
        && matches!(
            path,
            "/apis/authentication.k8s.io/v1/tokenreviews"
                | "/apis/authorization.k8s.io/v1/subjectaccessreviews"
        );
    !review
        && matches!(
            *method,
            Method::POST | Method::PUT | Method::PATCH | Method::DELETE
        )
}

/// Puts a time limit on every request except watches.
#[derive(Clone, Copy, Debug)]
pub struct TimeoutLayer(pub Duration);

impl<S> Layer<S> for TimeoutLayer {
    type Service = TimedOut<S>;

    fn layer(&self, inner: S) -> Self::Service {
        TimedOut {
            inner,
            timeout: self.0,
        }
    }
}

/// The service of [`TimeoutLayer`].
pub struct TimedOut<S> {
    inner: S,
    timeout: Duration,
}

/// Whether a request is a watch (which streams until its own timeout).
fn is_watch<B>(request: &Request<B>) -> bool {
    request
        .uri()
        .query()
        .is_some_and(|q| q.split('&').any(|p| p == "watch=true" || p == "watch=1"))
}

impl<S, B> Service<Request<B>> for TimedOut<S>
where
    S: Service<Request<B>>,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = BoxFuture<S::Response>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let watch = is_watch(&request);
        let method = request.method().clone();
        let path = request.uri().path().to_string();
        let timeout = self.timeout;
        let answer = self.inner.call(request);
        Box::pin(async move {
            if watch {
                return answer.await.map_err(Into::into);
            }
            match tokio::time::timeout(timeout, answer).await {
                Ok(result) => result.map_err(Into::into),
                Err(_) => Err(ClientError::Timeout {
                    method,
                    path,
                    timeout,
                }
                .into()),
            }
        })
    }
}

#[cfg(test)]
mod tests;
