//! Patch bodies: JSON merge patch (RFC 7386), JSON patch (RFC 6902) and
//! strategic merge patch; the body of a server-side apply is parsed here
//! and applied by `apply.rs`.
//!
//! Simplification: a strategic merge patch is applied as a merge patch
//! after dropping its `$`-directives, so lists are replaced rather than
//! merged by key (fine for the fields the controller and kubectl touch:
//! finalizers, annotations, labels, claimRef, status).

use super::status::ApiError;
use serde_json::Value;

/// The patch flavours, by their Content-Type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PatchType {
    /// `application/merge-patch+json`
    Merge,
    /// `application/json-patch+json`
    Json,
    /// `application/strategic-merge-patch+json`
    Strategic,
    /// `application/apply-patch+yaml`
    Apply,
}

impl PatchType {
    /// The patch type named by a Content-Type header (parameters ignored).
    pub(crate) fn from_content_type(ct: &str) -> Option<Self> {
        match ct.split(';').next().unwrap_or_default().trim() {
            "application/merge-patch+json" => Some(Self::Merge),
            "application/json-patch+json" => Some(Self::Json),
            "application/strategic-merge-patch+json" => Some(Self::Strategic),
            "application/apply-patch+yaml" | "application/apply-patch+json" => Some(Self::Apply),
            _ => None,
        }
    }
}

fn parse_json(body: &[u8]) -> Result<Value, ApiError> {
    serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("the patch body is not valid JSON: {e}")))
}

/// Parses a server-side apply body (YAML or JSON) into an object.
pub(crate) fn parse_apply(body: &[u8]) -> Result<Value, ApiError> {
    let value: Value = serde_saphyr::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("the apply body is not valid YAML: {e}")))?;
    if value.is_object() {
        Ok(value)
    } else {
        Err(ApiError::bad_request("the apply body is not an object"))
    }
}

/// Removes strategic-merge directives (`$patch`, `$retainKeys`,
/// `$setElementOrder/...`, `$deleteFromPrimitiveList/...`) everywhere.
fn strip_directives(v: &mut Value) {
    match v {
        Value::Object(map) => {
            map.retain(|k, _| !k.starts_with('$'));
            map.values_mut().for_each(strip_directives);
        }
        Value::Array(items) => items.iter_mut().for_each(strip_directives),
        _ => {}
    }
}

/// Applies a patch body to `doc` in place. An unparsable patch is 400, a
/// JSON patch whose operations fail is 422; `doc` is then unspecified, so
/// callers patch a copy. A server-side apply goes through `apply.rs`
/// instead (it needs the field manager).
pub(crate) fn apply(patch_type: PatchType, doc: &mut Value, body: &[u8]) -> Result<(), ApiError> {
    match patch_type {
        PatchType::Merge => {
            let p = parse_json(body)?;
            if !p.is_object() {
                return Err(ApiError::bad_request("a merge patch must be a JSON object"));
            }
            json_patch::merge(doc, &p);
        }
        PatchType::Strategic => {
            let mut p = parse_json(body)?;
            if !p.is_object() {
                return Err(ApiError::bad_request(
                    "a strategic merge patch must be a JSON object",
                ));
            }
            strip_directives(&mut p);
            json_patch::merge(doc, &p);
        }
        PatchType::Apply => {
            return Err(ApiError::bad_request(
                "a server-side apply is not a patch of a copy",
            ));
        }
        PatchType::Json => {
            let p: json_patch::Patch = serde_json::from_slice(body).map_err(|e| {
                ApiError::bad_request(format!("the body is not a valid JSON patch: {e}"))
            })?;
            json_patch::patch(doc, &p)
                .map_err(|e| ApiError::from_code(422, format!("the JSON patch failed: {e}")))?;
        }
    }
    Ok(())
}
