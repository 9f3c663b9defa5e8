//! A token-bucket limit on requests to the API server, as client-go's
//! `--kube-api-qps` / `--kube-api-burst`, as a tower layer for kube's client.
//!
//! The layer also honours the server's own limit: an answer of 429 Too Many
//! Requests (API Priority and Fairness turning a request away) with a
//! `Retry-After` of N seconds holds every request of the client for N
//! seconds, whether or not a client-side limit is set. The 429 itself fails
//! its request, and the sync that made it is retried with backoff, after
//! the pause.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use http::{Response, StatusCode, header::RETRY_AFTER};

use tokio::time::{Instant, Sleep};
use tower::{Layer, Service};

/// Limits requests to `qps` per second on average, with bursts of `burst`.
#[derive(Clone)]
pub struct RateLimitLayer {
    bucket: Arc<Mutex<Bucket>>,
}

impl RateLimitLayer {
    /// A limit of `qps` requests per second with bursts of `burst`; a
    /// non-positive `qps` means no limit.
    pub fn new(qps: f64, burst: u32) -> Self {
        let burst = f64::from(burst.max(1));
        Self {
            bucket: Arc::new(Mutex::new(Bucket {
                qps,
                burst,
                tokens: burst,
                last: Instant::now(),
                not_before: None,
            })),
        }
    }
}

impl<S> Layer<S> for RateLimitLayer {
    type Service = RateLimited<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RateLimited {
            inner,
            bucket: Arc::clone(&self.bucket),
            sleep: None,
            reserved: false,
        }
    }
}

struct Bucket {
    qps: f64,
    burst: f64,
    tokens: f64,
    last: Instant,
    /// No request goes out before this (the server asked for a pause).
    not_before: Option<Instant>,
}

/// The longest pause a `Retry-After` can impose, so a wrong header cannot
/// stop the controller for long.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

impl Bucket {
    /// Takes a token, or says how long until one is there.
    fn take(&mut self, now: Instant) -> Result<(), Duration> {
        if let Some(until) = self.not_before {
            if now < until {
                return Err(until - now);
            }
            self.not_before = None;
        }
        if self.qps <= 0.0 {
            return Ok(());
        }
        let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
        self.tokens = (self.tokens + elapsed * self.qps).min(self.burst);
        self.last = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            Ok(())
        } else {
            Err(Duration::from_secs_f64((1.0 - self.tokens) / self.qps))
        }
    }

    /// Holds every request for `pause` from `now` (a 429's `Retry-After`).
    fn pause(&mut self, now: Instant, pause: Duration) {
        let until = now + pause.min(MAX_RETRY_AFTER);
        if self.not_before.is_none_or(|current| current < until) {
            self.not_before = Some(until);
        }
    }
}

/// The pause a 429 answer asks for: its `Retry-After` in whole seconds (the
/// form the API server sends), one second when the header is missing or
/// unreadable; `None` for any other answer.
fn retry_after<B>(response: &Response<B>) -> Option<Duration> {
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

/// The service made by [`RateLimitLayer`]: not ready until a token is free.
pub struct RateLimited<S> {
    inner: S,
    bucket: Arc<Mutex<Bucket>>,
    sleep: Option<Pin<Box<Sleep>>>,
    reserved: bool,
}

impl<S, R, B> Service<R> for RateLimited<S>
where
    S: Service<R, Response = Response<B>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Throttled<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        loop {
            if self.reserved {
                return self.inner.poll_ready(cx);
            }
            if let Some(sleep) = self.sleep.as_mut() {
                ready!(sleep.as_mut().poll(cx));
                self.sleep = None;
            }
            let taken = self
                .bucket
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .take(Instant::now());
            match taken {
                Ok(()) => self.reserved = true,
                Err(wait) => self.sleep = Some(Box::pin(tokio::time::sleep(wait))),
            }
        }
    }

    fn call(&mut self, request: R) -> Self::Future {
        self.reserved = false;
        Throttled {
            inner: Box::pin(self.inner.call(request)),
            bucket: Arc::clone(&self.bucket),
        }
    }
}

/// A request under way; a 429 answer pauses the client (see the module
/// documentation).
pub struct Throttled<F> {
    inner: Pin<Box<F>>,
    bucket: Arc<Mutex<Bucket>>,
}

impl<F, B, E> Future for Throttled<F>
where
    F: Future<Output = Result<Response<B>, E>>,
{
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let output = ready!(self.inner.as_mut().poll(cx));
        if let Ok(response) = &output
            && let Some(pause) = retry_after(response)
        {
            tracing::warn!(
                pause_seconds = pause.as_secs(),
                "the API server asked to slow down (429), pausing requests"
            );
            self.bucket
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .pause(Instant::now(), pause);
        }
        Poll::Ready(output)
    }
}

#[cfg(test)]
mod tests;
