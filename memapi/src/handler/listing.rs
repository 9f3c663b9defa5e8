//! Lists and watches. A list comes in pages with continue tokens; every
//! page after the first is served from the snapshot at the first page's
//! version, as etcd serves it, and a token whose version the history no
//! longer reaches is 410 Expired.

use super::*;

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

pub(super) fn list(
    shared: &Arc<Shared>,
    req: &Req<'_>,
) -> Result<http::Response<ResponseBody>, ApiError> {
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
    let at = after.as_ref().map(|(rv, _, _)| *rv);
    let after_key = after.map(|(_, ns, name)| (ns, name));
    // One more than the page, to tell whether a page follows;
    // `remainingItemCount`, which the API server may leave out, is left
    // out: counting would walk the whole rest of the list for every page.
    let mut items = store.page_at(
        kind,
        at,
        after_key.as_ref(),
        limit.map(|n| n.saturating_add(1)),
        |obj| filter.matches(obj),
    )?;
    drop(store);
    let more = limit.is_some_and(|n| items.len() > n);
    if let Some(n) = limit {
        items.truncate(n);
    }
    let mut metadata = json!({ "resourceVersion": list_rv.to_string() });
    if more && let Some(last) = items.last() {
        metadata["continue"] = json!(encode_continue(
            list_rv,
            crate::object::namespace(last),
            crate::object::name(last)
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
pub(super) fn list_response(
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

pub(super) fn watch(
    shared: &Arc<Shared>,
    req: &Req<'_>,
) -> Result<http::Response<ResponseBody>, ApiError> {
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
