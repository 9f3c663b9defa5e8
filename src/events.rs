//! Kubernetes events (events.k8s.io/v1) about volumes, claims and pods,
//! reported as `persistentvolume-controller`, with repeats folded into one
//! event object.
//!
//! The controller says the same thing many times: a claim that waits for a
//! volume gets the same `FailedBinding` note on every resync. Like client-go's
//! event broadcaster, the recorder remembers what it recorded recently and,
//! when an identical event (same object, type, reason and note) comes again,
//! bumps the `series` of the existing event object with a PATCH instead of
//! creating another one. The memory forgets events not repeated for a while,
//! so it stays small.
//!
//! Events are best effort: a failure to write one is logged and never fails
//! or delays the sync that raised it beyond the write itself.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::{Event, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client, Resource};

use crate::constants::CONTROLLER_NAME;

/// How long the recorder remembers an event that is not repeated; a repeat
/// after that creates a new event object.
pub const CORRELATION_WINDOW: Duration = Duration::from_secs(10 * 60);

/// How many distinct recent events the recorder remembers (client-go's
/// event cache holds as many).
pub const CORRELATION_CAPACITY: u64 = 4096;

/// Namespace of events about cluster-scoped objects such as volumes.
pub const CLUSTER_SCOPED_EVENT_NAMESPACE: &str = "default";

/// Longest note the API server accepts on an events.k8s.io/v1 event, in bytes.
pub const NOTE_MAX_BYTES: usize = 1024;

/// Longest reporting instance the API server accepts, in bytes.
pub const REPORTING_INSTANCE_MAX_BYTES: usize = 128;

/// Longest object name the API server accepts (a DNS subdomain), in bytes.
const NAME_MAX_BYTES: usize = 253;

/// Whether an event is informational or reports a problem.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EventType {
    /// Something worth knowing happened (`Normal`).
    Normal,
    /// Something went wrong or needs attention (`Warning`).
    Warning,
}

impl EventType {
    /// The type as the API spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Normal => "Normal",
            Self::Warning => "Warning",
        }
    }
}

/// A reference to `object` for an event's `regarding` field: kind,
/// apiVersion, namespace, name, uid and resourceVersion, so `kubectl describe`
/// finds the event and a reader can tell which incarnation it was about.
pub fn reference_of<K: Resource<DynamicType = ()>>(object: &K) -> ObjectReference {
    let meta = object.meta();
    ObjectReference {
        api_version: Some(K::api_version(&()).into_owned()),
        kind: Some(K::kind(&()).into_owned()),
        namespace: meta.namespace.clone(),
        name: meta.name.clone(),
        uid: meta.uid.clone(),
        resource_version: meta.resource_version.clone(),
        field_path: None,
    }
}

/// The event object to create for a first occurrence: reported by this
/// controller from `reporting_instance` at `now`, in the namespace of the
/// object it is about. Names, notes and the instance are cut to the limits the
/// API server enforces, so bad input cannot make the event unwritable.
pub fn build_event(
    regarding: &ObjectReference,
    type_: EventType,
    reason: &str,
    note: &str,
    reporting_instance: &str,
    now: Timestamp,
) -> Event {
    Event {
        metadata: ObjectMeta {
            name: Some(event_name(regarding, now)),
            namespace: Some(event_namespace(regarding).to_string()),
            ..ObjectMeta::default()
        },
        regarding: Some(regarding.clone()),
        reason: Some(reason.to_string()),
        action: Some(reason.to_string()),
        note: Some(truncate(note, NOTE_MAX_BYTES).to_string()),
        type_: Some(type_.as_str().to_string()),
        reporting_controller: Some(CONTROLLER_NAME.to_string()),
        reporting_instance: Some(
            truncate(reporting_instance, REPORTING_INSTANCE_MAX_BYTES).to_string(),
        ),
        event_time: Some(MicroTime(now)),
        ..Event::default()
    }
}

/// The namespace an event about `regarding` lives in.
fn event_namespace(regarding: &ObjectReference) -> &str {
    match regarding.namespace.as_deref() {
        Some(namespace) if !namespace.is_empty() => namespace,
        _ => CLUSTER_SCOPED_EVENT_NAMESPACE,
    }
}

/// `<object>.<nanoseconds in hex>`, with the object part shortened so the
/// whole stays a valid DNS subdomain.
fn event_name(regarding: &ObjectReference, now: Timestamp) -> String {
    let suffix = format!("{:x}", now.as_nanosecond());
    let object = regarding
        .name
        .as_deref()
        .filter(|name| !name.is_empty())
        .unwrap_or(CONTROLLER_NAME);
    let object = truncate(object, NAME_MAX_BYTES - 1 - suffix.len());
    // A DNS label may not end in '-' or '.', and the cut may have left one.
    let object = object.trim_end_matches(['-', '.']);
    let object = if object.is_empty() {
        CONTROLLER_NAME
    } else {
        object
    };
    format!("{object}.{suffix}")
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

/// What makes two events "the same" for folding into one series. Unlike
/// kube-runtime's recorder, the note is part of it: the controller's notes
/// carry the details (which volume, which error), and different details must
/// stay visible as different events.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct CorrelationKey {
    uid: Option<String>,
    kind: Option<String>,
    namespace: Option<String>,
    name: Option<String>,
    type_: EventType,
    reason: String,
    note: String,
}

impl CorrelationKey {
    fn new(regarding: &ObjectReference, type_: EventType, reason: &str, note: &str) -> Self {
        Self {
            uid: regarding.uid.clone(),
            kind: regarding.kind.clone(),
            namespace: regarding.namespace.clone(),
            name: regarding.name.clone(),
            type_,
            reason: reason.to_string(),
            note: truncate(note, NOTE_MAX_BYTES).to_string(),
        }
    }
}

/// The event object the recorder last wrote for a correlation key.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Recorded {
    namespace: String,
    name: String,
    /// Occurrences so far, the first one included.
    count: i32,
}

/// The write that records one occurrence of an event.
#[derive(Debug, PartialEq)]
enum Write {
    /// A first occurrence (or one after the window): a new event object.
    Create(Box<Event>),
    /// A repeat: the existing event's series, as a merge patch.
    Series {
        namespace: String,
        name: String,
        series: EventSeries,
    },
}

/// Decides the write for an occurrence at `now`, given what was recorded
/// before for the same key.
fn plan(previous: Option<&Recorded>, now: Timestamp, new_event: impl FnOnce() -> Event) -> Write {
    match previous {
        Some(previous) => Write::Series {
            namespace: previous.namespace.clone(),
            name: previous.name.clone(),
            series: EventSeries {
                count: previous.count.saturating_add(1),
                last_observed_time: MicroTime(now),
            },
        },
        None => Write::Create(Box::new(new_event())),
    }
}

/// Records events for the controller. Cloning gives another handle on the
/// same correlation memory.
#[derive(Clone)]
pub struct EventRecorder {
    client: Client,
    reporting_instance: String,
    recent: moka::sync::Cache<CorrelationKey, Recorded>,
    /// Last timestamp handed out, so that every event gets a distinct name.
    last_stamp: Arc<Mutex<Timestamp>>,
}

impl EventRecorder {
    /// A recorder writing through `client`, reporting as
    /// `persistentvolume-controller` from `reporting_instance` (e.g. the pod
    /// name, so replicas can be told apart).
    pub fn new(client: Client, reporting_instance: impl Into<String>) -> Self {
        Self {
            client,
            reporting_instance: reporting_instance.into(),
            recent: moka::sync::Cache::builder()
                .max_capacity(CORRELATION_CAPACITY)
                .time_to_idle(CORRELATION_WINDOW)
                .build(),
            last_stamp: Arc::new(Mutex::new(Timestamp::UNIX_EPOCH)),
        }
    }

    /// Records that `reason` happened to `regarding`, with `note` as the
    /// human-readable message. A repeat of an event recorded within the
    /// correlation window updates that event's series instead of creating a
    /// new object. Failures are logged, never returned: an event is not worth
    /// failing a sync for. Two concurrent repeats may both create an object or
    /// under-count the series; events are informational, so that is accepted.
    pub async fn record(
        &self,
        regarding: ObjectReference,
        type_: EventType,
        reason: &str,
        note: String,
    ) {
        let key = CorrelationKey::new(&regarding, type_, reason, &note);
        let now = self.unique_now();
        let previous = self.recent.get(&key);
        let write = plan(previous.as_ref(), now, || {
            build_event(
                &regarding,
                type_,
                reason,
                &note,
                &self.reporting_instance,
                now,
            )
        });
        let event = match write {
            Write::Create(event) => *event,
            Write::Series {
                namespace,
                name,
                series,
            } => {
                let count = series.count;
                match self.patch_series(&namespace, &name, series).await {
                    Ok(()) => {
                        self.recent.insert(
                            key,
                            Recorded {
                                namespace,
                                name,
                                count,
                            },
                        );
                        return;
                    }
                    Err(kube::Error::Api(status)) if status.is_not_found() => {
                        tracing::debug!(
                            event = %name,
                            namespace = %namespace,
                            reason,
                            "event expired on the server; creating a new one"
                        );
                        build_event(
                            &regarding,
                            type_,
                            reason,
                            &note,
                            &self.reporting_instance,
                            now,
                        )
                    }
                    Err(error) => {
                        tracing::warn!(
                            event = %name,
                            namespace = %namespace,
                            reason,
                            %error,
                            "failed to update event series"
                        );
                        return;
                    }
                }
            }
        };
        self.create(key, event).await;
    }

    async fn patch_series(
        &self,
        namespace: &str,
        name: &str,
        series: EventSeries,
    ) -> Result<(), kube::Error> {
        let events: Api<Event> = Api::namespaced(self.client.clone(), namespace);
        let patch = serde_json::json!({ "series": series });
        events
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map(drop)
    }

    async fn create(&self, key: CorrelationKey, event: Event) {
        let namespace = event.metadata.namespace.clone().unwrap_or_default();
        let name = event.metadata.name.clone().unwrap_or_default();
        let events: Api<Event> = Api::namespaced(self.client.clone(), &namespace);
        match events.create(&PostParams::default(), &event).await {
            Ok(_) => {
                self.recent.insert(
                    key,
                    Recorded {
                        namespace,
                        name,
                        count: 1,
                    },
                );
            }
            Err(error) => {
                tracing::warn!(
                    event = %name,
                    namespace = %namespace,
                    reason = event.reason.as_deref().unwrap_or_default(),
                    %error,
                    "failed to create event"
                );
            }
        }
    }

    /// Now, or one nanosecond after the last stamp handed out when the clock
    /// has not moved on, so that two events never share a name.
    fn unique_now(&self) -> Timestamp {
        let mut last = self
            .last_stamp
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let now = Timestamp::now();
        let stamp = if now > *last {
            now
        } else {
            last.checked_add(SignedDuration::from_nanos(1))
                .unwrap_or(now)
        };
        *last = stamp;
        stamp
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};

    fn pv_ref() -> ObjectReference {
        let mut pv = PersistentVolume::default();
        pv.metadata.name = Some("pv1".into());
        pv.metadata.uid = Some("uid-pv1".into());
        pv.metadata.resource_version = Some("42".into());
        reference_of(&pv)
    }

    fn claim_ref() -> ObjectReference {
        let mut claim = PersistentVolumeClaim::default();
        claim.metadata.name = Some("claim1".into());
        claim.metadata.namespace = Some("ns".into());
        claim.metadata.uid = Some("uid-claim1".into());
        reference_of(&claim)
    }

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_second(seconds).expect("valid timestamp")
    }

    #[test]
    fn reference_names_kind_version_and_incarnation() {
        let reference = pv_ref();
        assert_eq!(reference.kind.as_deref(), Some("PersistentVolume"));
        assert_eq!(reference.api_version.as_deref(), Some("v1"));
        assert_eq!(reference.name.as_deref(), Some("pv1"));
        assert_eq!(reference.namespace, None);
        assert_eq!(reference.uid.as_deref(), Some("uid-pv1"));
        assert_eq!(reference.resource_version.as_deref(), Some("42"));
        assert_eq!(claim_ref().namespace.as_deref(), Some("ns"));
    }

    #[test]
    fn event_has_every_field_the_api_requires() {
        let now = at(1_700_000_000);
        let event = build_event(
            &claim_ref(),
            EventType::Warning,
            "ProvisioningFailed",
            "no class",
            "pod-a",
            now,
        );
        assert_eq!(event.metadata.namespace.as_deref(), Some("ns"));
        assert_eq!(
            event.metadata.name,
            Some(format!("claim1.{:x}", now.as_nanosecond()))
        );
        assert_eq!(event.regarding, Some(claim_ref()));
        assert_eq!(event.type_.as_deref(), Some("Warning"));
        assert_eq!(event.reason.as_deref(), Some("ProvisioningFailed"));
        assert_eq!(event.action.as_deref(), Some("ProvisioningFailed"));
        assert_eq!(event.note.as_deref(), Some("no class"));
        assert_eq!(
            event.reporting_controller.as_deref(),
            Some("persistentvolume-controller")
        );
        assert_eq!(event.reporting_instance.as_deref(), Some("pod-a"));
        assert_eq!(event.event_time, Some(MicroTime(now)));
        assert_eq!(event.series, None);
    }

    #[test]
    fn events_about_volumes_go_to_the_default_namespace() {
        let event = build_event(
            &pv_ref(),
            EventType::Normal,
            "VolumeRecycled",
            "Volume recycled",
            "i",
            at(1),
        );
        assert_eq!(event.metadata.namespace.as_deref(), Some("default"));
        assert_eq!(event.type_.as_deref(), Some("Normal"));
    }

    #[test]
    fn long_names_and_notes_are_cut_to_api_limits() {
        let mut reference = pv_ref();
        reference.name = Some(format!("{}-{}", "a".repeat(235), "b".repeat(17)));
        let note = "é".repeat(600);
        let event = build_event(
            &reference,
            EventType::Warning,
            "VolumeFailedDelete",
            &note,
            &"x".repeat(300),
            at(1_700_000_000),
        );
        let name = event.metadata.name.unwrap_or_default();
        assert!(name.len() <= 253, "{} bytes", name.len());
        assert!(name.starts_with(&"a".repeat(235)));
        // The cut fell just after the '-', which must not end a label.
        assert!(!name.contains("-."), "{name}");
        let cut = event.note.unwrap_or_default();
        assert_eq!(cut.len(), 1024);
        assert!(note.starts_with(&cut));
        assert_eq!(event.reporting_instance.map(|i| i.len()), Some(128));
    }

    #[test]
    fn correlation_key_tells_apart_object_type_reason_and_note() {
        let base = CorrelationKey::new(&pv_ref(), EventType::Warning, "VolumeFailedDelete", "boom");
        assert_eq!(
            base,
            CorrelationKey::new(&pv_ref(), EventType::Warning, "VolumeFailedDelete", "boom")
        );
        let mut newer_version = pv_ref();
        newer_version.resource_version = Some("43".into());
        assert_eq!(
            base,
            CorrelationKey::new(
                &newer_version,
                EventType::Warning,
                "VolumeFailedDelete",
                "boom"
            ),
            "a new resourceVersion of the same object is the same event"
        );
        let mut recreated = pv_ref();
        recreated.uid = Some("uid-other".into());
        for other in [
            CorrelationKey::new(&recreated, EventType::Warning, "VolumeFailedDelete", "boom"),
            CorrelationKey::new(
                &claim_ref(),
                EventType::Warning,
                "VolumeFailedDelete",
                "boom",
            ),
            CorrelationKey::new(&pv_ref(), EventType::Normal, "VolumeFailedDelete", "boom"),
            CorrelationKey::new(&pv_ref(), EventType::Warning, "VolumeDelete", "boom"),
            CorrelationKey::new(&pv_ref(), EventType::Warning, "VolumeFailedDelete", "bang"),
        ] {
            assert_ne!(base, other);
        }
    }

    #[test]
    fn first_occurrence_creates_and_repeats_extend_the_series() {
        let fresh = || {
            build_event(
                &pv_ref(),
                EventType::Normal,
                "VolumeRecycled",
                "Volume recycled",
                "i",
                at(1),
            )
        };
        assert_eq!(plan(None, at(1), fresh), Write::Create(Box::new(fresh())));
        let previous = Recorded {
            namespace: "default".into(),
            name: "pv1.1".into(),
            count: 2,
        };
        assert_eq!(
            plan(Some(&previous), at(9), fresh),
            Write::Series {
                namespace: "default".into(),
                name: "pv1.1".into(),
                series: EventSeries {
                    count: 3,
                    last_observed_time: MicroTime(at(9))
                },
            }
        );
    }

    mod against_fake_server {
        use super::*;
        use bytes::Bytes;
        use http::{Method, Request, Response, StatusCode};
        use http_body_util::{BodyExt, Full};
        use std::convert::Infallible;

        /// One request the fake server saw.
        #[derive(Debug, Clone)]
        struct Seen {
            method: Method,
            path: String,
            body: serde_json::Value,
        }

        /// A fake API server that accepts creates and answers patches with
        /// 200 or, when `expire` is set, 404.
        #[derive(Clone, Default)]
        struct FakeServer {
            seen: Arc<Mutex<Vec<Seen>>>,
            expire: Arc<Mutex<bool>>,
            fail_creates: Arc<Mutex<bool>>,
        }

        impl FakeServer {
            fn client(&self) -> Client {
                let server = self.clone();
                let service = tower::service_fn(move |request: Request<kube::client::Body>| {
                    let server = server.clone();
                    async move { Ok::<_, Infallible>(server.answer(request).await) }
                });
                Client::new(service, "default")
            }

            async fn answer(&self, request: Request<kube::client::Body>) -> Response<Full<Bytes>> {
                let (parts, body) = request.into_parts();
                let bytes = body
                    .collect()
                    .await
                    .map(|b| b.to_bytes())
                    .unwrap_or_default();
                let body: serde_json::Value = serde_json::from_slice(&bytes).unwrap_or_default();
                self.seen.lock().expect("lock").push(Seen {
                    method: parts.method.clone(),
                    path: parts.uri.path().to_string(),
                    body: body.clone(),
                });
                let expire = *self.expire.lock().expect("lock");
                let fail_creates = *self.fail_creates.lock().expect("lock");
                let (status, reply) = match parts.method {
                    Method::POST if fail_creates => {
                        (StatusCode::FORBIDDEN, status_json(403, "Forbidden"))
                    }
                    Method::POST => (StatusCode::CREATED, body),
                    Method::PATCH if expire => {
                        (StatusCode::NOT_FOUND, status_json(404, "NotFound"))
                    }
                    Method::PATCH => (StatusCode::OK, stored_event(parts.uri.path())),
                    _ => (
                        StatusCode::METHOD_NOT_ALLOWED,
                        status_json(405, "MethodNotAllowed"),
                    ),
                };
                Response::builder()
                    .status(status)
                    .header("content-type", "application/json")
                    .body(Full::new(Bytes::from(reply.to_string())))
                    .expect("response")
            }

            fn take(&self) -> Vec<Seen> {
                std::mem::take(&mut *self.seen.lock().expect("lock"))
            }
        }

        fn status_json(code: u16, reason: &str) -> serde_json::Value {
            serde_json::json!({
                "kind": "Status", "apiVersion": "v1", "status": "Failure",
                "message": reason, "reason": reason, "code": code,
            })
        }

        fn stored_event(path: &str) -> serde_json::Value {
            let name = path.rsplit('/').next().unwrap_or_default();
            serde_json::json!({
                "apiVersion": "events.k8s.io/v1", "kind": "Event",
                "metadata": {"name": name, "namespace": "default"},
                "eventTime": "2024-01-01T00:00:00.000000Z",
            })
        }

        const EVENTS: &str = "/apis/events.k8s.io/v1/namespaces/default/events";

        fn created_name(seen: &Seen) -> String {
            seen.body["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        }

        #[tokio::test]
        async fn repeat_patches_the_series_and_a_new_note_creates() {
            let server = FakeServer::default();
            let recorder = EventRecorder::new(server.client(), "pod-a");
            let record = |note: &str| {
                recorder.record(
                    pv_ref(),
                    EventType::Warning,
                    "VolumeFailedDelete",
                    note.to_string(),
                )
            };

            record("boom").await;
            let seen = server.take();
            assert_eq!(seen.len(), 1);
            assert_eq!(
                (&seen[0].method, seen[0].path.as_str()),
                (&Method::POST, EVENTS)
            );
            assert_eq!(seen[0].body["note"], "boom");
            assert_eq!(
                seen[0].body["reportingController"],
                "persistentvolume-controller"
            );
            let name = created_name(&seen[0]);
            assert!(name.starts_with("pv1."), "{name}");

            record("boom").await;
            record("boom").await;
            let seen = server.take();
            assert_eq!(seen.len(), 2);
            for (request, count) in seen.iter().zip([2, 3]) {
                assert_eq!(request.method, Method::PATCH);
                assert_eq!(request.path, format!("{EVENTS}/{name}"));
                assert_eq!(request.body["series"]["count"], count);
                assert!(request.body["series"]["lastObservedTime"].is_string());
            }

            record("bang").await;
            let seen = server.take();
            assert_eq!(seen.len(), 1);
            assert_eq!(seen[0].method, Method::POST);
            assert_ne!(created_name(&seen[0]), name);
        }

        #[tokio::test]
        async fn expired_event_is_created_again() {
            let server = FakeServer::default();
            let recorder = EventRecorder::new(server.client(), "pod-a");
            let record = || {
                recorder.record(
                    claim_ref(),
                    EventType::Normal,
                    "ExternalProvisioning",
                    "waiting".into(),
                )
            };

            record().await;
            let first = created_name(&server.take()[0]);
            *server.expire.lock().expect("lock") = true;
            record().await;
            let seen = server.take();
            let methods: Vec<_> = seen.iter().map(|s| s.method.clone()).collect();
            assert_eq!(methods, [Method::PATCH, Method::POST]);
            assert!(
                seen[1].path.ends_with("/namespaces/ns/events"),
                "{}",
                seen[1].path
            );
            let second = created_name(&seen[1]);
            assert_ne!(second, first);
            assert!(seen[1].body.get("series").is_none_or(|s| s.is_null()));

            *server.expire.lock().expect("lock") = false;
            record().await;
            let seen = server.take();
            assert_eq!(seen[0].method, Method::PATCH);
            assert!(seen[0].path.ends_with(&second), "{}", seen[0].path);
            assert_eq!(seen[0].body["series"]["count"], 2);
        }

        #[tokio::test]
        async fn failed_create_is_not_remembered() {
            let server = FakeServer::default();
            let recorder = EventRecorder::new(server.client(), "pod-a");
            *server.fail_creates.lock().expect("lock") = true;
            recorder
                .record(
                    pv_ref(),
                    EventType::Normal,
                    "VolumeRecycled",
                    "Volume recycled".into(),
                )
                .await;
            *server.fail_creates.lock().expect("lock") = false;
            recorder
                .record(
                    pv_ref(),
                    EventType::Normal,
                    "VolumeRecycled",
                    "Volume recycled".into(),
                )
                .await;
            let methods: Vec<_> = server.take().into_iter().map(|s| s.method).collect();
            assert_eq!(methods, [Method::POST, Method::POST]);
        }
    }
}
