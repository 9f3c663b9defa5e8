//! Label and field selectors, parsed from query strings and matched
//! against stored objects (for lists and watches alike).

use super::object;
use super::resources::ResourceKind;
use super::status::ApiError;
use serde_json::Value;

/// One requirement of a label selector.
#[derive(Debug, Clone, PartialEq, Eq)]
enum LabelReq {
    Eq(String, String),
    NotEq(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
}

/// A parsed label selector: all requirements must hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct LabelSelector {
    reqs: Vec<LabelReq>,
}

/// Splits on commas that are not inside parentheses.
fn split_top_level(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

fn parse_set(key: &str, rest: &str, raw: &str) -> Result<(String, Vec<String>), ApiError> {
    let inner = rest
        .trim()
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .ok_or_else(|| ApiError::bad_request(format!("unable to parse label selector {raw:?}")))?;
    let values = inner
        .split(',')
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
        .collect();
    Ok((key.trim().to_string(), values))
}

fn valid_key(key: &str) -> bool {
    !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'))
}

impl LabelSelector {
    /// Parses `a=b,c!=d,e in (x,y),f notin (z),g,!h`.
    pub(crate) fn parse(raw: &str) -> Result<Self, ApiError> {
        let mut reqs = Vec::new();
        for part in split_top_level(raw) {
            let part = part.trim();
            if part.is_empty() {
                continue;
            }
            let req = if let Some(key) = part.strip_prefix('!') {
                LabelReq::NotExists(key.trim().to_string())
            } else if let Some((k, v)) = part.split_once("!=") {
                LabelReq::NotEq(k.trim().to_string(), v.trim().to_string())
            } else if let Some((k, v)) = part.split_once("==") {
                LabelReq::Eq(k.trim().to_string(), v.trim().to_string())
            } else if let Some((k, v)) = part.split_once('=') {
                LabelReq::Eq(k.trim().to_string(), v.trim().to_string())
            } else if let Some((k, rest)) = part.split_once(" notin ") {
                let (k, vs) = parse_set(k, rest, raw)?;
                LabelReq::NotIn(k, vs)
            } else if let Some((k, rest)) = part.split_once(" in ") {
                let (k, vs) = parse_set(k, rest, raw)?;
                LabelReq::In(k, vs)
            } else {
                LabelReq::Exists(part.to_string())
            };
            let key = match &req {
                LabelReq::Eq(k, _)
                | LabelReq::NotEq(k, _)
                | LabelReq::In(k, _)
                | LabelReq::NotIn(k, _)
                | LabelReq::Exists(k)
                | LabelReq::NotExists(k) => k,
            };
            if !valid_key(key) {
                return Err(ApiError::bad_request(format!(
                    "unable to parse label selector {raw:?}: invalid key {key:?}"
                )));
            }
            reqs.push(req);
        }
        Ok(Self { reqs })
    }

    /// Whether the object's labels satisfy every requirement.
    pub(crate) fn matches(&self, obj: &Value) -> bool {
        let labels = object::labels(obj);
        let get = |k: &str| labels.iter().find(|(lk, _)| *lk == k).map(|(_, v)| *v);
        self.reqs.iter().all(|r| match r {
            LabelReq::Eq(k, v) => get(k) == Some(v.as_str()),
            LabelReq::NotEq(k, v) => get(k) != Some(v.as_str()),
            LabelReq::In(k, vs) => get(k).is_some_and(|x| vs.iter().any(|v| v == x)),
            LabelReq::NotIn(k, vs) => !get(k).is_some_and(|x| vs.iter().any(|v| v == x)),
            LabelReq::Exists(k) => get(k).is_some(),
            LabelReq::NotExists(k) => get(k).is_none(),
        })
    }
}

/// A parsed field selector: `path=value` / `path==value` / `path!=value` terms.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct FieldSelector {
    terms: Vec<(String, bool, String)>,
}

impl FieldSelector {
    /// Parses a field selector, refusing fields the resource does not index (400).
    pub(crate) fn parse(raw: &str, kind: &ResourceKind) -> Result<Self, ApiError> {
        let mut terms = Vec::new();
        for part in raw.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (path, equal, value) = if let Some((p, v)) = part.split_once("!=") {
                (p, false, v)
            } else if let Some((p, v)) = part.split_once("==") {
                (p, true, v)
            } else if let Some((p, v)) = part.split_once('=') {
                (p, true, v)
            } else {
                return Err(ApiError::bad_request(format!(
                    "invalid field selector {raw:?}: {part:?} has no operator"
                )));
            };
            let path = path.trim();
            let known = path == "metadata.name"
                || (path == "metadata.namespace")
                || kind.fields.contains(&path);
            if !known {
                return Err(ApiError::bad_request(format!(
                    "field label not supported: {path}"
                )));
            }
            terms.push((path.to_string(), equal, value.trim().to_string()));
        }
        Ok(Self { terms })
    }

    /// Whether the object's fields satisfy every term (absent fields read as "").
    pub(crate) fn matches(&self, obj: &Value) -> bool {
        self.terms.iter().all(|(path, equal, value)| {
            let actual = object::str_at(obj, path).unwrap_or_default();
            (actual == value) == *equal
        })
    }
}

/// Everything a list or watch filters on: namespace and both selectors.
#[derive(Debug, Clone, Default)]
pub(crate) struct Filter {
    /// Only objects in this namespace (`None`: all namespaces).
    pub namespace: Option<String>,
    /// Label selector.
    pub labels: LabelSelector,
    /// Field selector.
    pub fields: FieldSelector,
}

impl Filter {
    /// Whether an object passes the filter.
    pub(crate) fn matches(&self, obj: &Value) -> bool {
        self.namespace
            .as_deref()
            .is_none_or(|ns| object::namespace(obj) == ns)
            && self.labels.matches(obj)
            && self.fields.matches(obj)
    }
}
