//! The ResourceClaim controller's own series, with upstream's names and
//! labels (`pkg/controller/resourceclaim/metrics`, Kubernetes 1.35): the
//! claims it tried to create, by outcome and admin access, and at scrape
//! time the claims there are, by allocation, admin access and source.
//! They are registered in the process's one registry.

use std::sync::{Arc, Mutex};

use prometheus::core::{Collector, Desc};
use prometheus::proto::MetricFamily;
use prometheus::{IntCounterVec, IntGaugeVec, Opts};

use super::claims::ClaimStore;
use super::objects::{claim_source, is_allocated, requests_admin_access};
use crate::runtime::metrics::{Metrics, MetricsError};

fn bool_label(value: bool) -> &'static str {
    if value { "true" } else { "false" }
}

/// The counter the decisions bump.
#[derive(Clone, Debug)]
pub(crate) struct ClaimMetrics {
    creates: IntCounterVec,
}

impl ClaimMetrics {
    /// Creates the series and registers them, with the gauge computed from
    /// `claims`, into `metrics`.
    pub(crate) fn new(metrics: &Metrics, claims: Arc<ClaimStore>) -> Result<Self, MetricsError> {
        let creates = IntCounterVec::new(
            Opts::new(
                "resourceclaim_controller_creates_total",
                "Number of ResourceClaims creation requests, categorized by creation status and admin access",
            ),
            &["status", "admin_access"],
        )?;
        metrics.register(Box::new(creates.clone()))?;
        metrics.register(Box::new(ClaimGauge::new(claims)?))?;
        Ok(Self { creates })
    }

    /// Counts one create request of a claim asking for admin access or
    /// not, and whether it failed.
    pub(crate) fn create_attempted(&self, admin_access: bool, failed: bool) {
        let status = if failed { "failure" } else { "success" };
        self.creates
            .with_label_values(&[status, bool_label(admin_access)])
            .inc();
    }
}

/// `resourceclaim_controller_resource_claims`, counted from the claim
/// cache at every scrape (so it can never drift from what the watch
/// delivered); label sets without claims are left out, as upstream does.
struct ClaimGauge {
    claims: Arc<ClaimStore>,
    /// Reset and filled at each scrape; the lock keeps two scrapes at once
    /// from mixing their counts.
    gauge: Mutex<IntGaugeVec>,
    descs: Vec<Desc>,
}

impl ClaimGauge {
    fn new(claims: Arc<ClaimStore>) -> Result<Self, MetricsError> {
        let gauge = IntGaugeVec::new(
            Opts::new(
                "resourceclaim_controller_resource_claims",
                "Number of ResourceClaims, categorized by allocation status, admin access, and source. Source can be 'resource_claim_template' (created from a template), 'extended_resource' (extended resources), or empty (manually created by a user).",
            ),
            &["allocated", "admin_access", "source"],
        )?;
        let descs = gauge.desc().into_iter().cloned().collect();
        Ok(Self {
            claims,
            gauge: Mutex::new(gauge),
            descs,
        })
    }
}

impl Collector for ClaimGauge {
    fn desc(&self) -> Vec<&Desc> {
        self.descs.iter().collect()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let counts = self.claims.count_by(|claim| {
            (
                is_allocated(claim),
                requests_admin_access(&claim.spec),
                claim_source(claim),
            )
        });
        let gauge = self
            .gauge
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        gauge.reset();
        for ((allocated, admin_access, source), count) in counts {
            gauge
                .with_label_values(&[
                    bool_label(allocated),
                    bool_label(admin_access),
                    source.label(),
                ])
                .set(i64::try_from(count).unwrap_or(i64::MAX));
        }
        gauge.collect()
    }
}
