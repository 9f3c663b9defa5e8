//! Event correlation, as client-go's `tools/record/events_cache.go` does it
//! for kube-controller-manager, as pure functions of the event and the time:
//!
//! 1. **Aggregation.** Events about one object with one type and reason but
//!    different messages are "similar". When ten distinct messages have been
//!    seen for one such group, each no more than ten minutes after the one
//!    before, the event is replaced by a single `(combined from similar
//!    events): <message>` event for the group, so a flapping error cannot
//!    create an object per message.
//! 2. **Deduplication.** An event identical to one seen before (same object,
//!    type, reason and message; or the same group once aggregated) is not a
//!    new object: it takes the earlier event's name and first timestamp,
//!    counts one more, and is written as a PATCH of `count`, `lastTimestamp`
//!    and `message`.
//! 3. **Spam filter.** Per object, a token bucket of 25 events refilled with
//!    one every five minutes; an event finding it empty is dropped.
//!
//! Each step remembers at most 4096 keys and forgets the least recently used
//! first. The times that decide windows and refills are tokio
//! [`Instant`]s (so tests run in paused time); the wall-clock timestamp only
//! goes into the event objects.

use std::collections::HashSet;
use std::hash::Hash;
use std::time::Duration;

use k8s_openapi::api::core::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use moka::policy::EvictionPolicy;
use moka::sync::Cache;
use tokio::time::Instant;

use super::object::event_name;

/// How many keys each correlation step remembers (client-go's
/// `maxLruCacheEntries`).
pub(super) const CORRELATION_CACHE_ENTRIES: usize = 4096;

/// Distinct messages of similar events after which they are aggregated
/// (client-go's `defaultAggregateMaxEvents`).
pub(super) const AGGREGATE_MAX_MESSAGES: usize = 10;

/// How long after the last similar event the aggregation still counts
/// messages; a longer pause starts over (`defaultAggregateIntervalInSeconds`).
pub(super) const AGGREGATE_WINDOW: Duration = Duration::from_secs(600);

/// What an aggregated event's message starts with.
pub(super) const AGGREGATE_MESSAGE_PREFIX: &str = "(combined from similar events): ";

/// Events about one object the spam filter lets through at once
/// (`defaultSpamBurst`).
pub(super) const SPAM_BURST: u32 = 25;

/// How long the spam filter takes to let one more event through once its
/// burst is spent (`defaultSpamQPS` = 1/300).
pub(super) const SPAM_REFILL_INTERVAL: Duration = Duration::from_secs(300);

/// The object an event is about, as seen by one reporter (client-go's spam
/// key): the spam filter keeps one bucket per subject.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Subject {
    component: String,
    host: String,
    kind: String,
    namespace: String,
    name: String,
    uid: String,
    api_version: String,
}

impl Subject {
    fn of(event: &Event) -> Self {
        let source = event.source.clone().unwrap_or_default();
        let object = &event.involved_object;
        Self {
            component: source.component.unwrap_or_default(),
            host: source.host.unwrap_or_default(),
            kind: object.kind.clone().unwrap_or_default(),
            namespace: object.namespace.clone().unwrap_or_default(),
            name: object.name.clone().unwrap_or_default(),
            uid: object.uid.clone().unwrap_or_default(),
            api_version: object.api_version.clone().unwrap_or_default(),
        }
    }
}

/// Similar events: same subject, type, reason and reporter; the message is
/// left out (client-go's `EventAggregatorByReasonFunc`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct SimilarKey {
    subject: Subject,
    type_: String,
    reason: String,
    reporting_component: String,
    reporting_instance: String,
}

impl SimilarKey {
    fn of(event: &Event) -> Self {
        Self {
            subject: Subject::of(event),
            type_: event.type_.clone().unwrap_or_default(),
            reason: event.reason.clone().unwrap_or_default(),
            reporting_component: event.reporting_component.clone().unwrap_or_default(),
            reporting_instance: event.reporting_instance.clone().unwrap_or_default(),
        }
    }
}

/// Identical events: everything that tells two events apart, the message
/// included (client-go's `getEventKey`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct IdenticalKey {
    subject: Subject,
    field_path: String,
    type_: String,
    reason: String,
    message: String,
}

impl IdenticalKey {
    fn of(event: &Event) -> Self {
        Self {
            subject: Subject::of(event),
            field_path: event.involved_object.field_path.clone().unwrap_or_default(),
            type_: event.type_.clone().unwrap_or_default(),
            reason: event.reason.clone().unwrap_or_default(),
            message: event.message.clone().unwrap_or_default(),
        }
    }
}

/// What deduplication keys an event by: itself, or its group once the
/// group is aggregated (so every later combined event patches one object).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum DedupKey {
    Identical(IdenticalKey),
    Aggregate(SimilarKey),
}

/// The messages seen for a group of similar events, and when the last one
/// came.
#[derive(Clone, Debug)]
struct SimilarEvents {
    messages: HashSet<String>,
    last_seen: Instant,
}

/// The event object an earlier occurrence was written as.
#[derive(Clone, Debug)]
struct Observed {
    name: Option<String>,
    first_timestamp: Option<Time>,
    count: i32,
}

/// A token bucket holding its tokens as time credit: one event costs
/// [`SPAM_REFILL_INTERVAL`], and credit grows with time up to
/// [`SPAM_BURST`] events' worth (exact integer arithmetic, no float drift).
#[derive(Clone, Debug)]
struct SpamBucket {
    credit: Duration,
    updated: Instant,
}

impl SpamBucket {
    fn full(now: Instant) -> Self {
        Self {
            credit: SPAM_REFILL_INTERVAL * SPAM_BURST,
            updated: now,
        }
    }

    /// Takes one event's worth of credit at `now`, if there is that much.
    fn take(&mut self, now: Instant) -> bool {
        let earned = now.saturating_duration_since(self.updated);
        self.credit = (self.credit + earned).min(SPAM_REFILL_INTERVAL * SPAM_BURST);
        self.updated = self.updated.max(now);
        match self.credit.checked_sub(SPAM_REFILL_INTERVAL) {
            Some(left) => {
                self.credit = left;
                true
            }
            None => false,
        }
    }
}

/// How to write an event that passed correlation.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Write {
    /// A first occurrence: create this object.
    Create(Event),
    /// A repeat: patch the existing object named in `event` with `patch`
    /// (count, last timestamp, message); `event` is the whole object to
    /// create instead if the patch finds it gone.
    Patch {
        /// The event as it stands after this occurrence.
        event: Event,
        /// The strategic-merge patch from the previous occurrence.
        patch: serde_json::Value,
    },
}

impl Write {
    /// The event object this write stores.
    pub(super) fn event(&self) -> &Event {
        match self {
            Write::Create(event) | Write::Patch { event, .. } => event,
        }
    }
}

/// What correlation decided for one event.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Correlated {
    /// Write it; `aggregated` when it is the combined event of its group.
    Write {
        /// The create or patch to send.
        write: Write,
        /// Whether the event was folded into its group's combined event.
        aggregated: bool,
    },
    /// Dropped by the spam filter; the event as it would have been written.
    SpamFiltered(Event),
}

/// The memory of the three correlation steps. Owned by the recorder's one
/// sender task, so it needs no lock.
#[derive(Debug)]
pub(super) struct Correlator {
    similar: Lru<SimilarKey, SimilarEvents>,
    observed: Lru<DedupKey, Observed>,
    spam: Lru<Subject, SpamBucket>,
}

impl Default for Correlator {
    fn default() -> Self {
        Self::with_capacity(CORRELATION_CACHE_ENTRIES)
    }
}

impl Correlator {
    /// A correlator remembering at most `capacity` keys per step.
    pub(super) fn with_capacity(capacity: usize) -> Self {
        Self {
            similar: Lru::new(capacity),
            observed: Lru::new(capacity),
            spam: Lru::new(capacity),
        }
    }

    /// Correlates `event`, recorded just now: `now` decides the windows and
    /// refills, `wall` names and stamps a new combined event. As in
    /// client-go, an event the spam filter drops still counts as seen for
    /// the aggregation and the dedup count.
    pub(super) fn correlate(&mut self, event: Event, now: Instant, wall: Timestamp) -> Correlated {
        let (event, key, aggregated) = self.aggregate(event, now, wall);
        let write = self.observe(event, key);
        if self.spam_allows(write.event(), now) {
            Correlated::Write { write, aggregated }
        } else {
            let event = match write {
                Write::Create(event) | Write::Patch { event, .. } => event,
            };
            Correlated::SpamFiltered(event)
        }
    }

    /// Step 1: the event itself, or its group's combined event once the
    /// group has [`AGGREGATE_MAX_MESSAGES`] distinct messages.
    fn aggregate(
        &mut self,
        event: Event,
        now: Instant,
        wall: Timestamp,
    ) -> (Event, DedupKey, bool) {
        let key = SimilarKey::of(&event);
        let message = event.message.clone().unwrap_or_default();
        let mut similar = self
            .similar
            .remove(&key)
            .filter(|s| now.saturating_duration_since(s.last_seen) <= AGGREGATE_WINDOW)
            .unwrap_or_else(|| SimilarEvents {
                messages: HashSet::new(),
                last_seen: now,
            });
        similar.messages.insert(message.clone());
        similar.last_seen = now;
        let aggregate = similar.messages.len() >= AGGREGATE_MAX_MESSAGES;
        if aggregate {
            // Keep the set from growing past the threshold. client-go drops
            // an arbitrary message; dropping this one keeps it deterministic
            // and makes every further distinct message aggregate.
            similar.messages.remove(&message);
        }
        self.similar.insert(key.clone(), similar);
        if !aggregate {
            let identical = IdenticalKey::of(&event);
            return (event, DedupKey::Identical(identical), false);
        }
        let combined = Event {
            metadata: ObjectMeta {
                name: Some(event_name(
                    event.involved_object.name.as_deref().unwrap_or(""),
                    event.reporting_component.as_deref().unwrap_or_default(),
                    wall,
                )),
                namespace: event.metadata.namespace.clone(),
                ..ObjectMeta::default()
            },
            count: Some(1),
            first_timestamp: Some(Time(wall)),
            last_timestamp: Some(Time(wall)),
            message: Some(format!("{AGGREGATE_MESSAGE_PREFIX}{message}")),
            ..event
        };
        (combined, DedupKey::Aggregate(key), true)
    }

    /// Step 2: a repeat of an earlier event becomes a patch of its object.
    fn observe(&mut self, mut event: Event, key: DedupKey) -> Write {
        let write = match self.observed.remove(&key) {
            None => Write::Create(event),
            Some(previous) => {
                event.metadata.name = previous.name;
                event.first_timestamp = previous.first_timestamp;
                event.count = Some(previous.count.saturating_add(1));
                let patch = serde_json::json!({
                    "count": event.count,
                    "lastTimestamp": event.last_timestamp,
                    "message": event.message,
                });
                Write::Patch { event, patch }
            }
        };
        let event = write.event();
        self.observed.insert(
            key,
            Observed {
                name: event.metadata.name.clone(),
                first_timestamp: event.first_timestamp.clone(),
                count: event.count.unwrap_or(1),
            },
        );
        write
    }

    /// Step 3: whether the event's subject still has credit.
    fn spam_allows(&mut self, event: &Event, now: Instant) -> bool {
        let subject = Subject::of(event);
        let mut bucket = self
            .spam
            .remove(&subject)
            .unwrap_or_else(|| SpamBucket::full(now));
        let allowed = bucket.take(now);
        self.spam.insert(subject, bucket);
        allowed
    }
}

/// A map of at most `capacity` entries that forgets the least recently
/// used one when full (golang-lru, as client-go's caches use): a moka cache
/// with its LRU policy. Every use of an entry is a `remove` followed by an
/// `insert`, which makes it the most recent; an insert applies the eviction
/// at once, so the map never holds more than `capacity` entries.
struct Lru<K, V>(Cache<K, V>);

impl<K, V> std::fmt::Debug for Lru<K, V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lru")
            .field("entries", &self.0.entry_count())
            .finish()
    }
}

impl<K, V> Lru<K, V>
where
    K: Eq + Hash + Send + Sync + 'static,
    V: Clone + Send + Sync + 'static,
{
    fn new(capacity: usize) -> Self {
        Self(
            Cache::builder()
                .max_capacity(u64::try_from(capacity.max(1)).unwrap_or(u64::MAX))
                .eviction_policy(EvictionPolicy::lru())
                .build(),
        )
    }

    fn remove(&self, key: &K) -> Option<V> {
        self.0.remove(key)
    }

    fn insert(&self, key: K, value: V) {
        self.0.insert(key, value);
        self.0.run_pending_tasks();
    }
}

#[cfg(test)]
mod tests;
