//! The PersistentVolume controller's own series, under upstream's names
//! and labels (`pv_collector_*`, `volume_operation_total_*`,
//! `retroactive_storageclass_*`), registered into the process's registry.
//! The `pv_collector_*` gauges and the queue and cache sizes are set when
//! Prometheus scrapes, as upstream's collector does: a [`StateCollector`]
//! reads them from the shadow cache's census ([`crate::pv::census`]) and
//! the queues.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::PersistentVolume;
use prometheus::core::{Collector, Desc};
use prometheus::proto::MetricFamily;
use prometheus::{GaugeVec, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, Opts};

use crate::pv::cache::ShadowCache;
use crate::pv::keys::VolumeName;
use crate::runtime::keys::ObjectKey;
use crate::runtime::metrics::{Metrics, MetricsError};
use crate::runtime::queue::WorkQueue;

/// Buckets of upstream's `volume_operation_total_seconds` (seconds).
pub(crate) const OPERATION_BUCKETS: [f64; 13] = [
    0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 15.0, 25.0, 50.0, 120.0, 300.0, 600.0,
];

/// Label value upstream uses when a volume has no known plugin.
pub(crate) const NO_PLUGIN: &str = "N/A";

/// The PersistentVolume controller's event-driven series. Cheap to clone:
/// clones count into the same series.
#[derive(Clone)]
pub(crate) struct PvMetrics {
    retroactive_total: IntCounter,
    retroactive_errors: IntCounter,
    operation_seconds: HistogramVec,
    operation_errors: IntCounterVec,
}

impl std::fmt::Debug for PvMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PvMetrics").finish_non_exhaustive()
    }
}

impl PvMetrics {
    /// Creates the series and registers them into `metrics`' registry.
    pub(crate) fn new(metrics: &Metrics) -> Result<Self, MetricsError> {
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
        metrics.register(Box::new(retroactive_total.clone()))?;
        metrics.register(Box::new(retroactive_errors.clone()))?;
        metrics.register(Box::new(operation_seconds.clone()))?;
        metrics.register(Box::new(operation_errors.clone()))?;
        Ok(Self {
            retroactive_total,
            retroactive_errors,
            operation_seconds,
            operation_errors,
        })
    }

    /// Counts one retroactive default-StorageClass assignment attempt
    /// (`retroactive_storageclass_total`), and its failure if it failed.
    pub(crate) fn retroactive_storage_class(&self, failed: bool) {
        self.retroactive_total.inc();
        if failed {
            self.retroactive_errors.inc();
        }
    }

    /// Records a finished volume operation (`provision`, `delete`, ...) and
    /// how long it took end to end (`volume_operation_total_seconds`). An
    /// empty plugin name is reported as `N/A`, as upstream.
    pub(crate) fn volume_operation_completed(
        &self,
        plugin_name: &str,
        operation: &str,
        took: Duration,
    ) {
        self.operation_seconds
            .with_label_values(&[plugin_label(plugin_name), operation])
            .observe(took.as_secs_f64());
    }

    /// Counts a failed volume operation (`volume_operation_total_errors`).
    pub(crate) fn volume_operation_failed(&self, plugin_name: &str, operation: &str) {
        self.operation_errors
            .with_label_values(&[plugin_label(plugin_name), operation])
            .inc();
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
pub(crate) fn plugin_name(volume: &PersistentVolume) -> String {
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
/// from the shadow cache's census, and the queue depths and cache sizes.
pub(crate) struct StateCollector {
    cache: Arc<ShadowCache>,
    volume_queue: WorkQueue<VolumeName>,
    claim_queue: WorkQueue<ObjectKey>,
    waiting_claims: Box<dyn Fn() -> usize + Send + Sync>,
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
    waiting_claims: GaugeVec,
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
            waiting_claims: GaugeVec::new(
                Opts::new(
                    "pv_controller_waiting_claims",
                    "Claims that found no volume and wait for one to be freed (each is tried again at once when one is)",
                ),
                &[],
            )?,
        })
    }

    fn all(&self) -> [&GaugeVec; 8] {
        [
            &self.bound_pv,
            &self.unbound_pv,
            &self.bound_pvc,
            &self.unbound_pvc,
            &self.total_pv,
            &self.queue_depth,
            &self.cache_objects,
            &self.waiting_claims,
        ]
    }
}

impl StateCollector {
    /// A collector over the controller's shadow cache and queues.
    pub(crate) fn new(
        cache: Arc<ShadowCache>,
        volume_queue: WorkQueue<VolumeName>,
        claim_queue: WorkQueue<ObjectKey>,
        waiting_claims: impl Fn() -> usize + Send + Sync + 'static,
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
            waiting_claims: Box::new(waiting_claims),
            descs,
        })
    }

    /// Sets every gauge from the cache's census and the queues.
    fn fill(&self, gauges: &StateGauges) {
        let (mut bound_pv, mut unbound_pv, mut total_pv) =
            (Counts::new(), Counts::new(), Counts::new());
        for (tally, n) in self.cache.volume_census() {
            let by_bound = if tally.bound {
                &mut bound_pv
            } else {
                &mut unbound_pv
            };
            add(by_bound, vec![tally.class], n);
            add(&mut total_pv, vec![tally.plugin, tally.mode], n);
        }
        let (mut bound_pvc, mut unbound_pvc) = (Counts::new(), Counts::new());
        for (tally, n) in self.cache.claim_census() {
            let by_bound = if tally.bound {
                &mut bound_pvc
            } else {
                &mut unbound_pvc
            };
            add(
                by_bound,
                vec![tally.namespace, tally.class, tally.attributes_class],
                n,
            );
        }
        for (gauge, counts) in [
            (&gauges.bound_pv, bound_pv),
            (&gauges.unbound_pv, unbound_pv),
            (&gauges.total_pv, total_pv),
            (&gauges.bound_pvc, bound_pvc),
            (&gauges.unbound_pvc, unbound_pvc),
        ] {
            for (labels, count) in counts {
                gauge.with_label_values(&labels).set(count);
            }
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
            .waiting_claims
            .with_label_values::<&str>(&[])
            .set((self.waiting_claims)() as f64);
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

/// Objects counted by their label values.
type Counts = BTreeMap<Vec<String>, f64>;

/// Adds `n` objects under their label values.
fn add(counts: &mut Counts, labels: Vec<String>, n: u64) {
    *counts.entry(labels).or_insert(0.0) += n as f64;
}

#[cfg(test)]
mod tests {
    use super::*;
    use testkit::volume;

    #[test]
    fn every_metric_registers_and_renders() {
        let metrics = Metrics::new().unwrap();
        let pv = PvMetrics::new(&metrics).unwrap();
        let collector = StateCollector::new(
            Arc::new(ShadowCache::default()),
            WorkQueue::new(),
            WorkQueue::new(),
            || 3,
        )
        .unwrap();
        metrics.register(Box::new(collector)).unwrap();
        pv.retroactive_storage_class(true);
        pv.volume_operation_completed("", "delete", Duration::from_millis(300));
        pv.volume_operation_failed("kubernetes.io/nfs", "delete");
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
        assert!(text.contains("pv_controller_waiting_claims 3"), "{text}");
    }

    #[test]
    fn plugin_names_follow_upstream() {
        assert_eq!(plugin_name(&volume("v", "1Gi").no_source().build()), "N/A");
        let mut nfs = volume("v", "1Gi").no_source().build();
        nfs.spec.as_mut().unwrap().nfs = Some(Default::default());
        assert_eq!(plugin_name(&nfs), "kubernetes.io/nfs");
        assert_eq!(
            plugin_name(&volume("v", "1Gi").csi("ebs.csi.aws.com").build()),
            "kubernetes.io/csi:ebs.csi.aws.com"
        );
    }
}
