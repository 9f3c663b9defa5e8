//! The ResourceClaim controller's own series, with upstream's names
//! (`pkg/controller/resourceclaim/metrics`): claims it tried to create and
//! creates that failed, and at scrape time the number of claims and of
//! allocated claims. They are registered in the process's one registry.

use std::sync::Arc;

use prometheus::core::{Collector, Desc};
use prometheus::proto::MetricFamily;
use prometheus::{IntCounter, IntGauge};

use super::claims::ClaimCache;
use crate::runtime::metrics::{Metrics, MetricsError};

/// The counters the decisions bump.
#[derive(Clone, Debug)]
pub(crate) struct ClaimMetrics {
    create_attempts: IntCounter,
    create_failures: IntCounter,
}

impl ClaimMetrics {
    /// Creates the series and registers them, with the gauges computed from
    /// `claims`, into `metrics`.
    pub(crate) fn new(metrics: &Metrics, claims: Arc<ClaimCache>) -> Result<Self, MetricsError> {
        let create_attempts = IntCounter::new(
            "resourceclaim_controller_create_attempts_total",
            "Number of ResourceClaims creation requests",
        )?;
        let create_failures = IntCounter::new(
            "resourceclaim_controller_create_failures_total",
            "Number of ResourceClaims creation request failures",
        )?;
        metrics.register(Box::new(create_attempts.clone()))?;
        metrics.register(Box::new(create_failures.clone()))?;
        metrics.register(Box::new(ClaimGauges::new(claims)?))?;
        Ok(Self {
            create_attempts,
            create_failures,
        })
    }

    /// Counts one create request, and whether it failed.
    pub(crate) fn create_attempted(&self, failed: bool) {
        self.create_attempts.inc();
        if failed {
            self.create_failures.inc();
        }
    }
}

/// `resourceclaim_controller_resource_claims` and
/// `resourceclaim_controller_allocated_resource_claims`, counted from the
/// controller's claim cache at every scrape (so they can never drift from
/// what the watch delivered).
struct ClaimGauges {
    claims: Arc<ClaimCache>,
    total: IntGauge,
    allocated: IntGauge,
    descs: Vec<Desc>,
}

impl ClaimGauges {
    fn new(claims: Arc<ClaimCache>) -> Result<Self, MetricsError> {
        let total = IntGauge::new(
            "resourceclaim_controller_resource_claims",
            "Number of ResourceClaims",
        )?;
        let allocated = IntGauge::new(
            "resourceclaim_controller_allocated_resource_claims",
            "Number of allocated ResourceClaims",
        )?;
        let descs = total
            .desc()
            .into_iter()
            .chain(allocated.desc())
            .cloned()
            .collect();
        Ok(Self {
            claims,
            total,
            allocated,
            descs,
        })
    }
}

impl Collector for ClaimGauges {
    fn desc(&self) -> Vec<&Desc> {
        self.descs.iter().collect()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let (total, allocated) = self.claims.counts();
        self.total.set(i64::try_from(total).unwrap_or(i64::MAX));
        self.allocated
            .set(i64::try_from(allocated).unwrap_or(i64::MAX));
        self.total
            .collect()
            .into_iter()
            .chain(self.allocated.collect())
            .collect()
    }
}
