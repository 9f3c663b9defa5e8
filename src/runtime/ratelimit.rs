//! A token-bucket limit on requests to the API server, as client-go's
//! `--kube-api-qps` / `--kube-api-burst`, as a tower layer for kube's client.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, ready};
use std::time::Duration;

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
}

impl Bucket {
    /// Takes a token, or says how long until one is there.
    fn take(&mut self, now: Instant) -> Result<(), Duration> {
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
}

/// The service made by [`RateLimitLayer`]: not ready until a token is free.
pub struct RateLimited<S> {
    inner: S,
    bucket: Arc<Mutex<Bucket>>,
    sleep: Option<Pin<Box<Sleep>>>,
    reserved: bool,
}

impl<S, R> Service<R> for RateLimited<S>
where
    S: Service<R>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

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
        self.inner.call(request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn bursts_then_paces() {
        let start = Instant::now();
        let mut bucket = Bucket {
            qps: 10.0,
            burst: 3.0,
            tokens: 3.0,
            last: start,
        };
        for _ in 0..3 {
            assert!(bucket.take(start).is_ok());
        }
        let wait = bucket.take(start).unwrap_err();
        assert_eq!(wait, Duration::from_millis(100));
        assert!(bucket.take(start + Duration::from_millis(100)).is_ok());
        assert!(bucket.take(start + Duration::from_millis(100)).is_err());
    }

    #[test]
    fn zero_qps_is_unlimited() {
        let now = Instant::now();
        let mut bucket = Bucket {
            qps: 0.0,
            burst: 1.0,
            tokens: 1.0,
            last: now,
        };
        for _ in 0..100 {
            assert!(bucket.take(now).is_ok());
        }
    }
}
