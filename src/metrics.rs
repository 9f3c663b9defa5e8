//! Prometheus metrics: upstream's series under upstream's names and labels
//! (`pv_collector_*`, `volume_operation_total_*`, `retroactive_storageclass_*`),
//! plus the controller's own (`pv_controller_*`: queues, syncs, API writes,
//! events, shadow cache, leadership).
//!
//! Each controller owns a [`Metrics`] with its own registry, so two
//! controllers in one process (as in tests) count separately. The
//! `pv_collector_*` gauges and the queue and cache sizes are not updated as
//! things happen: a [`StateCollector`] computes them from the shadow cache and
//! the queues when Prometheus scrapes, as upstream's collector does.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use prometheus::core::{Collector, Desc};
use prometheus::proto::MetricFamily;
use prometheus::{
    Encoder, GaugeVec, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, Opts,
    Registry, TextEncoder,
};

use crate::cache::ShadowCache;
use crate::keys::{ClaimKey, VolumeName};
use crate::objects::{VolumeMode, claim_vac, volume_mode};
use crate::queue::WorkQueue;

/// Buckets of upstream's `volume_operation_total_seconds` (seconds).
pub const OPERATION_BUCKETS: [f64; 13] = [
    0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 15.0, 25.0, 50.0, 120.0, 300.0, 600.0,
];

/// Buckets of `pv_controller_sync_duration_seconds`: one sync is a few API
/// calls at most, so milliseconds to a few seconds.
pub const SYNC_BUCKETS: [f64; 12] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0,
];

/// Label value upstream uses when a volume has no known plugin.
pub const NO_PLUGIN: &str = "N/A";

/// Why the metrics could not be set up (an invalid name or a name
/// registered twice: a programming error, caught by the unit tests).
#[derive(Debug, thiserror::Error)]
#[error("setting up metrics: {0}")]
pub struct MetricsError(#[from] prometheus::Error);

/// The metrics of one controller, and the registry they are exported from.
pub struct Metrics {
    registry: Registry,
    retroactive_total: IntCounter,
    retroactive_errors: IntCounter,
    operation_seconds: HistogramVec,
    operation_errors: IntCounterVec,
    sync_seconds: HistogramVec,
    api_writes: IntCounterVec,
    api_conflicts: IntCounterVec,
    events: IntCounterVec,
    leader: IntGauge,
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
        let retroactive_total = IntCounter::new(
            "retroactive_storageclass_total",
            "Total number of retroactive StorageClass assignments to persistent volume claims",
        )?;
        let retroactive_errors = IntCounter::new(
            "retroactive_storageclass_errors_total",
            "Total number of failed retroactive StorageClass assignments to persistent volume claims",
        )?;
        let operation_seconds = HistogramVec::new(
            HistogramOpts::new(
                "volume_operation_total_seconds",
                "Storage operation end to end duration in seconds",
            )
            .buckets(OPERATION_BUCKETS.to_vec()),
            &["plugin_name", "operation_name"],
        )?;
        let operation_errors = IntCounterVec::new(
            Opts::new(
                "volume_operation_total_errors",
                "Total volume operation errors",
            ),
            &["plugin_name", "operation_name"],
        )?;
        let sync_seconds = HistogramVec::new(
            HistogramOpts::new(
                "pv_controller_sync_duration_seconds",
                "Duration of one sync of a volume or claim, by kind and result",
            )
            .buckets(SYNC_BUCKETS.to_vec()),
            &["kind", "result"],
        )?;
        let api_writes = IntCounterVec::new(
            Opts::new(
                "pv_controller_api_writes_total",
                "Writes to volumes and claims sent to the API server, by resource, verb, subresource and result",
            ),
            &["resource", "verb", "subresource", "result"],
        )?;
        let api_conflicts = IntCounterVec::new(
            Opts::new(
                "pv_controller_api_conflicts_total",
                "Writes refused with 409 Conflict (a stale resourceVersion), by resource and subresource",
            ),
            &["resource", "subresource"],
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
        registry.register(Box::new(retroactive_total.clone()))?;
        registry.register(Box::new(retroactive_errors.clone()))?;
        registry.register(Box::new(operation_seconds.clone()))?;
        registry.register(Box::new(operation_errors.clone()))?;
        registry.register(Box::new(sync_seconds.clone()))?;
        registry.register(Box::new(api_writes.clone()))?;
        registry.register(Box::new(api_conflicts.clone()))?;
        registry.register(Box::new(events.clone()))?;
        registry.register(Box::new(leader.clone()))?;
        Ok(Self {
            registry,
            retroactive_total,
            retroactive_errors,
            operation_seconds,
            operation_errors,
            sync_seconds,
            api_writes,
            api_conflicts,
            events,
            leader,
        })
    }

    /// Adds a collector (such as [`StateCollector`]) to this registry.
    pub fn register(&self, collector: Box<dyn Collector>) -> Result<(), MetricsError> {
        Ok(self.registry.register(collector)?)
    }

    /// Every metric in the Prometheus text exposition format.
    pub fn render(&self) -> Result<String, MetricsError> {
        let mut buffer = Vec::new();
        TextEncoder::new().encode(&self.registry.gather(), &mut buffer)?;
        Ok(String::from_utf8_lossy(&buffer).into_owned())
    }

    /// Counts one retroactive default-StorageClass assignment attempt
    /// (`retroactive_storageclass_total`), and its failure if it failed.
    pub fn retroactive_storage_class(&self, failed: bool) {
        self.retroactive_total.inc();
        if failed {
            self.retroactive_errors.inc();
        }
    }

    /// Records a finished volume operation (`provision`, `delete`, ...) and
    /// how long it took end to end (`volume_operation_total_seconds`). An
    /// empty plugin name is reported as `N/A`, as upstream.
    pub fn volume_operation_completed(&self, plugin_name: &str, operation: &str, took: Duration) {
        self.operation_seconds
            .with_label_values(&[plugin_label(plugin_name), operation])
            .observe(took.as_secs_f64());
    }

    /// Counts a failed volume operation (`volume_operation_total_errors`).
    pub fn volume_operation_failed(&self, plugin_name: &str, operation: &str) {
        self.operation_errors
            .with_label_values(&[plugin_label(plugin_name), operation])
            .inc();
    }

    /// Records one sync of a volume or claim (`kind` is `volume` or `claim`).
    pub fn sync_finished(&self, kind: &str, result: &str, took: Duration) {
        self.sync_seconds
            .with_label_values(&[kind, result])
            .observe(took.as_secs_f64());
    }

    /// Counts one write to `resource` (`subresource` "" for the object
    /// itself): `ok`, `conflict` or `error`.
    pub fn api_write(&self, resource: &str, verb: &str, subresource: &str, outcome: WriteOutcome) {
        self.api_writes
            .with_label_values(&[resource, verb, subresource, outcome.as_str()])
            .inc();
        if outcome == WriteOutcome::Conflict {
            self.api_conflicts
                .with_label_values(&[resource, subresource])
                .inc();
        }
    }

    /// Writes counted so far to `resource`/`subresource` whatever their
    /// verb and outcome; lets a test tell which of two controllers wrote.
    pub fn api_writes_to(&self, resource: &str, subresource: &str) -> u64 {
        let outcomes = [
            WriteOutcome::Ok,
            WriteOutcome::Conflict,
            WriteOutcome::Error,
        ];
        ["create", "update", "delete"]
            .iter()
            .flat_map(|verb| outcomes.iter().map(move |outcome| (verb, outcome)))
            .map(|(verb, outcome)| {
                self.api_writes
                    .with_label_values(&[resource, verb, subresource, outcome.as_str()])
                    .get()
            })
            .sum()
    }

    /// Counts one recorded event by what became of it
    /// (`pv_controller_events_total`).
    pub fn event(&self, outcome: EventOutcome) {
        self.events.with_label_values(&[outcome.as_str()]).inc();
    }

    /// Events counted so far with `outcome`; lets a test check that an event
    /// was written, folded or lost as it expects.
    pub fn events_with_outcome(&self, outcome: EventOutcome) -> u64 {
        self.events.with_label_values(&[outcome.as_str()]).get()
    }

    /// Sets whether this instance leads.
    pub fn set_leader(&self, leading: bool) {
        self.leader.set(i64::from(leading));
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
    /// The outcome of a write that returned `result`.
    pub fn of<T>(result: &crate::error::Result<T>) -> Self {
        match result {
            Ok(_) => Self::Ok,
            Err(error) if error.is_conflict() => Self::Conflict,
            Err(_) => Self::Error,
        }
    }

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

fn plugin_label(plugin_name: &str) -> &str {
    if plugin_name.is_empty() {
        NO_PLUGIN
    } else {
        plugin_name
    }
}

/// The volume plugin upstream would find for a volume's source
/// (`FindPluginBySpec`): CSI volumes as `kubernetes.io/csi:<driver>`, the
/// in-tree plugins the controller still knows by their plugin names, and
/// `N/A` for anything else.
pub fn plugin_name(volume: &PersistentVolume) -> String {
    let Some(spec) = volume.spec.as_ref() else {
        return NO_PLUGIN.to_string();
    };
    if let Some(csi) = spec.csi.as_ref() {
        return format!("kubernetes.io/csi:{}", csi.driver);
    }
    let name = if spec.nfs.is_some() {
        "kubernetes.io/nfs"
    } else if spec.host_path.is_some() {
        "kubernetes.io/host-path"
    } else if spec.local.is_some() {
        "kubernetes.io/local-volume"
    } else {
        NO_PLUGIN
    };
    name.to_string()
}

/// Computes the state gauges at scrape time: upstream's `pv_collector_*`
/// from the shadow cache, and the queue depths and cache sizes.
pub struct StateCollector {
    cache: Arc<ShadowCache>,
    volume_queue: WorkQueue<VolumeName>,
    claim_queue: WorkQueue<ClaimKey>,
    descs: Vec<Desc>,
}

/// The gauge families the collector fills at each scrape.
struct StateGauges {
    bound_pv: GaugeVec,
    unbound_pv: GaugeVec,
    bound_pvc: GaugeVec,
    unbound_pvc: GaugeVec,
    total_pv: GaugeVec,
    queue_depth: GaugeVec,
    cache_objects: GaugeVec,
}

impl StateGauges {
    fn new() -> Result<Self, prometheus::Error> {
        let claim_labels = ["namespace", "storage_class", "volume_attributes_class"];
        Ok(Self {
            bound_pv: GaugeVec::new(
                Opts::new(
                    "pv_collector_bound_pv_count",
                    "Gauge measuring number of persistent volume currently bound",
                ),
                &["storage_class"],
            )?,
            unbound_pv: GaugeVec::new(
                Opts::new(
                    "pv_collector_unbound_pv_count",
                    "Gauge measuring number of persistent volume currently unbound",
                ),
                &["storage_class"],
            )?,
            bound_pvc: GaugeVec::new(
                Opts::new(
                    "pv_collector_bound_pvc_count",
                    "Gauge measuring number of persistent volume claim currently bound",
                ),
                &claim_labels,
            )?,
            unbound_pvc: GaugeVec::new(
                Opts::new(
                    "pv_collector_unbound_pvc_count",
                    "Gauge measuring number of persistent volume claim currently unbound",
                ),
                &claim_labels,
            )?,
            total_pv: GaugeVec::new(
                Opts::new(
                    "pv_collector_total_pv_count",
                    "Gauge measuring total number of persistent volumes",
                ),
                &["plugin_name", "volume_mode"],
            )?,
            queue_depth: GaugeVec::new(
                Opts::new(
                    "pv_controller_queue_depth",
                    "Keys waiting in a work queue (not counting those being processed or backing off)",
                ),
                &["queue"],
            )?,
            cache_objects: GaugeVec::new(
                Opts::new(
                    "pv_controller_shadow_cache_objects",
                    "Objects held in the shadow cache, by kind",
                ),
                &["kind"],
            )?,
        })
    }

    fn all(&self) -> [&GaugeVec; 7] {
        [
            &self.bound_pv,
            &self.unbound_pv,
            &self.bound_pvc,
            &self.unbound_pvc,
            &self.total_pv,
            &self.queue_depth,
            &self.cache_objects,
        ]
    }
}

impl StateCollector {
    /// A collector over the controller's shadow cache and queues.
    pub fn new(
        cache: Arc<ShadowCache>,
        volume_queue: WorkQueue<VolumeName>,
        claim_queue: WorkQueue<ClaimKey>,
    ) -> Result<Self, MetricsError> {
        let descs = StateGauges::new()?
            .all()
            .iter()
            .flat_map(|gauge| gauge.desc().into_iter().cloned())
            .collect();
        Ok(Self {
            cache,
            volume_queue,
            claim_queue,
            descs,
        })
    }

    fn fill(&self, gauges: &StateGauges) {
        let volumes = self.cache.volumes();
        let claims = self.cache.claims();
        for (labels, count) in count_by(volumes.iter().filter(|v| is_bound_volume(v)), |v| {
            vec![volume_class_field(v)]
        }) {
            gauges.bound_pv.with_label_values(&labels).set(count);
        }
        for (labels, count) in count_by(volumes.iter().filter(|v| !is_bound_volume(v)), |v| {
            vec![volume_class_field(v)]
        }) {
            gauges.unbound_pv.with_label_values(&labels).set(count);
        }
        for (labels, count) in count_by(volumes.iter(), |v| {
            vec![plugin_name(v), volume_mode_label(v)]
        }) {
            gauges.total_pv.with_label_values(&labels).set(count);
        }
        for (labels, count) in count_by(claims.iter().filter(|c| is_bound_claim(c)), claim_labels) {
            gauges.bound_pvc.with_label_values(&labels).set(count);
        }
        for (labels, count) in count_by(claims.iter().filter(|c| !is_bound_claim(c)), claim_labels)
        {
            gauges.unbound_pvc.with_label_values(&labels).set(count);
        }
        gauges
            .queue_depth
            .with_label_values(&["volume"])
            .set(self.volume_queue.len() as f64);
        gauges
            .queue_depth
            .with_label_values(&["claim"])
            .set(self.claim_queue.len() as f64);
        gauges
            .cache_objects
            .with_label_values(&["persistentvolume"])
            .set(self.cache.volumes_len() as f64);
        gauges
            .cache_objects
            .with_label_values(&["persistentvolumeclaim"])
            .set(self.cache.claims_len() as f64);
    }
}

impl Collector for StateCollector {
    fn desc(&self) -> Vec<&Desc> {
        self.descs.iter().collect()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        match StateGauges::new() {
            Ok(gauges) => {
                self.fill(&gauges);
                gauges.all().iter().flat_map(|g| g.collect()).collect()
            }
            Err(error) => {
                tracing::error!(%error, "cannot build the state gauges");
                Vec::new()
            }
        }
    }
}

/// Counts items by the label values `labels` gives them.
fn count_by<'a, T: 'a>(
    items: impl Iterator<Item = &'a Arc<T>>,
    labels: impl Fn(&T) -> Vec<String>,
) -> BTreeMap<Vec<String>, f64> {
    let mut counts = BTreeMap::new();
    for item in items {
        *counts.entry(labels(item)).or_insert(0.0) += 1.0;
    }
    counts
}

fn is_bound_volume(volume: &PersistentVolume) -> bool {
    volume.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound")
}

fn is_bound_claim(claim: &PersistentVolumeClaim) -> bool {
    claim.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound")
}

/// `spec.storageClassName` only (not the beta annotation), as upstream's
/// collector reads it.
fn volume_class_field(volume: &PersistentVolume) -> String {
    volume
        .spec
        .as_ref()
        .and_then(|s| s.storage_class_name.clone())
        .unwrap_or_default()
}

fn volume_mode_label(volume: &PersistentVolume) -> String {
    match volume_mode(volume) {
        VolumeMode::Filesystem => "Filesystem".to_string(),
        VolumeMode::Block => "Block".to_string(),
        VolumeMode::Other(mode) => mode,
    }
}

fn claim_labels(claim: &PersistentVolumeClaim) -> Vec<String> {
    vec![
        claim.metadata.namespace.clone().unwrap_or_default(),
        claim
            .spec
            .as_ref()
            .and_then(|s| s.storage_class_name.clone())
            .unwrap_or_default(),
        claim_vac(claim).unwrap_or("").to_string(),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::objects::testing::volume;

    #[test]
    fn every_metric_registers_and_renders() {
        let metrics = Metrics::new().unwrap();
        let collector = StateCollector::new(
            Arc::new(ShadowCache::default()),
            WorkQueue::new(),
            WorkQueue::new(),
        )
        .unwrap();
        metrics.register(Box::new(collector)).unwrap();
        metrics.retroactive_storage_class(true);
        metrics.volume_operation_completed("", "delete", Duration::from_millis(300));
        metrics.volume_operation_failed("kubernetes.io/nfs", "delete");
        let text = metrics.render().unwrap();
        assert!(text.contains("retroactive_storageclass_total 1"), "{text}");
        assert!(text.contains("retroactive_storageclass_errors_total 1"));
        assert!(text.contains(
            "volume_operation_total_seconds_bucket{operation_name=\"delete\",plugin_name=\"N/A\",le=\"0.5\"} 1"
        ));
        assert!(text.contains(
            "volume_operation_total_errors{operation_name=\"delete\",plugin_name=\"kubernetes.io/nfs\"} 1"
        ));
        assert!(text.contains("pv_controller_queue_depth{queue=\"volume\"} 0"));
    }

    #[test]
    fn writes_are_counted_by_outcome() {
        let metrics = Metrics::new().unwrap();
        metrics.api_write("persistentvolumes", "update", "status", WriteOutcome::Ok);
        metrics.api_write(
            "persistentvolumes",
            "update",
            "status",
            WriteOutcome::Conflict,
        );
        metrics.api_write("persistentvolumes", "delete", "", WriteOutcome::Error);
        assert_eq!(metrics.api_writes_to("persistentvolumes", "status"), 2);
        assert_eq!(metrics.api_writes_to("persistentvolumes", ""), 1);
        let text = metrics.render().unwrap();
        assert!(text.contains(
            "pv_controller_api_conflicts_total{resource=\"persistentvolumes\",subresource=\"status\"} 1"
        ));
    }

    #[test]
    fn events_are_counted_by_outcome_and_every_outcome_is_exported() {
        let metrics = Metrics::new().unwrap();
        metrics.event(EventOutcome::Rejected);
        metrics.event(EventOutcome::Rejected);
        assert_eq!(metrics.events_with_outcome(EventOutcome::Rejected), 2);
        assert_eq!(metrics.events_with_outcome(EventOutcome::Created), 0);
        let text = metrics.render().unwrap();
        assert!(text.contains("pv_controller_events_total{outcome=\"rejected\"} 2"));
        for outcome in EventOutcome::ALL {
            let line = format!(
                "pv_controller_events_total{{outcome=\"{}\"}}",
                outcome.as_str()
            );
            assert!(text.contains(&line), "{line} missing:\n{text}");
        }
    }

    #[test]
    fn plugin_names_follow_upstream() {
        assert_eq!(plugin_name(&volume("v", "1Gi").build()), "N/A");
        let mut nfs = volume("v", "1Gi").build();
        nfs.spec.as_mut().unwrap().nfs = Some(Default::default());
        assert_eq!(plugin_name(&nfs), "kubernetes.io/nfs");
        let mut csi = volume("v", "1Gi").build();
        csi.spec.as_mut().unwrap().csi =
            Some(k8s_openapi::api::core::v1::CSIPersistentVolumeSource {
                driver: "ebs.csi.aws.com".into(),
                ..Default::default()
            });
        assert_eq!(plugin_name(&csi), "kubernetes.io/csi:ebs.csi.aws.com");
    }
}
