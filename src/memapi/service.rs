//! The `tower::Service` face of memapi, which `kube::Client::new` drives:
//! reads the request body, hands the request to the handler, and turns a
//! dropped connection into a service error, as a broken socket would be.

use super::Shared;
use super::body::{ResponseBody, error_response};
use super::handler::{self, Outcome};
use super::status::ApiError;
use futures::future::BoxFuture;
use http_body_util::BodyExt;
use std::sync::Arc;
use std::task::{Context, Poll};

/// The error a request fails with when a reactor drops its connection.
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("connection dropped by the in-memory API server (injected fault)")]
pub struct ConnectionDropped;

/// memapi as a tower service over `kube::client::Body` requests.
#[derive(Clone)]
pub struct MemApiService {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for MemApiService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemApiService").finish_non_exhaustive()
    }
}

impl MemApiService {
    /// A service over the given server state.
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        Self { shared }
    }
}

impl tower::Service<http::Request<kube::client::Body>> for MemApiService {
    type Response = http::Response<ResponseBody>;
    type Error = ConnectionDropped;
    type Future = BoxFuture<'static, Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<kube::client::Body>) -> Self::Future {
        let shared = self.shared.clone();
        Box::pin(async move {
            let (parts, body) = req.into_parts();
            let bytes = match body.collect().await {
                Ok(c) => c.to_bytes(),
                Err(e) => {
                    let err = ApiError::bad_request(format!("cannot read the request body: {e}"));
                    return Ok(error_response(&err));
                }
            };
            match handler::handle(shared, parts, bytes).await {
                Outcome::Respond(resp) => Ok(resp),
                Outcome::Drop => Err(ConnectionDropped),
            }
        })
    }
}
