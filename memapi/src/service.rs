//! The `tower::Service` face of memapi, which `kube::Client::new` drives.
//! A dropped connection becomes a service error, as a broken socket would.

use super::Shared;
use super::body::ResponseBody;
use super::handler::{self, ConnectionDropped};
use futures::future::BoxFuture;
use std::sync::Arc;
use std::task::{Context, Poll};

/// memapi as a tower service over `kube::client::Body` requests.
#[derive(Clone)]
pub struct MemApiService {
    shared: Arc<Shared>,
    /// The impersonation headers every request gets.
    impersonation: Vec<(http::HeaderName, http::HeaderValue)>,
}

impl std::fmt::Debug for MemApiService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemApiService").finish_non_exhaustive()
    }
}

impl MemApiService {
    /// A service over the given server state.
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        Self {
            shared,
            impersonation: Vec::new(),
        }
    }

    /// The same service with every request made as `user` in `groups`
    /// (impersonation headers); a name that is no valid header value is
    /// left out.
    pub(crate) fn impersonating(mut self, user: &str, groups: &[&str]) -> Self {
        let user = std::iter::once(("impersonate-user", user));
        let groups = groups.iter().map(|g| ("impersonate-group", *g));
        self.impersonation = user
            .chain(groups)
            .filter_map(|(name, value)| {
                Some((
                    http::HeaderName::from_static(name),
                    http::HeaderValue::from_str(value).ok()?,
                ))
            })
            .collect();
        self
    }
}

impl tower::Service<http::Request<kube::client::Body>> for MemApiService {
    type Response = http::Response<ResponseBody>;
    type Error = ConnectionDropped;
    type Future = BoxFuture<'static, Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, mut req: http::Request<kube::client::Body>) -> Self::Future {
        for (name, value) in &self.impersonation {
            req.headers_mut().append(name.clone(), value.clone());
        }
        Box::pin(handler::serve_http(self.shared.clone(), req))
    }
}
