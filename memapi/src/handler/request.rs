//! A request parsed far enough to serve: its verb, and its parts (the
//! object in its body, delete options, selectors, the answer's form).

use super::*;

/// The verb of a request, refusing shapes memapi does not serve.
pub(super) fn verb_of(
    method: &http::Method,
    res: &ResourceRoute,
    query: &Query,
) -> Result<Verb, ApiError> {
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
pub(super) struct Req<'a> {
    pub(super) verb: Verb,
    /// The user named by the request, if any.
    pub(super) user: Option<&'a User>,
    pub(super) res: &'a ResourceRoute,
    pub(super) query: &'a Query,
    pub(super) accept: &'a str,
    pub(super) content_type: &'a str,
    pub(super) body: &'a Bytes,
    /// The `User-Agent`.
    pub(super) agent: &'a str,
}

impl Req<'_> {
    pub(super) fn namespace(&self) -> &str {
        self.res.namespace.as_deref().unwrap_or_default()
    }

    pub(super) fn name(&self) -> &str {
        self.res.name.as_deref().unwrap_or_default()
    }

    /// Who the write is recorded as in `managedFields`: `fieldManager`,
    /// else the first word of the `User-Agent`, as the API server names it.
    pub(super) fn manager(&self) -> &str {
        match self.query.get("fieldManager").filter(|m| !m.is_empty()) {
            Some(manager) => manager,
            None => self.agent.split('/').next().unwrap_or_default(),
        }
    }

    /// The user and field manager a write is recorded as.
    pub(super) fn writer(&self) -> ops::Writer<'_> {
        ops::Writer {
            user: self.user,
            manager: Some(self.manager()),
        }
    }

    pub(super) fn part(&self) -> Part {
        if self.res.subresource.is_some() {
            Part::Status
        } else {
            Part::Main
        }
    }

    /// The request body as an object (JSON, or YAML when sent as YAML).
    pub(super) fn object(&self) -> Result<Value, ApiError> {
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
    pub(super) fn delete_options(&self) -> Result<Option<Value>, ApiError> {
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
                crate::object::set_at(opts, "gracePeriodSeconds", json!(grace));
            }
        }
        Ok(options)
    }

    pub(super) fn filter(&self) -> Result<Filter, ApiError> {
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
    pub(super) fn respond_object(&self, code: u16, obj: &Value) -> http::Response<ResponseBody> {
        if table::wants_table(self.accept) {
            json_response(
                code,
                &table::table(self.res.kind, &[obj], None, self.include_object()),
            )
        } else {
            json_response(code, obj)
        }
    }

    pub(super) fn include_object(&self) -> bool {
        self.query.get("includeObject") == Some("Object")
    }
}

/// What a write names as its preconditions (see [`Preconditions`]): read
/// from the body as sent, before any reactor or the store sees it, so a
/// write an injected fault failed is described too. A body that does not
/// parse names none.
pub(super) fn preconditions(verb: Verb, content_type: &str, body: &Bytes) -> Preconditions {
    let parsed = || -> Option<Value> {
        if content_type.contains("yaml") {
            serde_saphyr::from_slice(body).ok()
        } else {
            serde_json::from_slice(body).ok()
        }
    };
    let named = |meta: Option<&Value>, rv: &str, uid: &str| Preconditions {
        resource_version: meta
            .and_then(|m| m.get(rv))
            .and_then(Value::as_str)
            .map(str::to_owned),
        uid: meta
            .and_then(|m| m.get(uid))
            .and_then(Value::as_str)
            .map(str::to_owned),
    };
    match verb {
        Verb::Update => named(
            parsed().as_ref().and_then(|o| o.get("metadata")),
            "resourceVersion",
            "uid",
        ),
        Verb::Patch if PatchType::from_content_type(content_type) == Some(PatchType::Json) => {
            let mut found = Preconditions::default();
            for op in parsed()
                .as_ref()
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let value = op.get("value").and_then(Value::as_str).map(str::to_owned);
                match op.get("path").and_then(Value::as_str) {
                    Some("/metadata/resourceVersion") => found.resource_version = value,
                    Some("/metadata/uid") => found.uid = value,
                    _ => {}
                }
            }
            found
        }
        Verb::Patch => named(
            parsed().as_ref().and_then(|o| o.get("metadata")),
            "resourceVersion",
            "uid",
        ),
        Verb::Delete | Verb::DeleteCollection => named(
            parsed().as_ref().and_then(|o| o.get("preconditions")),
            "resourceVersion",
            "uid",
        ),
        Verb::Get | Verb::List | Verb::Watch | Verb::Create => Preconditions::default(),
    }
}
