//! Kubernetes `Status` bodies for failed requests.
//!
//! Every refusal of the in-memory API server is an [`ApiError`], rendered
//! as the `Status` object a real apiserver sends, so that kube-rs turns it
//! into `kube::Error::Api` with the right code and reason.

use serde_json::{Value, json};

/// A refused request: HTTP code, machine-readable reason, human message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code} {reason}: {message}")]
pub struct ApiError {
    /// HTTP status code (404, 409, ...).
    pub code: u16,
    /// The `Status.reason` (NotFound, AlreadyExists, Conflict, ...).
    pub reason: String,
    /// The `Status.message`.
    pub message: String,
    /// `Status.details` (name, group, kind), when the error is about one object.
    pub details: Option<Box<Details>>,
}

/// The object an error is about, as in `Status.details`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Details {
    /// Object name.
    pub name: String,
    /// API group ("" for core).
    pub group: String,
    /// Resource plural, as the real apiserver puts it in `details.kind`
    /// (the Kind instead for 422 Invalid, as the real one does).
    pub kind: String,
    /// `details.causes`: one per field a 422 Invalid is about.
    pub causes: Vec<Cause>,
}

/// One field error of a 422 Invalid, as in `Status.details.causes`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cause {
    /// The cause type: `FieldValueRequired`, `FieldValueInvalid`, `FieldValueForbidden`.
    pub reason: String,
    /// What is wrong, without the field path (`Invalid value: "": does not match event.namespace`).
    pub message: String,
    /// The field path (`involvedObject.namespace`).
    pub field: String,
}

/// The `Status.reason` a real apiserver uses for a given HTTP code.
pub(crate) fn reason_for_code(code: u16) -> &'static str {
    match code {
        400 => "BadRequest",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "NotFound",
        405 => "MethodNotAllowed",
        406 => "NotAcceptable",
        409 => "Conflict",
        410 => "Expired",
        413 => "RequestEntityTooLarge",
        415 => "UnsupportedMediaType",
        422 => "Invalid",
        429 => "TooManyRequests",
        500 => "InternalError",
        503 => "ServiceUnavailable",
        504 => "Timeout",
        _ => "Unknown",
    }
}

impl ApiError {
    /// An error with the reason derived from the code.
    pub fn from_code(code: u16, message: impl Into<String>) -> Self {
        Self {
            code,
            reason: reason_for_code(code).to_string(),
            message: message.into(),
            details: None,
        }
    }

    /// 400 BadRequest.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::from_code(400, message)
    }

    /// 404 for a URL that names no resource at all.
    pub fn no_route(path: &str) -> Self {
        Self::from_code(
            404,
            format!("the server could not find the requested resource ({path})"),
        )
    }

    /// 405 for a verb the resource does not support.
    pub fn method_not_allowed(message: impl Into<String>) -> Self {
        Self::from_code(405, message)
    }

    /// 404 NotFound for one object.
    pub fn not_found(group: &str, plural: &str, name: &str) -> Self {
        Self::from_code(
            404,
            format!("{} \"{name}\" not found", qualified(group, plural)),
        )
        .with_details(group, plural, name)
    }

    /// 403 Forbidden for one object, as an admission plugin's refusal.
    pub fn forbidden(group: &str, plural: &str, name: &str, why: &str) -> Self {
        Self::from_code(
            403,
            format!(
                "{} \"{name}\" is forbidden: {why}",
                qualified(group, plural)
            ),
        )
        .with_details(group, plural, name)
    }

    /// 409 AlreadyExists for a create of an existing name.
    pub fn already_exists(group: &str, plural: &str, name: &str) -> Self {
        let mut e = Self::from_code(
            409,
            format!("{} \"{name}\" already exists", qualified(group, plural)),
        )
        .with_details(group, plural, name);
        e.reason = "AlreadyExists".to_string();
        e
    }

    /// 409 Conflict for a stale resourceVersion or a failed precondition.
    pub fn conflict(group: &str, plural: &str, name: &str, why: &str) -> Self {
        Self::from_code(
            409,
            format!(
                "Operation cannot be fulfilled on {} \"{name}\": {why}",
                qualified(group, plural)
            ),
        )
        .with_details(group, plural, name)
    }

    /// 422 Invalid for an object that fails validation. The message names
    /// the kind as `Kind` (core) or `Kind.group`, as the real apiserver does.
    pub fn invalid(group: &str, kind: &str, name: &str, why: &str) -> Self {
        Self::from_code(
            422,
            format!("{} \"{name}\" is invalid: {why}", qualified(group, kind)),
        )
        .with_details(group, kind, name)
    }

    /// 410 Expired for a watch from a compacted resourceVersion.
    pub fn gone(rv: u64, oldest: u64) -> Self {
        Self::from_code(410, format!("too old resource version: {rv} ({oldest})"))
    }

    /// 410 Expired for a continue token whose version the history no
    /// longer reaches, in the API server's words.
    pub fn continue_expired() -> Self {
        Self::from_code(
            410,
            "The provided continue parameter is too old to display a consistent list result. \
             You can start a new list without the continue parameter, or use the continue token \
             in this response to retrieve the remainder of the results. Continuing with the \
             provided token results in an inconsistent list - objects that were created, \
             modified, or deleted between the time the first chunk was returned and now may \
             show up in the list.",
        )
    }

    /// 422 Invalid with one cause per field error, message and details as
    /// apimachinery's `NewInvalid` builds them: `Kind "name" is invalid: `
    /// then the errors (one, or several as `[a, b]`, duplicates dropped).
    pub fn invalid_fields(group: &str, kind: &str, name: &str, causes: Vec<Cause>) -> Self {
        let mut seen: Vec<String> = Vec::new();
        for c in &causes {
            let text = format!("{}: {}", c.field, c.message);
            if !seen.contains(&text) {
                seen.push(text);
            }
        }
        let why = match seen.as_slice() {
            [one] => one.clone(),
            many => format!("[{}]", many.join(", ")),
        };
        let mut e = Self::invalid(group, kind, name, &why);
        if let Some(d) = e.details.as_mut() {
            d.causes = causes;
        }
        e
    }

    fn with_details(mut self, group: &str, kind: &str, name: &str) -> Self {
        self.details = Some(Box::new(Details {
            name: name.to_string(),
            group: group.to_string(),
            kind: kind.to_string(),
            causes: Vec::new(),
        }));
        self
    }

    /// The `Status` object, as JSON.
    pub fn to_status(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if let (Some(d), Some(obj)) = (&self.details, status.as_object_mut()) {
            let mut details = json!({ "name": d.name, "kind": d.kind });
            if !d.group.is_empty() {
                details["group"] = json!(d.group);
            }
            if !d.causes.is_empty() {
                let causes: Vec<Value> = d
                    .causes
                    .iter()
                    .map(|c| json!({ "reason": c.reason, "message": c.message, "field": c.field }))
                    .collect();
                details["causes"] = json!(causes);
            }
            obj.insert("details".to_string(), details);
        }
        status
    }
}

/// `plural.group` (or `Kind.group`), or just `plural` for the core group, as in messages.
fn qualified(group: &str, plural: &str) -> String {
    if group.is_empty() {
        plural.to_string()
    } else {
        format!("{plural}.{group}")
    }
}
