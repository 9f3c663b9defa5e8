//! The loopback TCP face of memapi: plain HTTP/1.1 via hyper, for kubectl
//! and the embedded mode. A dropped-connection reactor closes the socket.

use super::Shared;
use super::error::MemApiError;
use super::handler;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::net::TcpListener;

/// Pause after a failed accept (e.g. out of file descriptors) before retrying.
const ACCEPT_RETRY: std::time::Duration = std::time::Duration::from_millis(10);

/// Binds `addr` (port 0 picks a free port) and serves connections until the
/// returned task is aborted. Returns the bound address and the task.
pub(crate) async fn serve(
    shared: Arc<Shared>,
    addr: SocketAddr,
) -> Result<(SocketAddr, tokio::task::JoinHandle<()>), MemApiError> {
    let bind_err = |source| MemApiError::Bind { addr, source };
    let listener = TcpListener::bind(addr).await.map_err(bind_err)?;
    let local = listener.local_addr().map_err(bind_err)?;
    tracing::debug!(%local, "memapi listening");
    let task = tokio::spawn(async move {
        loop {
            let stream = match listener.accept().await {
                Ok((stream, _peer)) => stream,
                Err(e) => {
                    tracing::debug!(error = %e, "memapi accept failed");
                    tokio::time::sleep(ACCEPT_RETRY).await;
                    continue;
                }
            };
            let shared = shared.clone();
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(move |req: http::Request<Incoming>| {
                    handler::serve_http(shared.clone(), req)
                });
                let conn = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), svc);
                if let Err(e) = conn.await {
                    tracing::debug!(error = %e, "memapi connection ended");
                }
            });
        }
    });
    Ok((local, task))
}
