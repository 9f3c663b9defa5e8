//! Validation as the real apiserver's (Kubernetes 1.20,
//! `pkg/apis/core/validation`), for the rules a controller can run into:
//! events (`legacyValidateEvent`, `ValidateEventCreate`) and the update
//! rules of volumes and claims (`ValidatePersistentVolumeUpdate`,
//! `ValidatePersistentVolumeClaimUpdate`), and resource.k8s.io/v1
//! ResourceSlices (`slices.rs`).
//!
//! A refusal is a 422 Invalid whose message, reason and `details.causes`
//! are built as apimachinery's `NewInvalid` builds them, so a client sees
//! the same Status it would get from a real server. Whole-object validation
//! of other fields (container specs, access modes, label syntax...) is not
//! ported.
//!
//! Validation applies to requests through the API only: the test levers
//! (`create`, `put`, `load_yaml`) store objects as the test wrote them.

mod events;
mod names;
mod slices;
mod volumes;

use super::resources::{Part, ResourceKind};
use super::status::{ApiError, Cause};
use serde_json::Value;

/// The kinds of field errors used here, as apimachinery's `field.ErrorType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ErrorType {
    /// A required field is empty (`Required value`).
    Required,
    /// A field has a value it may not have (`Invalid value: <value>`).
    Invalid,
    /// A change that is not allowed (`Forbidden`).
    Forbidden,
    /// A value given twice in a list of unique values (`Duplicate value`).
    Duplicate,
    /// A list longer than allowed (`Too many`).
    TooMany,
    /// A string longer than allowed (`Too long`).
    TooLong,
}

impl ErrorType {
    /// The `Status.details.causes[].reason` of this type.
    fn cause_reason(self) -> &'static str {
        match self {
            Self::Required => "FieldValueRequired",
            Self::Invalid => "FieldValueInvalid",
            Self::Forbidden => "FieldValueForbidden",
            Self::Duplicate => "FieldValueDuplicate",
            Self::TooMany => "FieldValueTooMany",
            Self::TooLong => "FieldValueTooLong",
        }
    }

    /// How the error body starts.
    fn text(self) -> &'static str {
        match self {
            Self::Required => "Required value",
            Self::Invalid => "Invalid value",
            Self::Forbidden => "Forbidden",
            Self::Duplicate => "Duplicate value",
            Self::TooMany => "Too many",
            Self::TooLong => "Too long",
        }
    }
}

/// One refused field: its path, the type of error, the offending value
/// (for Invalid) and a detail.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct FieldError {
    ty: ErrorType,
    field: String,
    value: Value,
    detail: String,
}

impl FieldError {
    /// `field: Required value[: detail]`.
    pub(crate) fn required(field: &str, detail: &str) -> Self {
        Self {
            ty: ErrorType::Required,
            field: field.to_string(),
            value: Value::Null,
            detail: detail.to_string(),
        }
    }

    /// `field: Invalid value: <value>[: detail]`.
    pub(crate) fn invalid(field: &str, value: impl Into<Value>, detail: &str) -> Self {
        Self {
            ty: ErrorType::Invalid,
            field: field.to_string(),
            value: value.into(),
            detail: detail.to_string(),
        }
    }

    /// `field: Forbidden[: detail]`.
    pub(crate) fn forbidden(field: &str, detail: &str) -> Self {
        Self {
            ty: ErrorType::Forbidden,
            field: field.to_string(),
            value: Value::Null,
            detail: detail.to_string(),
        }
    }

    /// `field: Duplicate value: <value>`.
    pub(crate) fn duplicate(field: &str, value: impl Into<Value>) -> Self {
        Self {
            ty: ErrorType::Duplicate,
            field: field.to_string(),
            value: value.into(),
            detail: String::new(),
        }
    }

    /// `field: Too many: <count>: must have at most <max> items`.
    pub(crate) fn too_many(field: &str, count: usize, max: usize) -> Self {
        Self {
            ty: ErrorType::TooMany,
            field: field.to_string(),
            value: count.into(),
            detail: format!("must have at most {max} items"),
        }
    }

    /// `field: Too long: may not be more than <max> bytes`.
    pub(crate) fn too_long(field: &str, max: usize) -> Self {
        Self {
            ty: ErrorType::TooLong,
            field: field.to_string(),
            value: Value::Null,
            detail: format!("may not be more than {max} bytes"),
        }
    }

    /// The error without its field path, as `field.Error.ErrorBody`:
    /// strings quoted, numbers and booleans bare, anything else as JSON.
    fn body(&self) -> String {
        let mut s = match self.ty {
            ErrorType::Required | ErrorType::Forbidden | ErrorType::TooLong => {
                self.ty.text().to_string()
            }
            ErrorType::Invalid | ErrorType::Duplicate | ErrorType::TooMany => {
                format!("{}: {}", self.ty.text(), render_value(&self.value))
            }
        };
        if !self.detail.is_empty() {
            s.push_str(": ");
            s.push_str(&self.detail);
        }
        s
    }

    fn cause(&self) -> Cause {
        Cause {
            reason: self.ty.cause_reason().to_string(),
            message: self.body(),
            field: self.field.clone(),
        }
    }
}

/// A bad value as Go's `%q` / `%v` print it.
fn render_value(v: &Value) -> String {
    match v {
        Value::Null => "null".to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        other => serde_json::to_string(other).unwrap_or_default(),
    }
}

/// Ok when there is no error; otherwise the 422 Invalid naming the object.
pub(crate) fn check(
    group: &str,
    kind: &str,
    name: &str,
    errs: &[FieldError],
) -> Result<(), ApiError> {
    if errs.is_empty() {
        return Ok(());
    }
    let causes = errs.iter().map(FieldError::cause).collect();
    Err(ApiError::invalid_fields(group, kind, name, causes))
}

/// The group a 422 about an object of this kind names. Both event APIs
/// store the same internal (core) Event, so their refusals name `Event`.
fn reported_group(kind: &ResourceKind) -> &'static str {
    if kind.kind == "Event" { "" } else { kind.group }
}

/// Validates an object a client creates (after defaults, before storing).
pub(crate) fn on_create(kind: &ResourceKind, obj: &Value) -> Result<(), ApiError> {
    let errs = if kind.kind == "Event" {
        events::validate_create(kind, obj)
    } else if kind.is_resource_slice() {
        slices::validate(obj)
    } else {
        Vec::new()
    };
    check(reported_group(kind), kind.kind, object_name(obj), &errs)
}

/// Validates an update (PUT or PATCH): `new` is the object about to be
/// stored, after the update strategy kept what it keeps from `old`.
pub(crate) fn on_update(
    kind: &ResourceKind,
    new: &Value,
    old: &Value,
    part: Part,
) -> Result<(), ApiError> {
    let errs = match (kind.group, kind.plural, part) {
        (_, "events", _) => events::validate_update(kind, new),
        ("", "persistentvolumes", Part::Main) => volumes::validate_pv_update(new, old),
        ("", "persistentvolumeclaims", Part::Main) => volumes::validate_pvc_update(new, old),
        ("resource.k8s.io", "resourceslices", _) => slices::validate_update(new, old),
        _ => Vec::new(),
    };
    check(reported_group(kind), kind.kind, object_name(new), &errs)
}

fn object_name(obj: &Value) -> &str {
    super::object::name(obj)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn bodies_and_aggregate_message_as_apimachinery() {
        let errs = vec![
            FieldError::invalid(
                "involvedObject.namespace",
                "",
                "does not match event.namespace",
            ),
            FieldError::required("reportingController", ""),
            FieldError::forbidden("spec", "spec is immutable"),
            FieldError::invalid("count", json!(3), ""),
        ];
        let err = check("", "Event", "e1", &errs).unwrap_err();
        assert_eq!(err.code, 422);
        assert_eq!(err.reason, "Invalid");
        assert_eq!(
            err.message,
            "Event \"e1\" is invalid: [involvedObject.namespace: Invalid value: \"\": does not match event.namespace, \
             reportingController: Required value, spec: Forbidden: spec is immutable, count: Invalid value: 3]"
        );
        let causes = &err.details.as_ref().unwrap().causes;
        assert_eq!(causes[0].reason, "FieldValueInvalid");
        assert_eq!(causes[1].message, "Required value");
        assert_eq!(causes[2].field, "spec");
        assert!(check("", "Event", "e1", &[]).is_ok());
    }

    #[test]
    fn one_error_is_not_bracketed() {
        let err = check(
            "",
            "PersistentVolumeClaim",
            "c1",
            &[
                FieldError::forbidden("spec", "x"),
                FieldError::forbidden("spec", "x"),
            ],
        )
        .unwrap_err();
        assert_eq!(
            err.message,
            "PersistentVolumeClaim \"c1\" is invalid: spec: Forbidden: x"
        );
    }
}
