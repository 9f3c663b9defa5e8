//! The metrics registry every controller of the process shares, and the
//! series every controller has: syncs, API writes and conflicts, events,
//! leadership. A controller registers its own series into the same
//! registry, so one `/metrics` serves them all.
//!
//! Each process, and each controller in tests, owns a [`Metrics`] with its
//! own registry, so two controllers in one test process count separately.

use std::time::Duration;

use prometheus::core::Collector;
use prometheus::{
    Encoder, HistogramOpts, HistogramVec, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry,
    TextEncoder,
};

/// Buckets of `pv_controller_sync_duration_seconds`: one sync is a few API
/// calls at most, so milliseconds to a few seconds.
pub const SYNC_BUCKETS: [f64; 12] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0,
];

/// Why the metrics could not be set up (an invalid name or a name
/// registered twice: a programming error, caught by the unit tests).
#[derive(Debug, thiserror::Error)]
#[error("setting up metrics: {0}")]
pub struct MetricsError(#[from] prometheus::Error);

/// The metrics of one controller, and the registry they are exported from.
pub struct Metrics {
    registry: Registry,
    sync_seconds: HistogramVec,
    api_writes: IntCounterVec,
    api_conflicts: IntCounterVec,
    events: IntCounterVec,
    leader: IntGauge,
    controller_running: IntGaugeVec,
    writes_in_flight: IntGaugeVec,
    write_limit: IntGauge,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Metrics {
    /// Creates and registers every event-driven metric in a fresh registry.
    pub fn new() -> Result<Self, MetricsError> {
        let registry = Registry::new();
        let sync_seconds = HistogramVec::new(
            HistogramOpts::new(
                "pv_controller_sync_duration_seconds",
                "Duration of one sync of an object, by controller, kind and result",
            )
            .buckets(SYNC_BUCKETS.to_vec()),
            &["controller", "kind", "result"],
        )?;
        let api_writes = IntCounterVec::new(
            Opts::new(
                "pv_controller_api_writes_total",
                "Writes sent to the API server, by controller, resource, verb, subresource and result",
            ),
            &["controller", "resource", "verb", "subresource", "result"],
        )?;
        let api_conflicts = IntCounterVec::new(
            Opts::new(
                "pv_controller_api_conflicts_total",
                "Writes refused with 409 Conflict (a stale resourceVersion), by controller, resource and subresource",
            ),
            &["controller", "resource", "subresource"],
        )?;
        let events = IntCounterVec::new(
            Opts::new(
                "pv_controller_events_total",
                "Events the controller recorded, by what became of each one",
            ),
            &["outcome"],
        )?;
        for outcome in EventOutcome::ALL {
            events.with_label_values(&[outcome.as_str()]);
        }
        let leader = IntGauge::new(
            "pv_controller_leader",
            "1 while this instance holds the leader lease (or runs without election), else 0",
        )?;
        registry.register(Box::new(sync_seconds.clone()))?;
        registry.register(Box::new(api_writes.clone()))?;
        registry.register(Box::new(api_conflicts.clone()))?;
        registry.register(Box::new(events.clone()))?;
        let controller_running = IntGaugeVec::new(
            Opts::new(
                "pv_controller_controller_running",
                "1 for each controller --controllers enables that this process runs, 0 for one it does not run because the API server does not serve its API",
            ),
            &["controller"],
        )?;
        let writes_in_flight = IntGaugeVec::new(
            Opts::new(
                "pv_controller_api_writes_in_flight",
                "Writes sent to the API server and not yet answered, by controller",
            ),
            &["controller"],
        )?;
        let write_limit = IntGauge::new(
            "pv_controller_api_write_limit",
            "The most writes the process lets be in flight at once: the limit in force since the API server turned a write away as overloaded, or the most in flight at once so far while none is",
        )?;
        registry.register(Box::new(leader.clone()))?;
        registry.register(Box::new(controller_running.clone()))?;
        registry.register(Box::new(writes_in_flight.clone()))?;
        registry.register(Box::new(write_limit.clone()))?;
        Ok(Self {
            registry,
            sync_seconds,
            api_writes,
            api_conflicts,
            events,
            leader,
            controller_running,
            writes_in_flight,
            write_limit,
        })
    }

    /// Adds a controller's own series, or a collector that computes gauges
    /// at scrape time, to this registry.
    pub fn register(&self, collector: Box<dyn Collector>) -> Result<(), MetricsError> {
        Ok(self.registry.register(collector)?)
    }

    /// Every metric in the Prometheus text exposition format.
    pub fn render(&self) -> Result<String, MetricsError> {
        let mut buffer = Vec::new();
        TextEncoder::new().encode(&self.registry.gather(), &mut buffer)?;
        Ok(String::from_utf8_lossy(&buffer).into_owned())
    }

    /// Records one sync of `controller`'s object of `kind` (`volume`,
    /// `claim`, ...).
    pub fn sync_finished(&self, controller: &str, kind: &str, result: &str, took: Duration) {
        self.sync_seconds
            .with_label_values(&[controller, kind, result])
            .observe(took.as_secs_f64());
    }

    /// Counts one write of `controller` to `resource` (`subresource` ""
    /// for the object itself): `ok`, `conflict` or `error`.
    pub fn api_write(
        &self,
        controller: &str,
        resource: &str,
        verb: &str,
        subresource: &str,
        outcome: WriteOutcome,
    ) {
        self.api_writes
            .with_label_values(&[controller, resource, verb, subresource, outcome.as_str()])
            .inc();
        if outcome == WriteOutcome::Conflict {
            self.api_conflicts
                .with_label_values(&[controller, resource, subresource])
                .inc();
        }
    }

    /// Counts a write of `controller` in flight until the returned guard is
    /// dropped (`pv_controller_api_writes_in_flight`).
    pub fn write_in_flight(&self, controller: &str) -> InFlight {
        let gauge = self.writes_in_flight.with_label_values(&[controller]);
        gauge.inc();
        InFlight(gauge)
    }

    /// The gauge of the write door's limit (`pv_controller_api_write_limit`,
    /// [`crate::write::WriteLimit`]).
    pub fn write_limit(&self) -> IntGauge {
        self.write_limit.clone()
    }

    /// Counts one recorded event by what became of it
    /// (`pv_controller_events_total`).
    pub fn event(&self, outcome: EventOutcome) {
        self.events.with_label_values(&[outcome.as_str()]).inc();
    }

    /// Sets whether this instance leads.
    pub fn set_leader(&self, leading: bool) {
        self.leader.set(i64::from(leading));
    }

    /// Says whether the enabled controller `controller` runs (its API is
    /// served) or not.
    pub fn set_controller_running(&self, controller: &str, running: bool) {
        self.controller_running
            .with_label_values(&[controller])
            .set(i64::from(running));
    }
}

/// A write sent and not yet answered: counted in
/// `pv_controller_api_writes_in_flight` while it lives.
#[derive(Debug)]
pub struct InFlight(IntGauge);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// How one API write ended, for `pv_controller_api_writes_total`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteOutcome {
    /// Stored.
    Ok,
    /// Refused with 409 Conflict.
    Conflict,
    /// Any other failure.
    Error,
}

impl WriteOutcome {
    fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::Conflict => "conflict",
            Self::Error => "error",
        }
    }
}

/// What became of one recorded event, for `pv_controller_events_total`.
/// Every event the controller records ends in exactly one of these, so their
/// sum is the number of events recorded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventOutcome {
    /// Written as a new event object.
    Created,
    /// A repeat of an event written before: that event's count and last
    /// timestamp were bumped with a PATCH.
    Patched,
    /// One of many similar events about one object: written into the
    /// object's `(combined from similar events)` event (created or patched).
    Aggregated,
    /// Dropped by the per-object spam filter (a burst of 25, then one every
    /// five minutes).
    SpamFiltered,
    /// Dropped because the queue of events waiting to be written was full.
    DroppedQueueFull,
    /// Refused by the API server (422, 403, AlreadyExists, a terminating
    /// namespace, ...); not retried.
    Rejected,
    /// Given up: the API server could not be reached in any of the tries,
    /// the request could not be built, or the recorder's sender task was
    /// gone.
    Failed,
}

impl EventOutcome {
    /// Every outcome, so each label exists (at 0) from the start.
    pub const ALL: [EventOutcome; 7] = [
        Self::Created,
        Self::Patched,
        Self::Aggregated,
        Self::SpamFiltered,
        Self::DroppedQueueFull,
        Self::Rejected,
        Self::Failed,
    ];

    /// The `outcome` label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Created => "created",
            Self::Patched => "patched",
            Self::Aggregated => "aggregated",
            Self::SpamFiltered => "spam_filtered",
            Self::DroppedQueueFull => "dropped_queue_full",
            Self::Rejected => "rejected",
            Self::Failed => "failed",
        }
    }
}

#[cfg(test)]
pub(crate) mod tests;
