//! Correlation as pure functions: events and times go in, the decided write
//! comes out. Times are an arbitrary base instant plus offsets.

use super::*;
use crate::events::EventType;
use crate::events::object::make_event;
use k8s_openapi::api::core::v1::ObjectReference;

impl<K, V> Lru<K, V>
where
    K: std::hash::Hash + Eq + Send + Sync + 'static,
    V: Clone + Send + Sync + 'static,
{
    fn len(&self) -> u64 {
        self.0.entry_count()
    }
}

fn volume(name: &str) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("PersistentVolume".into()),
        name: Some(name.into()),
        uid: Some(format!("uid-{name}")),
        ..ObjectReference::default()
    }
}

fn wall(seconds: i64) -> Timestamp {
    Timestamp::from_second(1_700_000_000 + seconds).expect("valid timestamp")
}

fn event_at(object: &str, reason: &str, message: &str, seconds: i64) -> Event {
    make_event(
        &volume(object),
        EventType::Warning,
        reason,
        message.to_string(),
        "persistentvolume-controller",
        "",
        wall(seconds),
    )
}

/// Feeds events to one correlator at offsets from one base instant.
struct Clock {
    correlator: Correlator,
    base: Instant,
}

impl Clock {
    fn new() -> Self {
        Self {
            correlator: Correlator::default(),
            base: Instant::now(),
        }
    }

    fn at(&mut self, seconds: u64, event: Event) -> Correlated {
        let now = self.base + Duration::from_secs(seconds);
        let wall = wall(i64::try_from(seconds).expect("small offset"));
        self.correlator.correlate(event, now, wall)
    }

    /// Records `reason`/`message` about `object` at `seconds`.
    fn record(&mut self, seconds: u64, object: &str, reason: &str, message: &str) -> Correlated {
        let at = i64::try_from(seconds).expect("small offset");
        self.at(seconds, event_at(object, reason, message, at))
    }
}

fn write(correlated: Correlated) -> (Write, bool) {
    match correlated {
        Correlated::Write { write, aggregated } => (write, aggregated),
        Correlated::SpamFiltered(event) => panic!("unexpectedly filtered: {event:?}"),
    }
}

fn created(correlated: Correlated) -> Event {
    match write(correlated) {
        (Write::Create(event), false) => event,
        other => panic!("expected a plain create, got {other:?}"),
    }
}

fn patched(correlated: Correlated) -> (Event, serde_json::Value) {
    match write(correlated) {
        (Write::Patch { event, patch }, false) => (event, patch),
        other => panic!("expected a plain patch, got {other:?}"),
    }
}

fn is_filtered(correlated: &Correlated) -> bool {
    matches!(correlated, Correlated::SpamFiltered(_))
}

#[test]
fn a_first_event_is_created_as_recorded() {
    let mut clock = Clock::new();
    let recorded = event_at("pv1", "VolumeFailedDelete", "boom", 0);
    assert_eq!(created(clock.at(0, recorded.clone())), recorded);
}

#[test]
fn an_identical_event_becomes_a_count_incrementing_patch_of_the_first() {
    let mut clock = Clock::new();
    let first = created(clock.record(0, "pv1", "VolumeFailedDelete", "boom"));

    let (second, patch) = patched(clock.record(30, "pv1", "VolumeFailedDelete", "boom"));
    assert_eq!(second.metadata.name, first.metadata.name, "same object");
    assert_eq!(second.count, Some(2));
    assert_eq!(second.first_timestamp, first.first_timestamp, "first kept");
    assert_eq!(second.last_timestamp, Some(Time(wall(30))));
    assert_eq!(
        patch,
        serde_json::json!({
            "count": 2,
            "lastTimestamp": "2023-11-14T22:13:50Z",
            "message": "boom",
        })
    );

    let (third, patch) = patched(clock.record(60, "pv1", "VolumeFailedDelete", "boom"));
    assert_eq!(third.metadata.name, first.metadata.name);
    assert_eq!(third.count, Some(3));
    assert_eq!(patch["count"], 3);
}

#[test]
fn a_different_message_reason_type_or_object_is_a_new_event() {
    let mut clock = Clock::new();
    created(clock.record(0, "pv1", "VolumeFailedDelete", "boom"));
    created(clock.record(1, "pv1", "VolumeFailedDelete", "bang"));
    created(clock.record(2, "pv1", "VolumeFailedRecycle", "boom"));
    created(clock.record(3, "pv2", "VolumeFailedDelete", "boom"));
    let mut normal = event_at("pv1", "VolumeFailedDelete", "boom", 4);
    normal.type_ = Some("Normal".into());
    created(clock.at(4, normal));
    let mut recreated = event_at("pv1", "VolumeFailedDelete", "boom", 5);
    recreated.involved_object.uid = Some("uid-other".into());
    created(clock.at(5, recreated));
    let mut newer = event_at("pv1", "VolumeFailedDelete", "boom", 6);
    newer.involved_object.resource_version = Some("43".into());
    let (repeat, _) = patched(clock.at(6, newer));
    assert_eq!(
        repeat.count,
        Some(2),
        "a new resourceVersion of the same object is the same event"
    );
}

#[test]
fn the_tenth_distinct_message_within_the_window_is_aggregated() {
    let mut clock = Clock::new();
    // Nine distinct messages, each 60 s after the one before: separate events.
    for i in 0..9 {
        let event = created(clock.record(i * 60, "pv1", "VolumeFailedDelete", &format!("m{i}")));
        assert_eq!(event.message, Some(format!("m{i}")));
    }
    let (combined, aggregated) = write(clock.record(540, "pv1", "VolumeFailedDelete", "m9"));
    assert!(aggregated);
    let Write::Create(combined) = combined else {
        panic!("the first combined event is created: {combined:?}");
    };
    assert_eq!(
        combined.message.as_deref(),
        Some("(combined from similar events): m9")
    );
    assert_eq!(combined.count, Some(1));
    assert_eq!(combined.reason.as_deref(), Some("VolumeFailedDelete"));
    assert_eq!(combined.type_.as_deref(), Some("Warning"));
    assert_eq!(combined.involved_object, volume("pv1"));
    assert_eq!(combined.metadata.namespace.as_deref(), Some("default"));
    assert_eq!(combined.first_timestamp, Some(Time(wall(540))));
    assert_eq!(
        combined.source.and_then(|s| s.component).as_deref(),
        Some("persistentvolume-controller")
    );

    // The next new message patches the combined event.
    let (next, aggregated) = write(clock.record(541, "pv1", "VolumeFailedDelete", "m10"));
    assert!(aggregated);
    let Write::Patch { event, patch } = next else {
        panic!("later combined events patch the first: {next:?}");
    };
    assert_eq!(event.metadata.name, combined.metadata.name);
    assert_eq!(event.count, Some(2));
    assert_eq!(patch["message"], "(combined from similar events): m10");

    // Other reasons about the same object are another group.
    created(clock.record(542, "pv1", "VolumeFailedRecycle", "m10"));
}

#[test]
fn a_pause_longer_than_the_window_starts_the_count_over() {
    let mut clock = Clock::new();
    for i in 0..9 {
        created(clock.record(i, "pv1", "VolumeFailedDelete", &format!("m{i}")));
    }
    // 601 s after the last similar event: the tenth message stands alone.
    created(clock.record(8 + 601, "pv1", "VolumeFailedDelete", "m9"));
    // It is the first of a new group: eight more are still separate...
    for i in 10..18 {
        created(clock.record(609 + i, "pv1", "VolumeFailedDelete", &format!("m{i}")));
    }
    // ...and the tenth of the new group, exactly 600 s later, is aggregated.
    let (_, aggregated) = write(clock.record(626 + 600, "pv1", "VolumeFailedDelete", "m18"));
    assert!(aggregated, "a pause of exactly the window still counts");
}

#[test]
fn the_spam_filter_lets_25_through_then_one_per_300_seconds() {
    let mut clock = Clock::new();
    for i in 0..25 {
        let result = clock.record(0, "pv1", "VolumeFailedDelete", "boom");
        assert!(!is_filtered(&result), "event {i} of the burst");
    }
    assert!(is_filtered(&clock.record(
        0,
        "pv1",
        "VolumeFailedDelete",
        "boom"
    )));
    assert!(is_filtered(&clock.record(
        299,
        "pv1",
        "VolumeFailedDelete",
        "boom"
    )));
    // Filtered events were still seen: the next write counts them.
    let (event, _) = patched(clock.record(300, "pv1", "VolumeFailedDelete", "boom"));
    assert_eq!(event.count, Some(28));
    assert!(is_filtered(&clock.record(
        301,
        "pv1",
        "VolumeFailedDelete",
        "boom"
    )));
    assert!(!is_filtered(&clock.record(
        600,
        "pv1",
        "VolumeFailedDelete",
        "boom"
    )));
    // A long quiet period refills the burst, but not beyond 25.
    for i in 0..25 {
        let result = clock.record(100_000, "pv1", "VolumeFailedDelete", "boom");
        assert!(!is_filtered(&result), "event {i} of the refilled burst");
    }
    assert!(is_filtered(&clock.record(
        100_000,
        "pv1",
        "VolumeFailedDelete",
        "boom"
    )));
}

#[test]
fn the_spam_filter_counts_every_reason_about_an_object_and_objects_apart() {
    let mut clock = Clock::new();
    for i in 0..25 {
        let reason = if i % 2 == 0 {
            "VolumeFailedDelete"
        } else {
            "VolumeFailedRecycle"
        };
        assert!(!is_filtered(&clock.record(0, "pv1", reason, "boom")));
    }
    assert!(is_filtered(&clock.record(
        0,
        "pv1",
        "RecyclerPod",
        "pulled"
    )));
    for i in 0..25 {
        let result = clock.record(0, "pv2", "VolumeFailedDelete", "boom");
        assert!(!is_filtered(&result), "pv2 has its own bucket: event {i}");
    }
    assert!(is_filtered(&clock.record(
        0,
        "pv2",
        "VolumeFailedDelete",
        "boom"
    )));
}

#[test]
fn a_forgotten_event_is_created_again() {
    let mut correlator = Correlator::with_capacity(2);
    let now = Instant::now();
    let mut record = |object: &str| {
        correlator.correlate(event_at(object, "VolumeRecycled", "done", 0), now, wall(0))
    };
    created(record("pv1"));
    created(record("pv2"));
    patched(record("pv1"));
    created(record("pv3"));
    // pv2 was the least recently used of the three, so it was forgotten.
    created(record("pv2"));
    patched(record("pv3"));
}

#[test]
fn the_lru_forgets_the_least_recently_used_entry() {
    let lru = Lru::new(2);
    lru.insert("a", 1);
    lru.insert("b", 2);
    let a = lru.remove(&"a").expect("a is there");
    lru.insert("a", a);
    lru.insert("c", 3);
    assert_eq!(lru.len(), 2);
    assert_eq!(lru.remove(&"b"), None, "b was used least recently");
    assert_eq!(lru.remove(&"a"), Some(1));
    assert_eq!(lru.remove(&"c"), Some(3));
    lru.insert("c", 4);
    lru.insert("c", 5);
    assert_eq!(lru.len(), 1, "a key is held once");
    assert_eq!(lru.remove(&"c"), Some(5));
}
