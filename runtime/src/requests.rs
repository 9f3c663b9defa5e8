//! The API server's answers to every request of the process, counted by
//! client, method and status code (`pv_controller_api_requests_total`).
//!
//! The write counters say how the controller's own writes ended; this says
//! how *every* request ended, reads, watches, events and the lease
//! included. A missing RBAC rule shows here as `code="403"` the moment it
//! bites, whichever request it hits, and a request the server never
//! answered (a broken connection, the request timeout) as `code="error"`.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use http::{Request, Response};
use prometheus::core::{Collector, Desc};
use prometheus::proto::MetricFamily;
use prometheus::{IntCounterVec, Opts};
use tower::{BoxError, Layer, Service};

use crate::metrics::MetricsError;

/// Name of the series.
const SERIES: &str = "pv_controller_api_requests_total";

/// `code` of a request the server did not answer.
const NO_ANSWER: &str = "error";

/// One series of the counter: client, method, code.
type Key = (&'static str, String, String);

/// Answers counted so far. Cheap to clone; clones count together. It counts
/// from the start and is exported once registered ([`RequestCounts::collector`]).
#[derive(Clone, Debug, Default)]
pub struct RequestCounts {
    counts: Arc<Mutex<BTreeMap<Key, u64>>>,
}

impl RequestCounts {
    /// A layer counting the answers to the requests of the client named
    /// `client` (`controller`, `lease` or `reviews`).
    pub fn layer(&self, client: &'static str) -> CountLayer {
        CountLayer {
            counts: self.clone(),
            client,
        }
    }

    /// Answers with status `code` (`"403"`, or `"error"`: no answer) so
    /// far, over both clients and every method.
    #[cfg(test)]
    pub(crate) fn with_code(&self, code: &str) -> u64 {
        self.lock()
            .iter()
            .filter(|((_, _, counted), _)| counted == code)
            .map(|(_, count)| count)
            .sum()
    }

    /// A collector exporting the counts, to register into the metrics
    /// registry of the process.
    pub fn collector(&self) -> Result<RequestCollector, MetricsError> {
        let descs = family()?.desc().into_iter().cloned().collect();
        Ok(RequestCollector {
            counts: self.clone(),
            descs,
        })
    }

    fn count(&self, client: &'static str, method: &http::Method, code: String) {
        *self
            .lock()
            .entry((client, method.as_str().to_string(), code))
            .or_insert(0) += 1;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<Key, u64>> {
        self.counts.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

fn family() -> Result<IntCounterVec, prometheus::Error> {
    IntCounterVec::new(
        Opts::new(
            SERIES,
            "Requests to the API server, by client (controller, lease), method and the answer's status code (error: no answer)",
        ),
        &["client", "method", "code"],
    )
}

/// Exports [`RequestCounts`] at scrape time.
pub struct RequestCollector {
    counts: RequestCounts,
    descs: Vec<Desc>,
}

impl Collector for RequestCollector {
    fn desc(&self) -> Vec<&Desc> {
        self.descs.iter().collect()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let counter = match family() {
            Ok(counter) => counter,
            Err(error) => {
                tracing::error!(%error, "cannot build the request counter");
                return Vec::new();
            }
        };
        for ((client, method, code), count) in self.counts.lock().iter() {
            counter
                .with_label_values(&[client, method.as_str(), code.as_str()])
                .inc_by(*count);
        }
        counter.collect()
    }
}

/// Counts the answers to one client's requests (see [`RequestCounts::layer`]).
#[derive(Clone, Debug)]
pub struct CountLayer {
    counts: RequestCounts,
    client: &'static str,
}

impl<S> Layer<S> for CountLayer {
    type Service = Counted<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Counted {
            inner,
            layer: self.clone(),
        }
    }
}

/// The service of [`CountLayer`].
pub struct Counted<S> {
    inner: S,
    layer: CountLayer,
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = Result<T, BoxError>> + Send>>;

impl<S, B, RB> Service<Request<B>> for Counted<S>
where
    S: Service<Request<B>, Response = Response<RB>>,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
{
    type Response = Response<RB>;
    type Error = BoxError;
    type Future = BoxFuture<Response<RB>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let method = request.method().clone();
        let layer = self.layer.clone();
        let answer = self.inner.call(request);
        Box::pin(async move {
            let result = answer.await.map_err(Into::into);
            let code = match &result {
                Ok(response) => response.status().as_u16().to_string(),
                Err(_) => NO_ANSWER.to_string(),
            };
            layer.counts.count(layer.client, &method, code);
            result
        })
    }
}
