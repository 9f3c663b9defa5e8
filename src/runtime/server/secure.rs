//! The secure admin port: the admin routes over HTTPS (HTTP/1.1), behind
//! the delegated checks, as kube-controller-manager's `--secure-port`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use kube::Client;
use tokio::net::TcpListener;
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;

use super::delegation::{Delegation, DelegationConfig, guard};
use super::tls::Certificates;
pub use super::tls::ServingCertificate;
use super::{AdminState, BindError, bind, router};

/// The secure admin server's settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SecureServing {
    /// Where it listens (`--bind-address`, `--secure-port`; port 0: any
    /// free one).
    pub address: SocketAddr,
    /// Its certificate.
    pub certificate: ServingCertificate,
    /// How requests are checked.
    pub delegation: DelegationConfig,
}

/// How long a client has to finish the TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// A bound secure server, ready to serve.
pub(crate) struct SecureServer {
    listener: TcpListener,
    acceptor: TlsAcceptor,
    certificates: Arc<Certificates>,
    router: Router,
}

impl SecureServer {
    /// Loads or makes the certificate and binds the port; reviews go
    /// through `client`.
    pub(crate) async fn bind(
        config: &SecureServing,
        client: Client,
        admin: AdminState,
    ) -> Result<Self, BindError> {
        let certificates = Certificates::load(config.certificate.clone())?;
        let acceptor = TlsAcceptor::from(certificates.server_config()?);
        let listener = bind(config.address).await?;
        let delegation = Arc::new(Delegation::new(client, config.delegation.clone()));
        let router = router(admin).layer(axum::middleware::from_fn_with_state(delegation, guard));
        Ok(Self {
            listener,
            acceptor,
            certificates,
            router,
        })
    }

    /// Where it listens.
    pub(crate) fn local_addr(&self) -> Option<SocketAddr> {
        self.listener.local_addr().ok()
    }

    /// Serves until dropped: each connection's handshake and requests on a
    /// task of its own (dropped with the server), the certificate files
    /// watched for a change.
    pub(crate) async fn serve(self) {
        let mut connections = JoinSet::new();
        connections.spawn(Arc::clone(&self.certificates).watch());
        loop {
            while connections.try_join_next().is_some() {}
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
            connections.spawn(async move {
                let tls =
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
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
                if let Err(error) = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(tls), service)
                    .await
                {
                    tracing::debug!(%peer, %error, "admin connection ended with an error");
                }
            });
        }
    }
}
