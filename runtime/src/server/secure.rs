//! The secure admin port: the admin routes over HTTPS (HTTP/1.1), behind
//! the delegated checks, as kube-controller-manager's `--secure-port`.
//!
//! Anyone who can reach the port can open connections, so each one is
//! bounded ([`ServingLimits`], served by [`super::serving`]): the TLS
//! handshake and the request's headers must come within their time limits
//! (the wait for the next request on a kept-alive connection counts
//! against the header limit too), a whole exchange, the answer's writing
//! included, within the request limit (the handler past it is answered
//! with a 504), a connection's read buffer is capped, and at most so many
//! connections are served at once, shared fairly by source address: the
//! kubelet's probes are served however many connections others hold.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use kube::Client;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

use super::delegation::{Delegation, DelegationConfig, guard};
use super::serving::{self, time_limit};
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
    /// answered with a 504 (`--request-timeout`); and how long its whole
    /// exchange may take, the answer's writing included, before the
    /// connection is closed.
    pub request_timeout: Duration,
    /// How many connections are served at once (`--max-connections`);
    /// further ones are accepted and wait their turn, shared by source
    /// address, for at most the handshake limit.
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
    /// task of its own (dropped with the server), within
    /// [`ServingLimits`], the certificate files watched for a change.
    pub async fn serve(self) {
        let serving = serving::serve(self.listener, self.router, self.limits, Some(self.acceptor));
        tokio::join!(Arc::clone(&self.certificates).watch(), serving);
    }
}
