//! The response body type shared by the tower service and the TCP
//! listener, and helpers to build JSON responses.

use super::status::ApiError;
use bytes::Bytes;
use http_body_util::{BodyExt, Full, combinators::UnsyncBoxBody};
use serde_json::Value;
use std::convert::Infallible;

/// A response body: either a whole JSON document or a stream of watch events.
pub type ResponseBody = UnsyncBoxBody<Bytes, Infallible>;

/// A complete body from bytes.
pub fn full(bytes: impl Into<Bytes>) -> ResponseBody {
    Full::new(bytes.into()).boxed_unsync()
}

/// A JSON response with the given code.
pub fn json_response(code: u16, value: &Value) -> http::Response<ResponseBody> {
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
pub fn error_response(err: &ApiError) -> http::Response<ResponseBody> {
    json_response(err.code, &err.to_status())
}
