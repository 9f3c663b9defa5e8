//! The controller's route on the process's admin server:
//! `GET /explain/{namespace}/{claim}`, why a claim is Pending (or bound as
//! it is), as JSON; a 404 with a Kubernetes `Status` (as the API server
//! answers, so kubectl-like clients read its message) for a claim the
//! controller does not know, or when the controller does not run in the
//! process. Served
//! behind the admin server's authentication and authorization, as every
//! route of it.

use std::sync::Arc;

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::pv::controller_base::Controller;
use crate::runtime::keys::ObjectKey;

/// The route, answered by `controller` (`None`: the controller does not
/// run in this process, and every claim is answered with a 404 saying so).
pub(crate) fn routes(controller: Option<Arc<Controller>>) -> Router {
    Router::new()
        .route("/explain/{namespace}/{claim}", get(serve_explain))
        .with_state(controller)
}

/// Why a claim is as it is, or a 404 `Status`.
async fn serve_explain(
    State(controller): State<Option<Arc<Controller>>>,
    Path((namespace, claim)): Path<(String, String)>,
) -> Response {
    let key = ObjectKey::new(&namespace, &claim);
    let found = match controller {
        // Judging every volume of a large index takes milliseconds: off the
        // runtime's threads, so the controllers' tasks go on meanwhile.
        Some(controller) => tokio::task::spawn_blocking(move || {
            controller
                .explain(&key)
                .and_then(|explanation| serde_json::to_value(explanation).ok())
        })
        .await
        .ok()
        .flatten()
        .ok_or_else(|| {
            format!("persistentvolumeclaims \"{claim}\" not found in namespace \"{namespace}\"")
        }),
        None => Err("the PersistentVolume controller does not run in this process".to_string()),
    };
    match found {
        Ok(body) => (
            [(header::CONTENT_TYPE, "application/json")],
            body.to_string(),
        )
            .into_response(),
        Err(error) => (
            StatusCode::NOT_FOUND,
            [(header::CONTENT_TYPE, "application/json")],
            serde_json::json!({
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Failure",
                "message": error,
                "reason": "NotFound",
                "code": 404,
            })
            .to_string(),
        )
            .into_response(),
    }
}

#[cfg(test)]
mod tests;
