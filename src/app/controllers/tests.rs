use std::convert::Infallible;
use std::time::Duration;

use http::{Request, Response};
use kube::client::ClientBuilder;

use crate::app::{App, AppConfig, ControllerSelection};
use crate::runtime::client::{ClientOptions, Clients};

/// An API server that serves nothing: every request is a 404.
fn empty_server() -> ClientBuilder<
    impl tower::Service<
        Request<kube::client::Body>,
        Response = Response<kube::client::Body>,
        Error = Infallible,
        Future = impl Send,
    > + Clone
    + Send
    + 'static,
> {
    let service = tower::service_fn(|_request: Request<kube::client::Body>| async {
        let status = serde_json::json!({
            "kind": "Status", "apiVersion": "v1", "status": "Failure",
            "reason": "NotFound", "code": 404,
            "message": "the server could not find the requested resource",
        });
        Ok::<_, Infallible>(
            Response::builder()
                .status(404)
                .header("content-type", "application/json")
                .body(kube::client::Body::from(status.to_string().into_bytes()))
                .expect("response"),
        )
    });
    ClientBuilder::new(service, "default")
}

#[tokio::test(start_paused = true)]
async fn without_its_api_the_resourceclaim_controller_does_not_run() {
    let clients = Clients::build(
        empty_server(),
        empty_server(),
        empty_server(),
        ClientOptions::default(),
    );
    let config = AppConfig {
        controllers: ControllerSelection::new(["resourceclaim-controller"]),
        ..AppConfig::default()
    };
    let app = App::start(clients, config)
        .await
        .expect("the process starts");
    assert!(app.controllers().resourceclaim.is_none());
    let idle = app.idle_probe();
    let result = app.run(tokio::time::sleep(Duration::from_secs(600))).await;
    assert!(result.is_ok(), "no failing watch stops it: {result:?}");
    assert!(idle.is_idle());
}
