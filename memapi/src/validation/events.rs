//! Event validation of Kubernetes 1.20 (`pkg/apis/core/validation/events.go`).
//!
//! Both APIs store the internal core Event, so an events.k8s.io/v1 event is
//! read under the internal field names first: `regarding` is
//! `involvedObject`, `note` is `message`, `deprecatedSource`,
//! `deprecatedFirstTimestamp`, `deprecatedLastTimestamp` and
//! `deprecatedCount` are `source`, `firstTimestamp`, `lastTimestamp` and
//! `count`; core/v1 spells `reportingController` as `reportingComponent`.
//! Field paths in errors are the internal ones, as the real server reports
//! them (`involvedObject.namespace` even for an events.k8s.io/v1 request).
//!
//! On create, every event gets `legacyValidateEvent`; one created through
//! events.k8s.io/v1 also gets the strict checks of `ValidateEventCreate`.
//! On update, 1.20's `ValidateEventUpdate` compares the new event with
//! itself (its strategy passes the new object as the old one), so only the
//! legacy checks can fail; memapi does the same.

use super::super::object::{self, str_at, value_at};
use super::super::resources::ResourceKind;
use super::FieldError;
use super::names;
use serde_json::Value;

const REPORTING_INSTANCE_LIMIT: usize = 128;
const ACTION_LIMIT: usize = 128;
const REASON_LIMIT: usize = 128;
const NOTE_LIMIT: usize = 1024;

/// The JSON names of the internal fields in one event API.
struct Names {
    involved_namespace: &'static str,
    reporting_controller: &'static str,
    message: &'static str,
    first_timestamp: &'static str,
    last_timestamp: &'static str,
    count: &'static str,
    source: &'static str,
}

const CORE: Names = Names {
    involved_namespace: "involvedObject.namespace",
    reporting_controller: "reportingComponent",
    message: "message",
    first_timestamp: "firstTimestamp",
    last_timestamp: "lastTimestamp",
    count: "count",
    source: "source",
};

const EVENTS_V1: Names = Names {
    involved_namespace: "regarding.namespace",
    reporting_controller: "reportingController",
    message: "note",
    first_timestamp: "deprecatedFirstTimestamp",
    last_timestamp: "deprecatedLastTimestamp",
    count: "deprecatedCount",
    source: "deprecatedSource",
};

/// An event under its internal field names.
struct Event<'a> {
    obj: &'a Value,
    names: &'static Names,
}

/// Whether a time field holds a time (absent, null, empty and Go's zero
/// time all mean unset).
fn time_set(v: Option<&Value>) -> bool {
    match v {
        Some(Value::String(s)) => !s.is_empty() && !s.starts_with("0001-01-01"),
        Some(Value::Null) | None => false,
        Some(_) => true,
    }
}

impl<'a> Event<'a> {
    fn new(kind: &ResourceKind, obj: &'a Value) -> Self {
        let names = if is_events_v1(kind) {
            &EVENTS_V1
        } else {
            &CORE
        };
        Self { obj, names }
    }

    fn str(&self, path: &str) -> &'a str {
        str_at(self.obj, path).unwrap_or_default()
    }

    fn namespace(&self) -> &'a str {
        object::namespace(self.obj)
    }

    fn involved_namespace(&self) -> &'a str {
        self.str(self.names.involved_namespace)
    }

    fn event_time_set(&self) -> bool {
        time_set(value_at(self.obj, "eventTime"))
    }

    fn reporting_controller(&self) -> &'a str {
        self.str(self.names.reporting_controller)
    }

    fn message(&self) -> &'a str {
        self.str(self.names.message)
    }
}

fn is_events_v1(kind: &ResourceKind) -> bool {
    kind.group == "events.k8s.io"
}

/// `ValidateEventCreate`: the legacy checks, plus the strict ones for a
/// request through events.k8s.io/v1.
pub(crate) fn validate_create(kind: &ResourceKind, obj: &Value) -> Vec<FieldError> {
    let event = Event::new(kind, obj);
    let mut errs = legacy(&event);
    if is_events_v1(kind) {
        errs.extend(strict(&event));
    }
    errs
}

/// `ValidateEventUpdate` as 1.20 runs it: the legacy checks only.
pub(crate) fn validate_update(kind: &ResourceKind, obj: &Value) -> Vec<FieldError> {
    legacy(&Event::new(kind, obj))
}

fn namespace_mismatch(event: &Event<'_>) -> FieldError {
    FieldError::invalid(
        "involvedObject.namespace",
        event.involved_namespace(),
        "does not match event.namespace",
    )
}

/// `legacyValidateEvent`: namespaces agree, and a "new" event (one with
/// eventTime) names its reporter, action and reason within limits.
fn legacy(event: &Event<'_>) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let (ns, involved) = (event.namespace(), event.involved_namespace());
    if !event.event_time_set() {
        let agrees = if involved.is_empty() {
            ns.is_empty() || ns == "default"
        } else {
            ns == involved
        };
        if !agrees {
            errs.push(namespace_mismatch(event));
        }
    } else {
        if involved.is_empty() && ns != "kube-system" {
            errs.push(namespace_mismatch(event));
        }
        errs.extend(reporter_and_texts(event));
    }
    for msg in names::dns1123_subdomain(ns) {
        errs.push(FieldError::invalid("namespace", ns, &msg));
    }
    errs
}

/// The reporter, action, reason and note checks of a "new" event.
fn reporter_and_texts(event: &Event<'_>) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let controller = event.reporting_controller();
    if controller.is_empty() {
        errs.push(FieldError::required("reportingController", ""));
    }
    for msg in names::qualified_name(controller) {
        errs.push(FieldError::invalid("reportingController", controller, &msg));
    }
    let limited = [
        (
            "reportingInstance",
            event.str("reportingInstance"),
            REPORTING_INSTANCE_LIMIT,
        ),
        ("action", event.str("action"), ACTION_LIMIT),
        ("reason", event.str("reason"), REASON_LIMIT),
    ];
    for (field, value, limit) in limited {
        if value.is_empty() {
            errs.push(FieldError::required(field, ""));
        }
        if value.len() > limit {
            errs.push(too_long(field, limit));
        }
    }
    if event.message().len() > NOTE_LIMIT {
        errs.push(too_long("message", NOTE_LIMIT));
    }
    errs
}

fn too_long(field: &str, limit: usize) -> FieldError {
    FieldError::invalid(field, "", &format!("can have at most {limit} characters"))
}

/// The checks `ValidateEventCreate` adds for events.k8s.io/v1: object
/// meta (name and namespace formats), series, eventTime, type, and the
/// deprecated fields left unset.
fn strict(event: &Event<'_>) -> Vec<FieldError> {
    let mut errs = meta(event);
    errs.extend(series(event));
    if !event.event_time_set() {
        errs.push(FieldError::required("eventTime", ""));
    }
    let ty = event.str("type");
    if ty != "Normal" && ty != "Warning" {
        errs.push(FieldError::invalid(
            "type",
            "",
            &format!("has invalid value: {ty}"),
        ));
    }
    let names = event.names;
    let must_be_unset = [
        (
            "firstTimestamp",
            time_set(value_at(event.obj, names.first_timestamp)),
        ),
        (
            "lastTimestamp",
            time_set(value_at(event.obj, names.last_timestamp)),
        ),
        (
            "count",
            value_at(event.obj, names.count)
                .and_then(Value::as_i64)
                .is_some_and(|c| c != 0),
        ),
        (
            "source",
            !event.str(&format!("{}.component", names.source)).is_empty()
                || !event.str(&format!("{}.host", names.source)).is_empty(),
        ),
    ];
    for (field, set) in must_be_unset {
        if set {
            errs.push(FieldError::invalid(field, "", "needs to be unset"));
        }
    }
    errs
}

/// The name and namespace checks of `ValidateObjectMeta` (other metadata
/// checks are not ported).
fn meta(event: &Event<'_>) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let name = object::name(event.obj);
    if name.is_empty() {
        errs.push(FieldError::required(
            "metadata.name",
            "name or generateName is required",
        ));
    }
    for msg in names::dns1123_subdomain(name)
        .into_iter()
        .filter(|_| !name.is_empty())
    {
        errs.push(FieldError::invalid("metadata.name", name, &msg));
    }
    let ns = event.namespace();
    if ns.is_empty() {
        errs.push(FieldError::required("metadata.namespace", ""));
    }
    for msg in names::dns1123_label(ns)
        .into_iter()
        .filter(|_| !ns.is_empty())
    {
        errs.push(FieldError::invalid("metadata.namespace", ns, &msg));
    }
    errs
}

/// `validateV1EventSeries`: a series counts at least 2 and has a last time.
fn series(event: &Event<'_>) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let Some(series) = value_at(event.obj, "series").filter(|s| !s.is_null()) else {
        return errs;
    };
    let count = series.get("count").and_then(Value::as_i64).unwrap_or(0);
    if count < 2 {
        errs.push(FieldError::invalid(
            "series.count",
            "",
            "should be at least 2",
        ));
    }
    if !time_set(series.get("lastObservedTime")) {
        errs.push(FieldError::required("series.lastObservedTime", ""));
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::super::super::resources;
    use super::*;
    use serde_json::json;

    fn core() -> &'static ResourceKind {
        resources::by_path("", "v1", "events").unwrap()
    }

    fn new_api() -> &'static ResourceKind {
        resources::by_path("events.k8s.io", "v1", "events").unwrap()
    }

    fn fields(errs: &[FieldError]) -> Vec<String> {
        errs.iter()
            .map(|e| format!("{}: {}", e.field, e.body()))
            .collect()
    }

    #[test]
    fn legacy_core_event_namespaces() {
        let ev = |ns: &str, involved: &str| json!({"metadata": {"name": "e", "namespace": ns}, "involvedObject": {"namespace": involved}});
        assert!(validate_create(core(), &ev("default", "")).is_empty());
        assert!(validate_create(core(), &ev("ns1", "ns1")).is_empty());
        assert_eq!(
            fields(&validate_create(core(), &ev("ns1", ""))),
            vec!["involvedObject.namespace: Invalid value: \"\": does not match event.namespace"]
        );
        assert_eq!(
            fields(&validate_create(core(), &ev("ns1", "ns2"))),
            vec![
                "involvedObject.namespace: Invalid value: \"ns2\": does not match event.namespace"
            ]
        );
    }

    #[test]
    fn new_style_event_needs_kube_system_and_reporter() {
        let ev = json!({
            "metadata": {"name": "pv1.1", "namespace": "default"},
            "eventTime": "2021-01-01T00:00:00.000000Z",
            "regarding": {"kind": "PersistentVolume", "name": "pv1"},
            "reason": "R", "action": "A", "type": "Normal",
            "reportingController": "pv-controller", "reportingInstance": "i",
        });
        assert_eq!(
            fields(&validate_create(new_api(), &ev)),
            vec!["involvedObject.namespace: Invalid value: \"\": does not match event.namespace"]
        );
        let mut ok = ev.clone();
        ok["metadata"]["namespace"] = json!("kube-system");
        assert!(validate_create(new_api(), &ok).is_empty());

        let bad = json!({
            "metadata": {"name": "e", "namespace": "kube-system"},
            "eventTime": "2021-01-01T00:00:00.000000Z",
            "regarding": {}, "note": "x".repeat(1025), "reason": "r".repeat(129),
            "deprecatedCount": 3, "series": {"count": 1},
        });
        assert_eq!(
            fields(&validate_create(new_api(), &bad)),
            vec![
                "reportingController: Required value",
                "reportingController: Invalid value: \"\": name part must be non-empty",
                "reportingController: Invalid value: \"\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
                "reportingInstance: Required value",
                "action: Required value",
                "reason: Invalid value: \"\": can have at most 128 characters",
                "message: Invalid value: \"\": can have at most 1024 characters",
                "series.count: Invalid value: \"\": should be at least 2",
                "series.lastObservedTime: Required value",
                "type: Invalid value: \"\": has invalid value: ",
                "count: Invalid value: \"\": needs to be unset",
            ]
        );
    }

    #[test]
    fn core_event_with_event_time_is_new_style_but_not_strict() {
        let ev = json!({
            "metadata": {"name": "e", "namespace": "kube-system"},
            "eventTime": "2021-01-01T00:00:00.000000Z", "involvedObject": {},
            "reason": "R", "action": "A", "reportingComponent": "c", "reportingInstance": "i",
            "count": 4, "type": "Odd",
        });
        assert!(validate_create(core(), &ev).is_empty());
        let mut missing = ev.clone();
        missing["reportingComponent"] = json!("");
        assert_eq!(validate_create(core(), &missing).len(), 3);
    }

    #[test]
    fn update_checks_only_the_legacy_rules() {
        let ev = json!({
            "metadata": {"name": "e", "namespace": "ns1"},
            "eventTime": "2021-01-01T00:00:00.000000Z", "regarding": {"namespace": "ns1"},
            "reason": "R", "action": "A", "reportingController": "c", "reportingInstance": "i",
            "type": "Bogus",
        });
        assert!(validate_update(new_api(), &ev).is_empty());
        let mut moved = ev.clone();
        moved["regarding"]["namespace"] = json!("");
        assert_eq!(validate_update(new_api(), &moved).len(), 1);
    }
}
