//! The admin server: `/metrics` (Prometheus text format), `/livez` and
//! `/healthz` (the controller has not failed: a watcher that keeps
//! failing, a task that died, turn it unhealthy, so the kubelet restarts a
//! process that would otherwise look fine and do nothing) and `/readyz`
//! (every informer cache has synced; with leader election a follower is
//! ready too, since it keeps warm caches and is fit to take over); beside
//! them, the routes the controllers hand in ([`AdminState::routes`]).
//!
//! Served as kube-controller-manager serves them: over HTTPS on the secure
//! port ([`secure`]: a given or self-signed certificate, [`tls`]), every
//! request but the always-allowed paths authenticated and authorized by the
//! API server ([`delegation`]); and, only where that is harmless (the
//! embedded demo, or an explicit opt-in), the metrics and health checks
//! alone over plain HTTP without either ([`serve_insecure`]). Both ports
//! serve their connections within the same limits ([`serving`]).

mod admission;
mod cache;
pub mod delegation;
mod exchange;
pub mod secure;
mod serving;
pub mod tls;

pub use delegation::DelegationConfig;
pub use secure::DEFAULT_MAX_CONNECTIONS;
pub use secure::{SecureServing, ServingCertificate, ServingLimits};

use std::net::{Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use tokio::net::TcpListener;

use crate::metrics::Metrics;

/// Whether the controllers' caches have synced; set once by the runner,
/// read by `/readyz`. Cheap to clone: clones share the state.
#[derive(Clone, Debug, Default)]
pub struct Readiness(Arc<AtomicBool>);

impl Readiness {
    /// Marks the process ready.
    pub fn set_ready(&self) {
        self.0.store(true, Ordering::Release);
    }

    /// Whether the process is ready.
    pub fn is_ready(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }
}

/// Whether the controller still works; turned unhealthy once, for good,
/// with the reason, when it fails. Cheap to clone: clones share the state.
#[derive(Clone, Debug, Default)]
pub struct Liveness(Arc<std::sync::Mutex<Option<String>>>);

impl Liveness {
    /// Marks the controller failed, for `reason`.
    pub fn fail(&self, reason: String) {
        *self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(reason);
    }

    /// Why the controller failed, if it did.
    pub fn failure(&self) -> Option<String> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }
}

/// The health handles the admin server reports.
#[derive(Clone, Debug, Default)]
pub struct Health {
    /// For `/readyz`.
    pub readiness: Readiness,
    /// For `/livez`.
    pub liveness: Liveness,
}

/// What the admin handlers read.
#[derive(Clone)]
pub struct AdminState {
    /// For `/metrics`.
    pub metrics: Arc<Metrics>,
    /// For `/livez`, `/healthz` and `/readyz`.
    pub health: Health,
    /// The routes the controllers serve besides the process's own, tried
    /// after them (so a controller cannot override `/metrics` or the health
    /// checks), behind the same authentication and authorization.
    pub routes: Router,
}

/// The routes of the secure admin port: the process's own, then the
/// controllers'.
pub fn router(state: AdminState) -> Router {
    let controllers = state.routes.clone();
    metrics_and_health(state).fallback_service(controllers)
}

/// The process's own routes: `/metrics` and the health checks, what the
/// plain-HTTP port serves and nothing else.
fn metrics_and_health(state: AdminState) -> Router {
    Router::new()
        .route("/metrics", get(serve_metrics))
        .route("/livez", get(serve_live))
        .route("/healthz", get(serve_live))
        .route("/readyz", get(serve_ready))
        .with_state(state)
}

/// Why the admin server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ListenError {
    /// The address cannot be listened on.
    #[error("listening on the admin server's address {address}: {source}")]
    Address {
        /// The address.
        address: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The serving certificate cannot be loaded or made.
    #[error(transparent)]
    Certificate(#[from] tls::CertificateError),
}

/// Parses a listening address in Go's style too: `:10280` means every
/// interface (of both IP families, as [`listen`] treats an unspecified
/// address).
pub fn parse_bind_address(address: &str) -> Result<SocketAddr, std::net::AddrParseError> {
    match address.strip_prefix(':') {
        Some(port) => format!("0.0.0.0:{port}").parse(),
        None => address.parse(),
    }
}

/// How many connections wait in the kernel to be accepted (tokio's and
/// Go's listen backlog).
const LISTEN_BACKLOG: i32 = 1024;

/// Opens the admin server's listener (port 0 picks a free port; the
/// listener's `local_addr` tells which). An unspecified address (`0.0.0.0`
/// or `::`) listens on every interface of both IP families, as
/// kube-controller-manager does: one IPv6 socket that takes IPv4
/// connections too, or IPv4 alone where the host has no IPv6.
pub async fn listen(address: SocketAddr) -> Result<TcpListener, ListenError> {
    let listen_error = |source| ListenError::Address {
        address: address.to_string(),
        source,
    };
    if address.ip().is_unspecified() {
        match dual_stack(address.port()) {
            Ok(listener) => return TcpListener::from_std(listener).map_err(listen_error),
            Err(error) => {
                tracing::info!(%error, port = address.port(), "cannot listen on IPv6, listening on IPv4 only");
            }
        }
        let ipv4 = SocketAddr::from(([0, 0, 0, 0], address.port()));
        return TcpListener::bind(ipv4).await.map_err(listen_error);
    }
    TcpListener::bind(address).await.map_err(listen_error)
}

/// A listener on `[::]:port` that takes IPv4 connections too (as
/// IPv4-mapped addresses), whatever the host's default for IPv6 sockets.
fn dual_stack(port: u16) -> std::io::Result<std::net::TcpListener> {
    use socket2::{Domain, Protocol, Socket, Type};
    let socket = Socket::new(Domain::IPV6, Type::STREAM, Some(Protocol::TCP))?;
    socket.set_only_v6(false)?;
    // As tokio's own listener: a restarted process can take its port at
    // once.
    socket.set_reuse_address(true)?;
    socket.set_nonblocking(true)?;
    socket.bind(&SocketAddr::from((Ipv6Addr::UNSPECIFIED, port)).into())?;
    socket.listen(LISTEN_BACKLOG)?;
    Ok(socket.into())
}

/// Serves `/metrics`, `/livez`, `/healthz` and `/readyz` over plain HTTP,
/// without authentication, on `listener` within `limits` (as the secure
/// port's connections) until the task is dropped. Nothing else: the
/// controllers' routes show the cluster's objects and need the secure
/// port's checks.
pub async fn serve_insecure(listener: TcpListener, state: AdminState, limits: ServingLimits) {
    let routes = metrics_and_health(state).layer(axum::middleware::from_fn_with_state(
        limits.request_timeout,
        serving::time_limit,
    ));
    serving::serve(listener, routes, limits, None).await;
}

async fn serve_metrics(State(state): State<AdminState>) -> Response {
    match state.metrics.render() {
        Ok(text) => ([(header::CONTENT_TYPE, prometheus::TEXT_FORMAT)], text).into_response(),
        Err(error) => {
            tracing::error!(%error, "cannot render metrics");
            internal_error()
        }
    }
}

/// A 500 that tells the caller nothing of the cause (the handler logs it).
fn internal_error() -> Response {
    (StatusCode::INTERNAL_SERVER_ERROR, "Internal Server Error").into_response()
}

/// `/livez` and `/healthz`: `ok`, or a 503 that withholds the reason, as
/// kube-controller-manager's health checks do (the paths need no
/// credentials; the reason is in the log and in
/// [`Liveness::failure`]).
async fn serve_live(State(state): State<AdminState>, uri: axum::http::Uri) -> Response {
    if state.health.liveness.failure().is_none() {
        return (StatusCode::OK, "ok").into_response();
    }
    let check = uri.path().trim_start_matches('/');
    (
        StatusCode::SERVICE_UNAVAILABLE,
        format!("[-]controllers failed: reason withheld\n{check} check failed"),
    )
        .into_response()
}

async fn serve_ready(State(state): State<AdminState>) -> Response {
    if state.health.readiness.is_ready() {
        (StatusCode::OK, "ok").into_response()
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "caches not synced").into_response()
    }
}

#[cfg(test)]
mod tests;
