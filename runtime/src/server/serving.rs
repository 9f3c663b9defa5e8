//! Serving an admin port's connections, over TLS or plain HTTP, within
//! [`ServingLimits`]: every connection accepted at once and admitted by
//! [`Admission`] (a fair share by source address, so a probe is served
//! however many connections others hold), the TLS handshake and the wait
//! for a place each bounded by the handshake limit, a request's headers by
//! the header limit (the wait for the next request on a kept-alive
//! connection too), a whole exchange, its answer's writing included, by
//! the request limit ([`TimedIo`]), and a connection's read buffer capped.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::Response;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::{AbortHandle, Id, JoinSet};
use tokio::time::Instant;
use tokio_rustls::TlsAcceptor;
use tower::ServiceExt;

use super::admission::{Admission, Arrival};
use super::delegation::status;
use super::exchange::{ExchangeClock, TimedIo};
use super::secure::ServingLimits;

/// The most a connection buffers of a request it reads (hyper's smallest
/// read buffer cap is 8 KiB): a request's headers must fit, a client that
/// sends more is refused.
const MAX_READ_BUFFER: usize = 64 * 1024;

/// How many connections may wait for a place, for each place.
const WAITING_PER_PLACE: usize = 8;

/// An accepted connection, waiting or about to be served.
struct Accepted {
    stream: TcpStream,
    peer: SocketAddr,
}

/// The source a connection is counted against: its address, an
/// IPv4-mapped IPv6 address as the IPv4 address it is.
fn source(peer: SocketAddr) -> IpAddr {
    peer.ip().to_canonical()
}

/// Serves `router` on `listener` within `limits`, over TLS when `tls` is
/// given, until dropped.
pub(super) async fn serve(
    listener: TcpListener,
    router: Router,
    limits: ServingLimits,
    tls: Option<TlsAcceptor>,
) {
    let mut admission: Admission<Id, Accepted> = Admission::new(
        limits.max_connections,
        limits.max_connections.saturating_mul(WAITING_PER_PLACE),
    );
    let mut connections = JoinSet::new();
    // Each served connection's handle, to close it in favour of another.
    let mut handles: HashMap<Id, AbortHandle> = HashMap::new();
    // Whether every place was taken at the last arrival: logged once each
    // time the port fills, not for every connection while it stays full.
    let mut full = false;
    let serve_one = |connections: &mut JoinSet<()>,
                     handles: &mut HashMap<Id, AbortHandle>,
                     accepted: Accepted| {
        let task = connection(accepted, router.clone(), limits, tls.clone());
        let handle = connections.spawn(task);
        let id = handle.id();
        handles.insert(id, handle);
        id
    };
    loop {
        let wait_deadline = admission.next_deadline();
        tokio::select! {
            accepted = listener.accept() => {
                let (stream, peer) = match accepted {
                    Ok(accepted) => accepted,
                    Err(error) => {
                        // Out of file descriptors, most likely: a waiting
                        // connection of the source with most waiting is
                        // closed to make room, or, with none waiting, the
                        // connections served end within their limits.
                        if let Some(closed) = admission.push_out() {
                            tracing::debug!(%error, peer = %closed.peer, "admin server: accept failed, closed a waiting connection");
                        } else {
                            tracing::warn!(%error, "admin server: accept failed");
                            tokio::time::sleep(Duration::from_millis(100)).await;
                        }
                        continue;
                    }
                };
                let from = source(peer);
                let deadline = Instant::now() + limits.tls_handshake_timeout;
                match admission.arrive(from, Accepted { stream, peer }, deadline) {
                    Arrival::Serve(accepted) => {
                        full = false;
                        let id = serve_one(&mut connections, &mut handles, accepted);
                        admission.serving(from, id);
                    }
                    Arrival::ServeEvicting { connection, evict } => {
                        tracing::debug!(%peer, "admin server: full, a connection of the source holding most closed to serve this one");
                        if let Some(handle) = handles.remove(&evict) {
                            handle.abort();
                        }
                        let id = serve_one(&mut connections, &mut handles, connection);
                        admission.serving(from, id);
                    }
                    Arrival::Wait { close } => {
                        if !full {
                            tracing::warn!(
                                limit = limits.max_connections,
                                "admin server: connection limit reached, new connections wait their turn by source"
                            );
                        }
                        full = true;
                        if let Some(closed) = close {
                            tracing::debug!(peer = %closed.peer, "admin server: too many connections waiting, closed one");
                        }
                    }
                }
            }
            Some(ended) = connections.join_next_with_id() => {
                let id = match ended {
                    Ok((id, ())) => id,
                    Err(error) => {
                        if error.is_panic() {
                            tracing::error!(%error, "admin server: a connection's task panicked");
                        }
                        error.id()
                    }
                };
                admission.ended(id);
                handles.remove(&id);
                while let Some((from, accepted)) = admission.next() {
                    let id = serve_one(&mut connections, &mut handles, accepted);
                    admission.serving(from, id);
                }
            }
            () = sleep_until(wait_deadline), if wait_deadline.is_some() => {
                for expired in admission.expire(Instant::now()) {
                    tracing::debug!(peer = %expired.peer, "admin server: a connection waited its whole handshake time, closed");
                }
            }
        }
    }
}

/// Sleeps until `deadline` (never without one).
async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

/// One connection: its TLS handshake (when served over TLS), then its
/// requests.
async fn connection(
    accepted: Accepted,
    router: Router,
    limits: ServingLimits,
    tls: Option<TlsAcceptor>,
) {
    let Accepted { stream, peer } = accepted;
    let Some(acceptor) = tls else {
        exchanges(stream, peer, router, limits).await;
        return;
    };
    match tokio::time::timeout(limits.tls_handshake_timeout, acceptor.accept(stream)).await {
        Ok(Ok(tls)) => exchanges(tls, peer, router, limits).await,
        Ok(Err(error)) => tracing::debug!(%peer, %error, "TLS handshake failed"),
        Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
    }
}

/// Serves the requests of one connection, each exchange within the
/// request limit.
async fn exchanges<IO>(io: IO, peer: SocketAddr, router: Router, limits: ServingLimits)
where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let clock = ExchangeClock::default();
    let io = TimedIo::new(io, clock.clone());
    let service =
        hyper::service::service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
            clock.start(limits.request_timeout);
            router.clone().oneshot(request.map(axum::body::Body::new))
        });
    let served = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.read_header_timeout)
        .max_buf_size(MAX_READ_BUFFER)
        .serve_connection(TokioIo::new(io), service)
        .await;
    if let Err(error) = served {
        tracing::debug!(%peer, %error, "admin connection ended with an error");
    }
}

/// Answers a request that is not done within `limit` with a 504, as
/// kube-apiserver answers one past its `--request-timeout`.
pub(super) async fn time_limit(
    State(limit): State<Duration>,
    request: Request,
    next: Next,
) -> Response {
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
