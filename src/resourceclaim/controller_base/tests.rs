use std::convert::Infallible;
use std::sync::Arc;

use http::{Request, Response};

use super::{ClaimControllerBase, ClaimControllerConfig};
use crate::runtime::metrics::Metrics;

/// An API server that serves nothing: every request is a 404.
fn empty_server() -> kube::Client {
    let service = tower::service_fn(|_request: Request<kube::client::Body>| async {
        let status = serde_json::json!({
            "kind": "Status", "apiVersion": "v1", "status": "Failure",
            "reason": "NotFound", "code": 404, "message": "the server could not find the requested resource",
        });
        Ok::<_, Infallible>(
            Response::builder()
                .status(404)
                .header("content-type", "application/json")
                .body(kube::client::Body::from(status.to_string().into_bytes()))
                .expect("response"),
        )
    });
    kube::Client::new(service, "default")
}

#[tokio::test(start_paused = true)]
async fn without_the_resource_api_the_controller_stays_idle_and_ready() {
    let metrics = Arc::new(Metrics::new().unwrap());
    let base = ClaimControllerBase::new(empty_server(), metrics, ClaimControllerConfig::default())
        .unwrap();
    let readiness = base.readiness();
    let run = tokio::spawn(base.run(
        async { true },
        std::future::pending(),
        tokio::time::sleep(std::time::Duration::from_secs(600)),
    ));
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    assert!(readiness.is_ready(), "ready, with nothing to do");
    assert!(run.await.unwrap().is_ok(), "no failing watch stops it");
}
