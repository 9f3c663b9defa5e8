//! The event recorder against the in-memory API server: what lands on the
//! server (core/v1, upstream's fields), how repeats, refusals, outages and
//! floods are handled, and that recording never makes a caller wait. Every
//! test runs in paused tokio time, so retry pauses cost nothing.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::harness::{direct_binder, recorded_events};
use crate::process::summed;
use k8s_openapi::api::core::v1::{Event, ObjectReference, PersistentVolume};
use memapi::{MemApi, Reactor, Verb};
use pv_controller::Metrics;
use pv_controller::ObjectKey;
use pv_controller::pv;
use pv_controller::pv::EventType;
use pv_controller::testing::Ended;
use pv_controller::testing::EventOutcome;
use pv_controller::testing::EventRecorder;
use pv_controller::testing::QUEUE_CAPACITY;
use pv_controller::testing::reference_of;
use testkit::{claim, volume};
use tokio::time::Instant;

/// A recorder on `api` with its own metrics.
fn recorder(api: &MemApi) -> (EventRecorder, Arc<Metrics>) {
    let metrics = Arc::new(Metrics::new().expect("metrics"));
    let recorder = EventRecorder::new(
        api.client(),
        Arc::clone(&metrics),
        "persistentvolume-controller",
        "replica-a",
    )
    .expect("inside a runtime");
    (recorder, metrics)
}

/// A reference to volume `name` as stored on `api` (created if missing).
fn stored_volume(api: &MemApi, name: &str) -> ObjectReference {
    let stored = match api.get::<PersistentVolume>(None, name) {
        Some(stored) => stored,
        None => api
            .create(&volume(name, "1Gi").build())
            .expect("seed volume"),
    };
    reference_of(&stored)
}

/// Events `metrics` counted with `outcome`.
fn counted(metrics: &Metrics, outcome: EventOutcome) -> u64 {
    summed(
        metrics,
        "pv_controller_events_total",
        &[("outcome", outcome.as_str())],
    )
}

/// Counts of the event outcomes, in the order of [`EventOutcome::ALL`].
fn outcomes(metrics: &Metrics) -> Vec<(&'static str, u64)> {
    EventOutcome::ALL
        .iter()
        .map(|outcome| (outcome.as_str(), counted(metrics, *outcome)))
        .filter(|(_, count)| *count > 0)
        .collect()
}

fn core_events(api: &MemApi) -> Vec<Event> {
    api.list::<Event>()
}

/// Log lines written while the returned guard lives (this thread only; the
/// tests run on a current-thread runtime, so the sender task logs here too).
struct Logs(Arc<Mutex<Vec<u8>>>);

impl Logs {
    fn capture() -> (Self, tracing::subscriber::DefaultGuard) {
        let buffer = Arc::new(Mutex::new(Vec::new()));
        let writer = Arc::clone(&buffer);
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::DEBUG)
            .with_ansi(false)
            .with_writer(move || LogWriter(Arc::clone(&writer)))
            .finish();
        (Self(buffer), tracing::subscriber::set_default(subscriber))
    }

    fn lines_with(&self, text: &str) -> Vec<String> {
        let bytes = self.0.lock().expect("log buffer").clone();
        String::from_utf8_lossy(&bytes)
            .lines()
            .filter(|line| line.contains(text))
            .map(str::to_string)
            .collect()
    }
}

struct LogWriter(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for LogWriter {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("log buffer").write(bytes)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test(start_paused = true)]
async fn an_event_about_a_volume_lands_in_default_as_a_core_event() {
    let api = MemApi::new();
    let (recorder, metrics) = recorder(&api);
    let pv = stored_volume(&api, "pv1");
    recorder.record(
        &pv,
        EventType::Normal,
        "VolumeRecycled",
        "Volume recycled".into(),
    );
    recorder.flush().await;

    let events = core_events(&api);
    assert_eq!(events.len(), 1, "{events:?}");
    let event = &events[0];
    assert_eq!(event.metadata.namespace.as_deref(), Some("default"));
    assert!(
        event
            .metadata
            .name
            .as_deref()
            .unwrap_or("")
            .starts_with("pv1."),
        "{:?}",
        event.metadata.name
    );
    let source = event.source.clone().unwrap_or_default();
    assert_eq!(
        source.component.as_deref(),
        Some("persistentvolume-controller")
    );
    assert_eq!(source.host, None);
    assert_eq!(
        event.reporting_component.as_deref(),
        Some("persistentvolume-controller")
    );
    assert_eq!(event.reporting_instance.as_deref(), Some("replica-a"));
    assert_eq!(event.event_time, None, "no eventTime: a legacy event");
    let involved = &event.involved_object;
    assert_eq!(involved.kind.as_deref(), Some("PersistentVolume"));
    assert_eq!(involved.api_version.as_deref(), Some("v1"));
    assert_eq!(involved.name.as_deref(), Some("pv1"));
    assert_eq!(involved.namespace, None);
    assert_eq!(involved.uid, pv.uid);
    assert!(involved.uid.is_some());
    assert_eq!(involved.resource_version, pv.resource_version);
    assert_eq!(event.type_.as_deref(), Some("Normal"));
    assert_eq!(event.reason.as_deref(), Some("VolumeRecycled"));
    assert_eq!(event.message.as_deref(), Some("Volume recycled"));
    assert_eq!(event.count, Some(1));
    assert!(event.first_timestamp.is_some());
    assert_eq!(event.first_timestamp, event.last_timestamp);

    let requests = api.requests();
    let writes: Vec<_> = requests
        .log()
        .iter()
        .filter(|r| r.resource == "events")
        .map(|r| (r.verb, r.group.as_str(), r.namespace.as_deref(), r.code))
        .collect();
    assert_eq!(writes, [(Verb::Create, "", Some("default"), Some(201))]);
    assert_eq!(outcomes(&metrics), [("created", 1)]);
}

#[tokio::test(start_paused = true)]
async fn a_repeat_is_a_patch_that_counts_and_another_message_a_new_event() {
    let api = MemApi::new();
    let (recorder, metrics) = recorder(&api);
    let pv = stored_volume(&api, "pv1");
    let record = |message: &str| {
        recorder.record(
            &pv,
            EventType::Warning,
            "VolumeFailedDelete",
            message.to_string(),
        );
    };
    record("boom");
    recorder.flush().await;
    let first = core_events(&api).remove(0);
    tokio::time::sleep(Duration::from_secs(2)).await;
    record("boom");
    recorder.flush().await;

    let requests = api.requests();
    assert_eq!(requests.count_code(Verb::Create, "events", None, 201), 1);
    assert_eq!(requests.count_code(Verb::Patch, "events", None, 200), 1);
    let events = core_events(&api);
    assert_eq!(events.len(), 1, "the repeat patched the first event");
    let repeated = &events[0];
    assert_eq!(repeated.metadata.name, first.metadata.name);
    assert_eq!(repeated.count, Some(2));
    assert_eq!(repeated.first_timestamp, first.first_timestamp);
    assert!(repeated.last_timestamp >= first.last_timestamp);

    record("bang");
    recorder.flush().await;
    assert_eq!(
        recorded_events(&api),
        [
            "Warning VolumeFailedDelete boom",
            "Warning VolumeFailedDelete bang"
        ]
    );
    assert_eq!(outcomes(&metrics), [("created", 2), ("patched", 1)]);
}

#[tokio::test(start_paused = true)]
async fn a_repeat_of_a_deleted_event_creates_it_again() {
    let api = MemApi::new();
    let (recorder, metrics) = recorder(&api);
    let pv = stored_volume(&api, "pv1");
    let record = || {
        recorder.record(
            &pv,
            EventType::Normal,
            "RecyclerPod",
            "Recycler pod: pulled".into(),
        );
    };
    record();
    recorder.flush().await;
    let name = core_events(&api)[0].metadata.name.clone().expect("named");
    assert!(
        api.remove::<Event>(Some("default"), &name),
        "the event expires"
    );
    record();
    recorder.flush().await;

    let requests = api.requests();
    assert_eq!(requests.count_code(Verb::Patch, "events", None, 404), 1);
    assert_eq!(requests.count_code(Verb::Create, "events", None, 201), 2);
    let events = core_events(&api);
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].metadata.name.as_deref(), Some(name.as_str()));
    assert_eq!(events[0].count, Some(2), "the count goes on");
    assert_eq!(outcomes(&metrics), [("created", 2)]);
}

#[tokio::test(start_paused = true)]
async fn a_rejected_event_is_counted_and_logged_not_retried() {
    let (logs, _guard) = Logs::capture();
    let api = MemApi::new();
    let (recorder, metrics) = recorder(&api);
    let pv = stored_volume(&api, "pv1");
    api.add_reactor(Reactor::on(Verb::Create, "events").error_with(
        422,
        "involvedObject.namespace: Invalid value: \"\": does not match event.namespace",
    ));
    let started = Instant::now();
    recorder.record(&pv, EventType::Warning, "VolumeFailedDelete", "boom".into());
    recorder.flush().await;

    assert_eq!(started.elapsed(), Duration::ZERO, "no retry pause");
    let requests = api.requests();
    assert_eq!(requests.count(Verb::Create, "events", None), 1, "one try");
    assert!(core_events(&api).is_empty());
    assert_eq!(outcomes(&metrics), [("rejected", 1)]);
    let lines = logs.lines_with("server rejected event");
    assert_eq!(lines.len(), 1, "{lines:?}");
    for text in [
        "WARN",
        "pv1",
        "VolumeFailedDelete",
        "does not match event.namespace",
    ] {
        assert!(lines[0].contains(text), "{text:?} in {}", lines[0]);
    }
}

#[tokio::test(start_paused = true)]
async fn a_dropped_connection_is_retried_then_the_event_is_written() {
    let api = MemApi::new();
    let (recorder, metrics) = recorder(&api);
    let pv = stored_volume(&api, "pv1");
    api.add_reactor(
        Reactor::on(Verb::Create, "events")
            .drop_connection()
            .times(2),
    );
    let started = Instant::now();
    recorder.record(&pv, EventType::Normal, "VolumeRecycled", "done".into());
    recorder.flush().await;

    // A random pause below 10 s after the first failure, 10 s after the second.
    let waited = started.elapsed();
    assert!(
        (Duration::from_secs(10)..Duration::from_secs(20)).contains(&waited),
        "{waited:?}"
    );
    let requests = api.requests();
    assert_eq!(requests.total_dropped(), 2);
    assert_eq!(requests.count_code(Verb::Create, "events", None, 201), 1);
    assert_eq!(core_events(&api).len(), 1);
    assert_eq!(outcomes(&metrics), [("created", 1)]);
}

#[tokio::test(start_paused = true)]
async fn an_unreachable_server_is_given_up_on_after_twelve_tries() {
    let (logs, _guard) = Logs::capture();
    let api = MemApi::new();
    let (recorder, metrics) = recorder(&api);
    let pv = stored_volume(&api, "pv1");
    api.add_reactor(
        Reactor::on(Verb::Create, "events")
            .drop_connection()
            .always(),
    );
    let started = Instant::now();
    recorder.record(&pv, EventType::Normal, "VolumeRecycled", "done".into());
    recorder.flush().await;

    let waited = started.elapsed();
    assert!(
        (Duration::from_secs(100)..Duration::from_secs(110)).contains(&waited),
        "one random pause and ten of 10 s: {waited:?}"
    );
    assert_eq!(api.requests().count(Verb::Create, "events", None), 12);
    assert_eq!(outcomes(&metrics), [("failed", 1)]);
    let lines = logs.lines_with("retry limit exceeded");
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(lines[0].contains("VolumeRecycled") && lines[0].contains("pv1"));
}

#[tokio::test(start_paused = true)]
async fn a_full_queue_drops_and_counts_the_overflow() {
    let (logs, _guard) = Logs::capture();
    let api = MemApi::new();
    let (recorder, metrics) = recorder(&api);
    // One object per event, so the spam filter keeps out of it. Nothing is
    // sent before the first await: the queue takes QUEUE_CAPACITY events.
    let extra = 3;
    for i in 0..QUEUE_CAPACITY + extra {
        let mut pv = volume(&format!("pv{i}"), "1Gi").build();
        pv.metadata.uid = Some(format!("uid-{i}"));
        recorder.record(
            &reference_of(&pv),
            EventType::Normal,
            "VolumeRecycled",
            "done".into(),
        );
    }
    assert_eq!(
        counted(&metrics, EventOutcome::DroppedQueueFull),
        extra as u64
    );
    assert_eq!(
        logs.lines_with("too many queued events, dropped event")
            .len(),
        extra
    );
    recorder.flush().await;
    assert_eq!(core_events(&api).len(), QUEUE_CAPACITY);
    assert_eq!(
        outcomes(&metrics),
        [
            ("created", QUEUE_CAPACITY as u64),
            ("dropped_queue_full", extra as u64)
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn a_flood_about_one_object_is_combined_and_then_filtered() {
    let api = MemApi::new();
    let (recorder, metrics) = recorder(&api);
    let pv = stored_volume(&api, "pv1");
    // Twelve distinct messages: nine stand alone, the rest are combined.
    for i in 0..12 {
        recorder.record(
            &pv,
            EventType::Warning,
            "VolumeFailedDelete",
            format!("attempt {i} failed"),
        );
    }
    recorder.flush().await;
    let events = recorded_events(&api);
    assert_eq!(events.len(), 10, "{events:?}");
    assert_eq!(
        events[9],
        "Warning VolumeFailedDelete (combined from similar events): attempt 11 failed"
    );
    assert_eq!(outcomes(&metrics), [("created", 9), ("aggregated", 3)]);

    // The object has had 12 of its 25; the 26th event and later are dropped.
    for _ in 0..20 {
        recorder.record(&pv, EventType::Normal, "VolumeRecycled", "done".into());
    }
    recorder.flush().await;
    assert_eq!(
        outcomes(&metrics),
        [
            ("created", 10),
            ("patched", 12),
            ("aggregated", 3),
            ("spam_filtered", 7)
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn a_sync_does_not_wait_for_a_slow_event_write() {
    let api = MemApi::new();
    let pending = claim("claim1", "uid1", "1Gi").class("").build();
    api.create(&pending).expect("seed claim");
    let (app, controller) = direct_binder(&api, pv::Config::default())
        .await
        .expect("controller");
    api.add_reactor(
        Reactor::on(Verb::Create, "events")
            .delay(Duration::from_secs(30))
            .always(),
    );
    let cached = controller
        .store()
        .claim(&ObjectKey::of(&pending))
        .expect("cached claim");

    let started = Instant::now();
    let ended = controller.sync_claim(&cached).await;
    assert!(!matches!(ended, Ended::Failed(_)), "sync: {ended:?}");
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "the sync took {:?}",
        started.elapsed()
    );
    assert!(
        core_events(&api).is_empty(),
        "the event is still on its way"
    );

    app.recorder().flush().await;
    assert!(started.elapsed() >= Duration::from_secs(30));
    assert_eq!(
        recorded_events(&api),
        [
            "Normal FailedBinding no persistent volumes available for this claim and no storage class is set"
        ]
    );
}
