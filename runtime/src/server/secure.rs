//! The secure admin port: the admin routes over HTTPS (HTTP/1.1), behind
//! the delegated checks, as kube-controller-manager's `--secure-port`.
//!
//! Anyone who can reach the port can open connections, so each one is
//! bounded ([`ServingLimits`]): the TLS handshake and the request's headers
//! must come within their time limits (the wait for the next request on a
//! kept-alive connection counts against the header limit too), a request
//! is answered within its own limit or with a 504, a connection's read
//! buffer is capped, and at most so many connections are served at once:
//! further ones wait, unaccepted, until one ends.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::Response;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use kube::Client;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;

use super::delegation::{Delegation, DelegationConfig, guard, status};
use super::tls::Certificates;
pub use super::tls::ServingCertificate;
use super::{AdminState, ListenError, listen, router};

/// The secure admin server's settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SecureServing {
    /// Where it listens (the address and `--secure-port` flags; port 0:
    /// any free one; an unspecified address listens on every interface of
    /// both IP families).
    pub address: SocketAddr,
    /// Its certificate.
    pub certificate: ServingCertificate,
    /// How requests are checked.
    pub delegation: DelegationConfig,
    /// What one client may hold of the server.
    pub limits: ServingLimits,
}

/// What one client may hold of the secure port: time limits on each stage
/// of a connection, and how many connections are served at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ServingLimits {
    /// How long a client has to finish the TLS handshake
    /// (`--tls-handshake-timeout`).
    pub tls_handshake_timeout: Duration,
    /// How long a client has to send a request's headers, counted from
    /// when the server waits for them: after the handshake, and after each
    /// answer on a kept-alive connection, so an idle connection is closed
    /// after it too (`--read-header-timeout`).
    pub read_header_timeout: Duration,
    /// How long one request may take, its checks included, before it is
    /// answered with a 504 (`--request-timeout`).
    pub request_timeout: Duration,
    /// How many connections are served at once; further ones wait in the
    /// listen backlog until one ends (`--max-connections`).
    pub max_connections: usize,
}

/// Default of [`ServingLimits::tls_handshake_timeout`].
const DEFAULT_TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Default of [`ServingLimits::read_header_timeout`]: the fixed
/// `ReadHeaderTimeout` of kube-controller-manager's secure serving.
const DEFAULT_READ_HEADER_TIMEOUT: Duration = Duration::from_secs(32);

/// Default of [`ServingLimits::request_timeout`]: kube-apiserver's
/// `--request-timeout`.
const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// Default of [`ServingLimits::max_connections`].
pub const DEFAULT_MAX_CONNECTIONS: usize = 512;

impl Default for ServingLimits {
    fn default() -> Self {
        Self {
            tls_handshake_timeout: DEFAULT_TLS_HANDSHAKE_TIMEOUT,
            read_header_timeout: DEFAULT_READ_HEADER_TIMEOUT,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
        }
    }
}

/// The most a connection buffers of a request it reads (hyper's smallest
/// read buffer cap is 8 KiB): a request's headers must fit, a client that
/// sends more is refused.
const MAX_READ_BUFFER: usize = 64 * 1024;

/// A bound secure server, ready to serve.
pub struct SecureServer {
    listener: TcpListener,
    acceptor: TlsAcceptor,
    certificates: Arc<Certificates>,
    router: Router,
    limits: ServingLimits,
}

impl SecureServer {
    /// Loads or makes the certificate and listens on the port; reviews go
    /// through `client`.
    pub async fn listen(
        config: &SecureServing,
        client: Client,
        admin: AdminState,
    ) -> Result<Self, ListenError> {
        let certificates = Certificates::load(config.certificate.clone())?;
        let acceptor = TlsAcceptor::from(certificates.server_config()?);
        let listener = listen(config.address).await?;
        let delegation = Arc::new(Delegation::new(client, config.delegation.clone()));
        let router = router(admin)
            .layer(axum::middleware::from_fn_with_state(delegation, guard))
            .layer(axum::middleware::from_fn_with_state(
                config.limits.request_timeout,
                time_limit,
            ));
        Ok(Self {
            listener,
            acceptor,
            certificates,
            router,
            limits: config.limits,
        })
    }

    /// Where it listens.
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.listener.local_addr().ok()
    }

    /// Serves until dropped: each connection's handshake and requests on a
    /// task of its own (dropped with the server), at most
    /// [`ServingLimits::max_connections`] at once, the certificate files
    /// watched for a change.
    pub async fn serve(self) {
        let slots = Arc::new(Semaphore::new(self.limits.max_connections.max(1)));
        let mut connections = JoinSet::new();
        connections.spawn(Arc::clone(&self.certificates).watch());
        // Whether the last connection had to wait for a slot: the limit is
        // logged once each time it is reached, not for every connection
        // while it stays reached.
        let mut saturated = false;
        loop {
            while connections.try_join_next().is_some() {}
            let slot = if let Ok(slot) = Arc::clone(&slots).try_acquire_owned() {
                saturated = false;
                slot
            } else {
                if !saturated {
                    tracing::warn!(
                        limit = self.limits.max_connections,
                        "secure admin server: connection limit reached, new connections wait"
                    );
                }
                saturated = true;
                // The semaphore is never closed.
                let Ok(slot) = Arc::clone(&slots).acquire_owned().await else {
                    return;
                };
                slot
            };
            let (stream, peer) = match self.listener.accept().await {
                Ok(accepted) => accepted,
                Err(error) => {
                    tracing::warn!(%error, "secure admin server: accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            let acceptor = self.acceptor.clone();
            let service = TowerToHyperService::new(self.router.clone());
            let limits = self.limits;
            connections.spawn(async move {
                let _slot = slot;
                let handshake = acceptor.accept(stream);
                let tls = match tokio::time::timeout(limits.tls_handshake_timeout, handshake).await
                {
                    Ok(Ok(tls)) => tls,
                    Ok(Err(error)) => {
                        tracing::debug!(%peer, %error, "TLS handshake failed");
                        return;
                    }
                    Err(_) => {
                        tracing::debug!(%peer, "TLS handshake timed out");
                        return;
                    }
                };
                let served = hyper::server::conn::http1::Builder::new()
                    .timer(TokioTimer::new())
                    .header_read_timeout(limits.read_header_timeout)
                    .max_buf_size(MAX_READ_BUFFER)
                    .serve_connection(TokioIo::new(tls), service)
                    .await;
                if let Err(error) = served {
                    tracing::debug!(%peer, %error, "admin connection ended with an error");
                }
            });
        }
    }
}

/// Answers a request that is not done within `limit` with a 504, as
/// kube-apiserver answers one past its `--request-timeout`.
async fn time_limit(State(limit): State<Duration>, request: Request, next: Next) -> Response {
    let path = request.uri().path().to_string();
    if let Ok(response) = tokio::time::timeout(limit, next.run(request)).await {
        return response;
    }
    tracing::warn!(%path, ?limit, "admin request timed out");
    status(
        StatusCode::GATEWAY_TIMEOUT,
        "Timeout",
        "Timeout: request did not complete within the allotted timeout",
    )
}
