//! Request handling shared by the tower service and the TCP listener:
//! routes a request, authorizes a named user's (see `rbac.rs`), consults
//! the reactors, runs the verb against the store and records the outcome
//! in the request stats.

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
use super::stats::RequestLogEntry;
use super::status::ApiError;
use super::store::WatchItem;
use super::table;
use super::watch::{self, WatchOptions};
use super::{Shared, lock};
use bytes::Bytes;
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

/// Serves one HTTP request, whatever its body type: reads the body, then
/// answers, or fails with [`ConnectionDropped`] when a reactor says so.
pub(crate) async fn serve_http<B>(
    shared: Arc<Shared>,
    req: http::Request<B>,
) -> Result<http::Response<ResponseBody>, ConnectionDropped>
where
    B: http_body::Body,
    B::Error: std::fmt::Display,
{
    let (parts, body) = req.into_parts();
    let bytes = match body.collect().await {
        Ok(c) => c.to_bytes(),
        Err(e) => {
            let err = ApiError::bad_request(format!("cannot read the request body: {e}"));
            return Ok(error_response(&err));
        }
    };
    match handle(shared, parts, bytes).await {
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
    let injected = match denied {
        Some(e) => Some(Outcome::Respond(error_response(&e))),
        None => before_serving(&shared, &info).await,
    };
    let mut lost_answer = None;
    let outcome = if let Some(o) = injected {
        o
    } else {
        let accept = header(&parts, http::header::ACCEPT);
        let content_type = header(&parts, http::header::CONTENT_TYPE);
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
        let resp = match serve(&shared, &req) {
            Ok(resp) => resp,
            Err(e) => error_response(&e),
        };
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
    });
    outcome
}

/// Whether `route` addresses a group version the server does not serve
/// now ([`MemApi::withhold`](crate::MemApi::withhold)): the API server's
/// mux answers those with a plain 404 page.
fn withheld(shared: &Shared, route: &Route) -> bool {
    let (group, version) = match route {
        Route::Resource(res) => (res.kind.group, res.kind.version),
        Route::GroupVersion(group, version) | Route::OpenApi(group, version) => {
            (group.as_str(), version.as_str())
        }
        _ => return false,
    };
    let withheld = lock(&shared.withheld);
    !group.is_empty() && withheld.contains(&format!("{group}/{version}"))
}

/// The user a request names: by its bearer token (401 when unknown) or by
/// impersonation headers; `None` when it names nobody.
fn user_of(shared: &Shared, parts: &http::request::Parts) -> Result<Option<User>, ApiError> {
    let impersonated = header(parts, IMPERSONATE_USER);
    if !impersonated.is_empty() {
        let groups = parts
            .headers
            .get_all(IMPERSONATE_GROUP)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .map(str::to_string);
        return Ok(Some(User::new(&impersonated, groups)));
    }
    let authorization = header(parts, http::header::AUTHORIZATION);
    let Some(token) = authorization.strip_prefix("Bearer ") else {
        return Ok(None);
    };
    lock(&shared.access)
        .identity(token.trim())
        .map(|(name, groups)| Some(User::new(name, groups.iter().cloned())))
        .ok_or_else(|| ApiError::from_code(401, "Unauthorized"))
}

/// The header naming the user a request impersonates.
const IMPERSONATE_USER: &str = "impersonate-user";
/// The header naming a group of the impersonated user (repeated).
const IMPERSONATE_GROUP: &str = "impersonate-group";

/// Runs the reactors that act before a request is served: waits out their
/// delays, and returns the injected error or drop, if any.
async fn before_serving(shared: &Shared, info: &RequestInfo<'_>) -> Option<Outcome> {
    let actions = lock(&shared.reactors).react(info);
    let mut outcome = None;
    for action in actions {
        match action {
            Action::Delay(d) => tokio::time::sleep(d).await,
            Action::Error {
                code,
                message,
                retry_after,
            } => {
                outcome = Some(Outcome::Respond(injected_error(code, message, retry_after)));
            }
            Action::DropConnection => outcome = Some(Outcome::Drop),
        }
    }
    outcome
}

/// Runs the after-commit reactors on the answer of a successful write:
/// waits out their delays and replaces the answer with their error or
/// drop. Returns the outcome and, when the answer was replaced, its code.
async fn after_commit(
    shared: &Shared,
    info: &RequestInfo<'_>,
    resp: http::Response<ResponseBody>,
) -> (Outcome, Option<u16>) {
    let code = resp.status().as_u16();
    if !info.verb.is_write() || !resp.status().is_success() {
        return (Outcome::Respond(resp), None);
    }
    let actions = lock(&shared.reactors).react_after_commit(info);
    let mut outcome = Outcome::Respond(resp);
    let mut lost = None;
    for action in actions {
        match action {
            Action::Delay(d) => tokio::time::sleep(d).await,
            Action::Error {
                code: c,
                message,
                retry_after,
            } => {
                outcome = Outcome::Respond(injected_error(c, message, retry_after));
                lost = Some(code);
            }
            Action::DropConnection => {
                outcome = Outcome::Drop;
                lost = Some(code);
            }
        }
    }
    (outcome, lost)
}

/// The answer of a reactor's error: a `Status`, with a `Retry-After`
/// header and `details.retryAfterSeconds` when the reactor gives one.
fn injected_error(
    code: u16,
    message: String,
    retry_after: Option<u32>,
) -> http::Response<ResponseBody> {
    let error = ApiError::from_code(code, message);
    let Some(seconds) = retry_after else {
        return error_response(&error);
    };
    let mut status = error.to_status();
    status["details"] = json!({ "retryAfterSeconds": seconds });
    let mut response = json_response(code, &status);
    response
        .headers_mut()
        .insert(http::header::RETRY_AFTER, http::HeaderValue::from(seconds));
    response
}

fn header(parts: &http::request::Parts, name: impl http::header::AsHeaderName) -> String {
    parts
        .headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string()
}

/// The verb of a request, refusing shapes memapi does not serve.
fn verb_of(method: &http::Method, res: &ResourceRoute, query: &Query) -> Result<Verb, ApiError> {
    match res.subresource.as_deref() {
        None => {}
        Some("status") if res.kind.has_status && res.name.is_some() => {}
        Some(sub) => {
            return Err(ApiError::from_code(
                404,
                format!("{} has no subresource {sub:?}", res.kind.plural),
            ));
        }
    }
    if res.kind.namespaced && res.name.is_some() && res.namespace.is_none() {
        return Err(ApiError::no_route(
            "a namespaced object needs a namespace in the URL",
        ));
    }
    let one = res.name.is_some();
    let verb = match *method {
        http::Method::GET if one => Verb::Get,
        http::Method::GET if query.flag("watch") => Verb::Watch,
        http::Method::GET => Verb::List,
        http::Method::POST if !one => Verb::Create,
        http::Method::PUT if one => Verb::Update,
        http::Method::PATCH if one => Verb::Patch,
        http::Method::DELETE if one => Verb::Delete,
        http::Method::DELETE => Verb::DeleteCollection,
        _ => {
            return Err(ApiError::method_not_allowed(format!(
                "{method} is not supported on this URL"
            )));
        }
    };
    Ok(verb)
}

/// One request, parsed far enough to serve.
struct Req<'a> {
    verb: Verb,
    /// The user named by the request, if any.
    user: Option<&'a User>,
    res: &'a ResourceRoute,
    query: &'a Query,
    accept: &'a str,
    content_type: &'a str,
    body: &'a Bytes,
    /// The `User-Agent`.
    agent: &'a str,
}

impl Req<'_> {
    fn namespace(&self) -> &str {
        self.res.namespace.as_deref().unwrap_or_default()
    }

    fn name(&self) -> &str {
        self.res.name.as_deref().unwrap_or_default()
    }

    /// Who the write is recorded as in `managedFields`: `fieldManager`,
    /// else the first word of the `User-Agent`, as the API server names it.
    fn manager(&self) -> &str {
        match self.query.get("fieldManager").filter(|m| !m.is_empty()) {
            Some(manager) => manager,
            None => self.agent.split('/').next().unwrap_or_default(),
        }
    }

    fn part(&self) -> Part {
        if self.res.subresource.is_some() {
            Part::Status
        } else {
            Part::Main
        }
    }

    /// The request body as an object (JSON, or YAML when sent as YAML).
    fn object(&self) -> Result<Value, ApiError> {
        let value: Value = if self.content_type.contains("yaml") {
            serde_saphyr::from_slice(self.body)
                .map_err(|e| ApiError::bad_request(format!("the body is not valid YAML: {e}")))?
        } else {
            serde_json::from_slice(self.body)
                .map_err(|e| ApiError::bad_request(format!("the body is not valid JSON: {e}")))?
        };
        Ok(value)
    }

    /// The DeleteOptions of a DELETE: the body, if any, with a
    /// `gracePeriodSeconds` query parameter filled in when the body has none.
    fn delete_options(&self) -> Result<Option<Value>, ApiError> {
        let mut options = if self.body.iter().all(u8::is_ascii_whitespace) {
            None
        } else {
            Some(self.object()?)
        };
        if let Some(grace) = self
            .query
            .get("gracePeriodSeconds")
            .filter(|g| !g.is_empty())
        {
            let grace: i64 = grace.parse().map_err(|_| {
                ApiError::bad_request(format!("invalid gracePeriodSeconds {grace:?}"))
            })?;
            let opts = options.get_or_insert_with(|| json!({}));
            if opts.get("gracePeriodSeconds").is_none_or(Value::is_null) {
                super::object::set_at(opts, "gracePeriodSeconds", json!(grace));
            }
        }
        Ok(options)
    }

    fn filter(&self) -> Result<Filter, ApiError> {
        Ok(Filter {
            namespace: self.res.namespace.clone(),
            labels: LabelSelector::parse(self.query.get("labelSelector").unwrap_or_default())?,
            fields: FieldSelector::parse(
                self.query.get("fieldSelector").unwrap_or_default(),
                self.res.kind,
            )?,
        })
    }

    /// One object, as JSON or as a kubectl Table.
    fn respond_object(&self, code: u16, obj: &Value) -> http::Response<ResponseBody> {
        if table::wants_table(self.accept) {
            json_response(
                code,
                &table::table(self.res.kind, &[obj], None, self.include_object()),
            )
        } else {
            json_response(code, obj)
        }
    }

    fn include_object(&self) -> bool {
        self.query.get("includeObject") == Some("Object")
    }
}

fn serve(shared: &Arc<Shared>, req: &Req<'_>) -> Result<http::Response<ResponseBody>, ApiError> {
    let kind = req.res.kind;
    if kind.is_review() {
        if req.verb != Verb::Create {
            return Err(ApiError::from_code(
                405,
                format!("{} can only be created", kind.plural),
            ));
        }
        let body = req.object()?;
        let answer = reviews::answer(&lock(&shared.access), kind.kind, body)?;
        return Ok(req.respond_object(201, &answer));
    }
    let url_ns = req.res.namespace.as_deref();
    match req.verb {
        Verb::Get => {
            let obj = lock(&shared.store)
                .get(kind, req.namespace(), req.name())
                .ok_or_else(|| ApiError::not_found(kind.group, kind.plural, req.name()))?;
            Ok(req.respond_object(200, &obj))
        }
        Verb::List => list(shared, req),
        Verb::Watch => watch(shared, req),
        Verb::Create => {
            let body = req.object()?;
            let obj = ops::create(
                &mut lock(&shared.store),
                kind,
                url_ns,
                body,
                Origin::Api(req.user, req.manager()),
            )?;
            Ok(req.respond_object(201, &obj))
        }
        Verb::Update => {
            let body = req.object()?;
            let obj = ops::update(
                &mut lock(&shared.store),
                kind,
                url_ns,
                req.name(),
                body,
                req.part(),
                ops::Writer {
                    user: req.user,
                    manager: Some(req.manager()),
                },
            )?;
            Ok(req.respond_object(200, &obj))
        }
        Verb::Patch => {
            let patch_type = PatchType::from_content_type(req.content_type).ok_or_else(|| {
                ApiError::from_code(
                    415,
                    format!(
                        "the patch content type {:?} is not supported",
                        req.content_type
                    ),
                )
            })?;
            let request = ops::PatchRequest {
                patch_type,
                body: req.body,
                field_manager: req.query.get("fieldManager"),
                force: req.query.flag("force"),
            };
            let obj = ops::patch(
                &mut lock(&shared.store),
                kind,
                url_ns,
                req.name(),
                &request,
                req.part(),
                ops::Writer {
                    user: req.user,
                    manager: Some(req.manager()),
                },
            )?;
            Ok(req.respond_object(200, &obj))
        }
        Verb::Delete => {
            let options = req.delete_options()?;
            let obj = delete::delete(
                &mut lock(&shared.store),
                kind,
                req.namespace(),
                req.name(),
                options.as_ref(),
            )?;
            Ok(req.respond_object(200, &obj))
        }
        Verb::DeleteCollection => {
            let options = req.delete_options()?;
            let filter = req.filter()?;
            let answers = delete::delete_collection(
                &mut lock(&shared.store),
                kind,
                &filter,
                options.as_ref(),
            )?;
            let metadata = json!({ "resourceVersion": lock(&shared.store).rv().to_string() });
            Ok(list_response(kind, &metadata, &answers))
        }
    }
}

/// Encodes a continue token: the list's version and the last key served.
fn encode_continue(rv: u64, ns: &str, name: &str) -> String {
    format!("{rv}|{ns}|{name}")
        .bytes()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Decodes a continue token into (version, namespace, name).
fn decode_continue(token: &str) -> Result<(u64, String, String), ApiError> {
    let bad = || ApiError::bad_request(format!("invalid continue token {token:?}"));
    let bytes = (0..token.len())
        .step_by(2)
        .map(|i| {
            token
                .get(i..i + 2)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        })
        .collect::<Option<Vec<u8>>>()
        .ok_or_else(bad)?;
    let text = String::from_utf8(bytes).map_err(|_| bad())?;
    let mut parts = text.splitn(3, '|');
    let rv = parts.next().and_then(|r| r.parse().ok()).ok_or_else(bad)?;
    let ns = parts.next().ok_or_else(bad)?.to_string();
    let name = parts.next().ok_or_else(bad)?.to_string();
    Ok((rv, ns, name))
}

fn list(shared: &Arc<Shared>, req: &Req<'_>) -> Result<http::Response<ResponseBody>, ApiError> {
    let kind = req.res.kind;
    let filter = req.filter()?;
    let limit = match req.query.get("limit") {
        None | Some("") | Some("0") => None,
        Some(l) => Some(
            l.parse::<usize>()
                .map_err(|_| ApiError::bad_request(format!("invalid limit {l:?}")))?,
        ),
    };
    let after = match req.query.get("continue").filter(|c| !c.is_empty()) {
        Some(token) => Some(decode_continue(token)?),
        None => None,
    };
    let store = lock(&shared.store);
    let list_rv = after.as_ref().map_or(store.rv(), |(rv, _, _)| *rv);
    let after_key = after.map(|(_, ns, name)| (ns, name));
    let mut matching = store
        .iter_after(kind, after_key.as_ref())
        .filter(|(_, obj)| filter.matches(obj))
        .map(|(_, obj)| obj.clone());
    let items: Vec<_> = match limit {
        Some(n) => matching.by_ref().take(n).collect(),
        None => matching.by_ref().collect(),
    };
    // Whether a page follows; `remainingItemCount`, which the API server
    // may leave out, is left out: counting would walk the whole rest of the
    // list for every page.
    let more = matching.next().is_some();
    drop(matching);
    drop(store);
    let mut metadata = json!({ "resourceVersion": list_rv.to_string() });
    if more && let Some(last) = items.last() {
        metadata["continue"] = json!(encode_continue(
            list_rv,
            super::object::namespace(last),
            super::object::name(last)
        ));
    }
    if table::wants_table(req.accept) {
        let refs: Vec<&Value> = items.iter().map(AsRef::as_ref).collect();
        return Ok(json_response(
            200,
            &table::table(kind, &refs, Some(metadata), req.include_object()),
        ));
    }
    Ok(list_response(kind, &metadata, &items))
}

/// A `<Kind>List` of `items` with this list metadata: the answer to a list
/// and to a DeleteCollection.
fn list_response(
    kind: &ResourceKind,
    metadata: &Value,
    items: &[Arc<Value>],
) -> http::Response<ResponseBody> {
    let items: Vec<&Value> = items.iter().map(AsRef::as_ref).collect();
    json_response(
        200,
        &json!({
            "kind": format!("{}List", kind.kind),
            "apiVersion": kind.api_version(),
            "metadata": metadata,
            "items": items,
        }),
    )
}

fn watch(shared: &Arc<Shared>, req: &Req<'_>) -> Result<http::Response<ResponseBody>, ApiError> {
    let kind = req.res.kind;
    let filter = req.filter()?;
    let from = match req.query.get("resourceVersion").filter(|v| !v.is_empty()) {
        None => None,
        Some(v) => Some(
            v.parse::<u64>()
                .map_err(|_| ApiError::bad_request(format!("invalid resourceVersion {v:?}")))?,
        )
        .filter(|v| *v != 0),
    };
    let timeout = match req.query.get("timeoutSeconds").filter(|v| !v.is_empty()) {
        None => DEFAULT_WATCH_TIMEOUT,
        Some(t) => Duration::from_secs(
            t.parse::<u64>()
                .map_err(|_| ApiError::bad_request(format!("invalid timeoutSeconds {t:?}")))?,
        ),
    };
    let initial_events = req.query.flag("sendInitialEvents");
    let opts = WatchOptions {
        kind,
        timeout,
        bookmarks: req.query.flag("allowWatchBookmarks"),
        as_table: table::wants_table(req.accept),
    };
    let registered = lock(&shared.store).watch(kind, filter, from, initial_events);
    let (rx, initial) = match registered {
        Ok(rx) => (rx, Vec::new()),
        Err(gone) => {
            let (_tx, rx) = tokio::sync::mpsc::unbounded_channel();
            (rx, vec![WatchItem::Error(gone)])
        }
    };
    let body = watch::stream_body(shared.store.clone(), rx, initial, opts);
    let mut resp = http::Response::new(body);
    resp.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    Ok(resp)
}
