//! The response body type shared by the tower service and the TCP
//! listener, and helpers to build JSON responses.

use super::status::ApiError;
use bytes::Bytes;
use http_body_util::{BodyExt, Full, combinators::UnsyncBoxBody};
use serde_json::Value;

/// A response body: either a whole JSON document or a stream of watch
/// events, which fails with [`StreamCut`] when its connection is cut.
pub type ResponseBody = UnsyncBoxBody<Bytes, StreamCut>;

/// The error a watch stream ends with when its connection is cut
/// ([`MemApi::cut_watches`](crate::MemApi::cut_watches)), as a broken
/// socket ends a real one mid-stream.
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("watch stream cut by the in-memory API server (injected fault)")]
pub struct StreamCut;

/// A complete body from bytes.
pub(crate) fn full(bytes: impl Into<Bytes>) -> ResponseBody {
    Full::new(bytes.into())
        .map_err(|never| match never {})
        .boxed_unsync()
}

/// A JSON response with the given code.
pub(crate) fn json_response(code: u16, value: &Value) -> http::Response<ResponseBody> {
    let bytes = serde_json::to_vec(value).unwrap_or_default();
    let mut resp = http::Response::new(full(bytes));
    *resp.status_mut() =
        http::StatusCode::from_u16(code).unwrap_or(http::StatusCode::INTERNAL_SERVER_ERROR);
    resp.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    resp
}

/// The `Status` response for a refused request.
pub(crate) fn error_response(err: &ApiError) -> http::Response<ResponseBody> {
    json_response(err.code, &err.to_status())
}
