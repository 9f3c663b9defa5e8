//! Small helpers to read and write fields of objects stored as JSON values.

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use serde_json::{Map, Value};

/// The string at a dotted path (`spec.nodeName`), if present and a string.
pub(crate) fn str_at<'a>(obj: &'a Value, path: &str) -> Option<&'a str> {
    value_at(obj, path).and_then(Value::as_str)
}

/// The value at a dotted path, if present.
pub(crate) fn value_at<'a>(obj: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.').try_fold(obj, |v, seg| v.get(seg))
}

/// Sets `value` at a dotted path, creating intermediate objects; a
/// non-object in the way is replaced by an object.
pub(crate) fn set_at(obj: &mut Value, path: &str, value: Value) {
    let mut cur = obj;
    let mut segs = path.split('.').peekable();
    while let Some(seg) = segs.next() {
        if !cur.is_object() {
            *cur = Value::Object(Map::new());
        }
        let Some(map) = cur.as_object_mut() else {
            return;
        };
        if segs.peek().is_none() {
            map.insert(seg.to_string(), value);
            return;
        }
        cur = map
            .entry(seg.to_string())
            .or_insert_with(|| Value::Object(Map::new()));
    }
}

/// Removes the field at a dotted path, if present.
pub(crate) fn remove_at(obj: &mut Value, path: &str) {
    let (parent, last) = match path.rsplit_once('.') {
        Some((p, l)) => (value_at_mut(obj, p), l),
        None => (Some(obj), path),
    };
    if let Some(map) = parent.and_then(Value::as_object_mut) {
        map.remove(last);
    }
}

/// Removes the field at a dotted path in which a segment ending in `[]`
/// stands for every element of the array it names
/// (`spec.devices[].taints`), wherever present.
pub(crate) fn remove_each(obj: &mut Value, path: &str) {
    let (head, rest) = match path.split_once('.') {
        Some((h, r)) => (h, Some(r)),
        None => (path, None),
    };
    let Some(map) = obj.as_object_mut() else {
        return;
    };
    match (head.strip_suffix("[]"), rest) {
        (Some(field), Some(rest)) => {
            if let Some(items) = map.get_mut(field).and_then(Value::as_array_mut) {
                for item in items {
                    remove_each(item, rest);
                }
            }
        }
        (Some(field), None) => {
            map.remove(field);
        }
        (None, None) => {
            map.remove(head);
        }
        (None, Some(rest)) => {
            if let Some(child) = map.get_mut(head) {
                remove_each(child, rest);
            }
        }
    }
}

/// Makes the field at `path` in `to` what it is in `from`: copied when
/// present there, removed when absent.
pub(crate) fn copy_at(from: &Value, to: &mut Value, path: &str) {
    match value_at(from, path) {
        Some(v) => set_at(to, path, v.clone()),
        None => remove_at(to, path),
    }
}

fn value_at_mut<'a>(obj: &'a mut Value, path: &str) -> Option<&'a mut Value> {
    path.split('.').try_fold(obj, |v, seg| v.get_mut(seg))
}

/// `metadata.name`, or "" when absent.
pub(crate) fn name(obj: &Value) -> &str {
    str_at(obj, "metadata.name").unwrap_or_default()
}

/// `metadata.namespace`, or "" when absent.
pub(crate) fn namespace(obj: &Value) -> &str {
    str_at(obj, "metadata.namespace").unwrap_or_default()
}

/// `metadata.uid`, or "" when absent.
pub(crate) fn uid(obj: &Value) -> &str {
    str_at(obj, "metadata.uid").unwrap_or_default()
}

/// `metadata.resourceVersion`, or "" when absent.
pub(crate) fn resource_version(obj: &Value) -> &str {
    str_at(obj, "metadata.resourceVersion").unwrap_or_default()
}

/// Whether `metadata.finalizers` is a non-empty list.
pub(crate) fn has_finalizers(obj: &Value) -> bool {
    value_at(obj, "metadata.finalizers")
        .and_then(Value::as_array)
        .is_some_and(|f| !f.is_empty())
}

/// The labels of an object, as (key, value) pairs.
pub(crate) fn labels(obj: &Value) -> Vec<(&str, &str)> {
    value_at(obj, "metadata.labels")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.as_str(), v.as_str().unwrap_or_default()))
                .collect()
        })
        .unwrap_or_default()
}

/// The current wall-clock time in Kubernetes' RFC 3339 seconds format.
pub(crate) fn now_rfc3339() -> String {
    rfc3339(super::clock::now())
}

/// A time in Kubernetes' RFC 3339 seconds format.
fn rfc3339(t: Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// `secs` seconds from now (earlier when negative), in RFC 3339 seconds format.
pub(crate) fn rfc3339_in(secs: i64) -> String {
    shift(super::clock::now(), secs)
}

/// The RFC 3339 time `secs` seconds after `time` (earlier when negative);
/// `None` when `time` does not parse.
pub(crate) fn rfc3339_shift(time: &str, secs: i64) -> Option<String> {
    time.parse::<Timestamp>().ok().map(|t| shift(t, secs))
}

fn shift(t: Timestamp, secs: i64) -> String {
    rfc3339(t.checked_add(SignedDuration::from_secs(secs)).unwrap_or(t))
}

/// The integer at a dotted path, if present and an integer.
pub(crate) fn i64_at(obj: &Value, path: &str) -> Option<i64> {
    value_at(obj, path).and_then(Value::as_i64)
}
