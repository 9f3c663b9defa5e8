//! The PersistentVolume controller's event-driven series, under upstream's
//! names and labels (`volume_operation_total_*`,
//! `retroactive_storageclass_*`), registered into the process's registry.
//! The gauges set when Prometheus scrapes (`pv_collector_*`, the queue and
//! store sizes) are the wiring's: they read the store and the
//! queues.

use std::time::Duration;

use prometheus::{HistogramOpts, HistogramVec, IntCounter, IntCounterVec, Opts};

use crate::pv::objects::NO_PLUGIN;
use crate::runtime::metrics::{Metrics, MetricsError};

/// Buckets of upstream's `volume_operation_total_seconds` (seconds).
pub(crate) const OPERATION_BUCKETS: [f64; 13] = [
    0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 15.0, 25.0, 50.0, 120.0, 300.0, 600.0,
];

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

#[cfg(test)]
mod tests;
