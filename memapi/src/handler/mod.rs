//! Request handling shared by the tower service and the TCP listener:
//! reads the body (at most [`MAX_BODY_BYTES`], as kube-apiserver), routes a
//! request, authorizes a named user's ([`access`], `rbac.rs`), consults the
//! reactors ([`faults`]), runs the verb against the store ([`request`],
//! [`verbs`], [`listing`]) and records the outcome in the request stats.

mod access;
mod faults;
mod in_flight;
mod listing;
mod request;
mod verbs;

use access::{user_of, withheld};
use faults::{after_commit, before_serving};
use request::{Req, preconditions, verb_of};
use verbs::serve;

use super::body::{ResponseBody, error_response, json_response};
use super::delete;
use super::discovery;
use super::ops::{self, Origin};
use super::patch::PatchType;
use super::rbac::{Attributes, User};
use super::reactors::{Action, RequestInfo, Verb};
use super::resources::{Part, ResourceKind};
use super::reviews;
use super::route::{self, Query, ResourceRoute, Route};
use super::selectors::{FieldSelector, Filter, LabelSelector};
use super::stats::{Preconditions, RequestLogEntry};
use super::status::ApiError;
use super::store::WatchItem;
use super::table;
use super::watch::{self, WatchOptions};
use super::{Shared, lock};
use bytes::{Buf, Bytes};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;

/// Default watch length when the client gives no `timeoutSeconds`.
const DEFAULT_WATCH_TIMEOUT: Duration = Duration::from_secs(1800);

/// The error a request fails with when a reactor drops its connection.
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("connection dropped by the in-memory API server (injected fault)")]
pub struct ConnectionDropped;

/// What the server does with a request.
enum Outcome {
    /// Answer.
    Respond(http::Response<ResponseBody>),
    /// Drop the connection (a reactor said so).
    Drop,
}

/// The most of a request body read: kube-apiserver's default
/// `--max-request-body-bytes` (3 MiB). A longer body is refused with a 413,
/// as the API server refuses it, without being read further.
pub const MAX_BODY_BYTES: usize = 3 * 1024 * 1024;

/// The API server's answer to a body over [`MAX_BODY_BYTES`].
fn body_too_large() -> http::Response<ResponseBody> {
    error_response(&ApiError::from_code(
        413,
        format!("Request entity too large: limit is {MAX_BODY_BYTES}"),
    ))
}

/// Serves one HTTP request, whatever its body type: reads the body (at
/// most [`MAX_BODY_BYTES`]), then answers, or fails with
/// [`ConnectionDropped`] when a reactor says so.
pub(crate) async fn serve_http<B>(
    shared: Arc<Shared>,
    req: http::Request<B>,
) -> Result<http::Response<ResponseBody>, ConnectionDropped>
where
    B: http_body::Body,
    B::Error: std::fmt::Display,
{
    let (parts, body) = req.into_parts();
    let declared = parts
        .headers
        .get(http::header::CONTENT_LENGTH)
        .and_then(|length| length.to_str().ok()?.parse::<usize>().ok());
    if declared.is_some_and(|length| length > MAX_BODY_BYTES) {
        return Ok(body_too_large());
    }
    let mut body = std::pin::pin!(body);
    let mut bytes = bytes::BytesMut::new();
    while let Some(frame) = body.frame().await {
        let frame = match frame {
            Ok(frame) => frame,
            Err(e) => {
                let err = ApiError::bad_request(format!("cannot read the request body: {e}"));
                return Ok(error_response(&err));
            }
        };
        if let Ok(mut data) = frame.into_data() {
            if bytes.len() + data.remaining() > MAX_BODY_BYTES {
                return Ok(body_too_large());
            }
            while data.has_remaining() {
                let chunk = data.chunk();
                bytes.extend_from_slice(chunk);
                let read = chunk.len();
                data.advance(read);
            }
        }
    }
    match handle(shared, parts, bytes.freeze()).await {
        Outcome::Respond(resp) => Ok(resp),
        Outcome::Drop => Err(ConnectionDropped),
    }
}

/// A real apiserver's answer to a path outside every API it serves.
fn page_not_found() -> http::Response<ResponseBody> {
    let mut resp = http::Response::new(crate::body::full(bytes::Bytes::from_static(
        b"404 page not found\n",
    )));
    *resp.status_mut() = http::StatusCode::NOT_FOUND;
    resp.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    resp
}

/// Handles one request whose body has been read.
async fn handle(shared: Arc<Shared>, parts: http::request::Parts, body: Bytes) -> Outcome {
    let path = parts.uri.path().to_string();
    let query = Query::parse(parts.uri.query());
    let route = match route::parse(&path) {
        Ok(r) => r,
        Err(e) => {
            tracing::debug!(method = %parts.method, %path, code = e.code, "memapi: no route");
            return Outcome::Respond(error_response(&e));
        }
    };
    if withheld(&shared, &route) {
        return Outcome::Respond(page_not_found());
    }
    let res = match route {
        Route::Version => return Outcome::Respond(json_response(200, &discovery::version())),
        Route::CoreVersions => {
            return Outcome::Respond(json_response(200, &discovery::core_versions()));
        }
        Route::Groups => {
            let withheld = lock(&shared.withheld);
            return Outcome::Respond(json_response(200, &discovery::groups(&withheld)));
        }
        Route::GroupVersion(g, v) => {
            return Outcome::Respond(json_response(200, &discovery::resource_list(&g, &v)));
        }
        Route::OpenApiIndex => {
            return Outcome::Respond(json_response(200, &discovery::openapi_index()));
        }
        Route::OpenApi(g, v) => {
            return Outcome::Respond(json_response(200, &discovery::openapi(&g, &v)));
        }
        Route::PageNotFound => return Outcome::Respond(page_not_found()),
        Route::Resource(res) => res,
    };
    let verb = match verb_of(&parts.method, &res, &query) {
        Ok(v) => v,
        Err(e) => return Outcome::Respond(error_response(&e)),
    };
    let info = RequestInfo {
        verb,
        group: res.kind.group,
        resource: res.kind.plural,
        name: res.name.as_deref(),
        subresource: res.subresource.as_deref(),
    };
    let user = match user_of(&shared, &parts) {
        Ok(user) => user,
        Err(e) => return Outcome::Respond(error_response(&e)),
    };
    let seat = in_flight::seat(&shared, verb);
    let denied = user.as_ref().and_then(|user| {
        let verb = verb.to_string();
        let attributes = Attributes {
            verb: &verb,
            group: res.kind.group,
            resource: res.kind.plural,
            subresource: res.subresource.as_deref(),
            namespace: res.namespace.as_deref().unwrap_or_default(),
            name: res.name.as_deref().unwrap_or_default(),
        };
        lock(&shared.store).rbac.authorize(user, &attributes).err()
    });
    let injected = match (seat.refusal(), denied) {
        (Some(refused), _) => Some(refused),
        (None, Some(e)) => Some(Outcome::Respond(error_response(&e))),
        (None, None) => before_serving(&shared, &info).await,
    };
    let mut lost_answer = None;
    let content_type = header(&parts, http::header::CONTENT_TYPE);
    let conditions = preconditions(verb, &content_type, &body);
    let apply = verb == Verb::Patch
        && PatchType::from_content_type(&content_type) == Some(PatchType::Apply);
    let mut commits = 0..0;
    let outcome = if let Some(o) = injected {
        o
    } else {
        let accept = header(&parts, http::header::ACCEPT);
        let agent = header(&parts, http::header::USER_AGENT);
        let req = Req {
            agent: &agent,
            verb,
            user: user.as_ref(),
            res: &res,
            query: &query,
            accept: &accept,
            content_type: &content_type,
            body: &body,
        };
        // Nothing else runs while a request is served (`serve` does not
        // wait), so on a current-thread runtime the versions between are
        // exactly this request's commits.
        let before = lock(&shared.store).rv();
        let resp = match serve(&shared, &req) {
            Ok(resp) => resp,
            Err(e) => error_response(&e),
        };
        commits = before + 1..lock(&shared.store).rv() + 1;
        let (outcome, lost) = after_commit(&shared, &info, resp).await;
        lost_answer = lost;
        outcome
    };
    let code = match &outcome {
        Outcome::Respond(r) => Some(r.status().as_u16()),
        Outcome::Drop => None,
    };
    tracing::debug!(
        %verb,
        resource = res.kind.plural,
        namespace = res.namespace.as_deref(),
        name = res.name.as_deref(),
        subresource = res.subresource.as_deref(),
        ?code,
        "memapi request"
    );
    lock(&shared.stats).record(RequestLogEntry {
        verb,
        group: res.kind.group.to_string(),
        resource: res.kind.plural.to_string(),
        namespace: res.namespace.clone(),
        name: res.name.clone(),
        subresource: res.subresource.clone(),
        user: user.map(|user| user.name),
        code,
        user_agent: parts
            .headers
            .get(http::header::USER_AGENT)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned),
        lost_answer,
        preconditions: conditions,
        apply,
        commits,
    });
    outcome
}

fn header(parts: &http::request::Parts, name: impl http::header::AsHeaderName) -> String {
    parts
        .headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string()
}
