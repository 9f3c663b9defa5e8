//! The ephemeral volume controller's series, with upstream's names
//! (`pkg/controller/volume/ephemeral/metrics`), in the process's registry.

use prometheus::IntCounter;

use crate::runtime::metrics::{Metrics, MetricsError};

/// The controller's counters. Cheap to clone: clones count together.
#[derive(Clone, Debug)]
pub(crate) struct EphemeralMetrics {
    creates: IntCounter,
    create_failures: IntCounter,
}

impl EphemeralMetrics {
    /// Registers the series in `metrics`' registry.
    pub(crate) fn new(metrics: &Metrics) -> Result<Self, MetricsError> {
        let creates = IntCounter::new(
            "ephemeral_volume_controller_create_total",
            "Number of PersistentVolumeClaim create requests (successful or not) for ephemeral volumes",
        )?;
        let create_failures = IntCounter::new(
            "ephemeral_volume_controller_create_failures_total",
            "Number of PersistentVolumeClaim create requests for ephemeral volumes that failed",
        )?;
        metrics.register(Box::new(creates.clone()))?;
        metrics.register(Box::new(create_failures.clone()))?;
        Ok(Self {
            creates,
            create_failures,
        })
    }

    /// Counts one create request.
    pub(crate) fn create_attempted(&self) {
        self.creates.inc();
    }

    /// Counts one create request that failed.
    pub(crate) fn create_failed(&self) {
        self.create_failures.inc();
    }
}
