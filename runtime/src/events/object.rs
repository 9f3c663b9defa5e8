//! The core/v1 Event objects the recorder writes, built as client-go's
//! `tools/record` builds them (`makeEvent`, `GenerateEventName`), so that
//! `kubectl describe` and every tool that reads kube-controller-manager's
//! events read ours the same way.

use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;

use super::EventType;

/// Namespace of events about cluster-scoped objects such as volumes. For an
/// event without `eventTime` about an object without a namespace, the API
/// server accepts only this namespace (or none); `kubectl describe pv` looks
/// for the events there.
pub(super) const CLUSTER_SCOPED_EVENT_NAMESPACE: &str = "default";

/// Longest object name the API server accepts (a DNS subdomain), in bytes.
const NAME_MAX_BYTES: usize = 253;

/// The event object for one occurrence at `now`: count 1, first and last
/// timestamps `now`, from source `component` (no host, as
/// kube-controller-manager), in the namespace of the object it is about.
/// `instance` (this replica's identity) is the reporting instance, left out
/// when empty.
pub(super) fn make_event(
    regarding: &ObjectReference,
    type_: EventType,
    reason: &str,
    message: String,
    component: &str,
    instance: &str,
    now: Timestamp,
) -> Event {
    Event {
        metadata: ObjectMeta {
            name: Some(event_name(
                regarding.name.as_deref().unwrap_or(""),
                component,
                now,
            )),
            namespace: Some(event_namespace(regarding).to_string()),
            ..ObjectMeta::default()
        },
        involved_object: regarding.clone(),
        reason: Some(reason.to_string()),
        message: Some(message),
        first_timestamp: Some(Time(now)),
        last_timestamp: Some(Time(now)),
        count: Some(1),
        type_: Some(type_.as_str().to_string()),
        source: Some(EventSource {
            component: Some(component.to_string()),
            host: None,
        }),
        reporting_component: Some(component.to_string()),
        reporting_instance: Some(instance.to_string()).filter(|i| !i.is_empty()),
        ..Event::default()
    }
}

/// The namespace an event about `regarding` lives in: the object's own, or
/// [`CLUSTER_SCOPED_EVENT_NAMESPACE`] for a cluster-scoped object.
fn event_namespace(regarding: &ObjectReference) -> &str {
    match regarding.namespace.as_deref() {
        Some(namespace) if !namespace.is_empty() => namespace,
        _ => CLUSTER_SCOPED_EVENT_NAMESPACE,
    }
}

/// `<object>.<unix nanoseconds in hex>`, as client-go names events. When
/// that is not a valid name (an object name near the length limit), the
/// object part is shortened; when nothing of it is usable, the reporting
/// component's name takes its place (client-go uses a UUID there; the stamp
/// is unique per recorder, so this name is unique too).
pub(super) fn event_name(object: &str, component: &str, at: Timestamp) -> String {
    let suffix = format!("{:x}", at.as_nanosecond());
    let name = format!("{object}.{suffix}");
    if is_dns_subdomain(&name) {
        return name;
    }
    let room = NAME_MAX_BYTES.saturating_sub(suffix.len() + 1);
    // A label may not end in '-' or '.', and the cut may have left one.
    let shortened = truncate(object, room).trim_end_matches(['-', '.']);
    let name = format!("{shortened}.{suffix}");
    if !shortened.is_empty() && is_dns_subdomain(&name) {
        return name;
    }
    format!("{component}.{suffix}")
}

/// Whether `name` is a DNS-1123 subdomain: at most 253 bytes of dot-separated
/// labels of lowercase letters, digits and '-', each starting and ending
/// with a letter or digit.
fn is_dns_subdomain(name: &str) -> bool {
    name.len() <= NAME_MAX_BYTES
        && name.split('.').all(|label| {
            let alphanumeric = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
            label.starts_with(alphanumeric)
                && label.ends_with(alphanumeric)
                && label.chars().all(|c| alphanumeric(c) || c == '-')
        })
}

/// The longest prefix of `text` of at most `max_bytes` bytes that ends on a
/// character boundary.
fn truncate(text: &str, max_bytes: usize) -> &str {
    if text.len() <= max_bytes {
        return text;
    }
    let mut end = max_bytes;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

#[cfg(test)]
mod tests;
