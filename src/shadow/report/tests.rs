use std::time::Duration;

use axum::body::Body;
use axum::http::Request;
use tower::ServiceExt;

use super::*;
use crate::runtime::metrics::Metrics;
use crate::shadow::ShadowConfig;

#[tokio::test(start_paused = true)]
async fn the_report_is_served_as_json() {
    let metrics = Metrics::new().unwrap();
    let config = ShadowConfig {
        window: Duration::from_secs(30),
    };
    let shadow = Arc::new(Comparison::new(&config, &metrics).unwrap());
    let claim = |volume: Option<&str>| {
        testkit::claim("c", "c-uid", "1Gi")
            .namespace("ns")
            .volume_name(volume.unwrap_or_default())
            .build()
    };
    super::super::tests::intend(
        &shadow,
        "persistentvolume-binder-controller",
        "persistentvolumeclaims",
        crate::runtime::plan::Verb::Update,
        Some(&claim(None)),
        Some(&claim(Some("v1"))),
    );
    tokio::time::advance(Duration::from_secs(31)).await;
    shadow.sweep();
    let answer = route(shadow)
        .oneshot(Request::get("/shadow").body(Body::empty()).unwrap())
        .await
        .unwrap();
    assert_eq!(answer.status(), StatusCode::OK);
    let body = axum::body::to_bytes(answer.into_body(), usize::MAX)
        .await
        .unwrap();
    let report: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(report["window_seconds"], 30);
    assert_eq!(report["counts"][0]["differ"], 1, "{report:#}");
    let difference = &report["differences"][0];
    assert_eq!(difference["object"], "persistentvolumeclaims ns/c");
    assert_eq!(difference["ours"], "bind to volume v1");
    assert_eq!(difference["upstream"], "nothing within 30s");
    assert!(difference["at"].as_str().is_some(), "{report:#}");
}
