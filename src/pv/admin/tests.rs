use tower::ServiceExt;

use super::*;

#[tokio::test]
async fn without_the_controller_every_claim_is_a_404_status() {
    let request = axum::http::Request::get("/explain/ns/claim")
        .body(axum::body::Body::empty())
        .unwrap();
    let response = routes(None).oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
    assert_eq!(response.headers()[header::CONTENT_TYPE], "application/json");
    let body = axum::body::to_bytes(response.into_body(), 1 << 20)
        .await
        .unwrap();
    let status: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(status["kind"], "Status");
    assert_eq!(status["code"], 404);
    assert_eq!(status["reason"], "NotFound");
    assert_eq!(
        status["message"],
        "the PersistentVolume controller does not run in this process"
    );
}
