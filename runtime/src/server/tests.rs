use super::*;
use axum::extract::Path;
use tower::ServiceExt;

fn state(metrics: Arc<Metrics>, health: Health) -> AdminState {
    AdminState {
        metrics,
        health,
        routes: Router::new(),
    }
}

#[test]
fn a_process_is_ready_once_marked_and_every_clone_sees_it() {
    let readiness = Readiness::default();
    let served = readiness.clone();
    assert!(!served.is_ready());
    readiness.set_ready();
    assert!(served.is_ready());
}

async fn get_path(router: Router, path: &str) -> (StatusCode, String) {
    let request = axum::http::Request::get(path)
        .body(axum::body::Body::empty())
        .unwrap();
    let response = router.oneshot(request).await.unwrap();
    let status = response.status();
    let body = axum::body::to_bytes(response.into_body(), 1 << 20)
        .await
        .unwrap();
    (status, String::from_utf8(body.to_vec()).unwrap())
}

#[tokio::test]
async fn ready_only_after_sync() {
    let metrics = Arc::new(Metrics::new().unwrap());
    let health = Health::default();
    let readiness = health.readiness.clone();
    let app = router(state(Arc::clone(&metrics), health.clone()));
    assert_eq!(get_path(app.clone(), "/livez").await.0, StatusCode::OK);
    assert_eq!(
        get_path(app.clone(), "/readyz").await.0,
        StatusCode::SERVICE_UNAVAILABLE
    );
    readiness.set_ready();
    assert_eq!(get_path(app.clone(), "/readyz").await.0, StatusCode::OK);
    let (status, body) = get_path(app.clone(), "/metrics").await;
    assert_eq!(status, StatusCode::OK);
    assert!(body.contains("# TYPE pv_controller_leader gauge"));
    health
        .liveness
        .fail("the pod watch has been failing".to_string());
    let (status, body) = get_path(app.clone(), "/livez").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(
        body, "[-]controllers failed: reason withheld\nlivez check failed",
        "the failure's text is not told to a caller without credentials"
    );
    let (status, body) = get_path(app, "/healthz").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(
        body,
        "[-]controllers failed: reason withheld\nhealthz check failed"
    );
}

#[tokio::test]
async fn the_controllers_routes_come_after_the_processs_own() {
    let metrics = Arc::new(Metrics::new().unwrap());
    let routes = Router::new()
        .route(
            "/extra/{name}",
            get(|Path(name): Path<String>| async move { name }),
        )
        .route("/metrics", get(|| async { "overridden" }));
    let app = router(AdminState {
        routes,
        ..state(metrics, Health::default())
    });
    assert_eq!(
        get_path(app.clone(), "/extra/one").await,
        (StatusCode::OK, "one".to_string())
    );
    let (status, body) = get_path(app.clone(), "/metrics").await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        body.contains("# TYPE pv_controller_leader gauge"),
        "a controller's route does not override the process's: {body}"
    );
    assert_eq!(get_path(app, "/nowhere").await.0, StatusCode::NOT_FOUND);
}

/// `0.0.0.0` listens on both IP families where the host has IPv6 (as
/// kube-controller-manager), and on IPv4 alone where it has not.
#[tokio::test]
async fn an_unspecified_address_listens_on_both_families() {
    let listener = listen("0.0.0.0:0".parse().unwrap()).await.unwrap();
    let local = listener.local_addr().unwrap();
    let mut families = vec![SocketAddr::from(([127, 0, 0, 1], local.port()))];
    let host_has_ipv6 = std::net::TcpListener::bind("[::1]:0").is_ok();
    if host_has_ipv6 {
        families.push(SocketAddr::from((Ipv6Addr::LOCALHOST, local.port())));
    }
    for address in families {
        let (connected, accepted) =
            tokio::join!(tokio::net::TcpStream::connect(address), listener.accept());
        let (connected, accepted) = (connected.unwrap(), accepted.unwrap());
        assert_eq!(
            connected.local_addr().unwrap().port(),
            accepted.1.port(),
            "{address} reaches the listener"
        );
    }
}

#[test]
fn go_style_addresses() {
    assert_eq!(
        parse_bind_address(":10280").unwrap(),
        "0.0.0.0:10280".parse().unwrap()
    );
    assert_eq!(
        parse_bind_address("127.0.0.1:0").unwrap(),
        "127.0.0.1:0".parse().unwrap()
    );
    assert!(parse_bind_address("nonsense").is_err());
}
