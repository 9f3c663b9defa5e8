//! `pv_controller_claims_waiting_for_consumer`: the unbound claims that
//! wait for a pod as designed. A claim of a WaitForFirstConsumer class
//! is not bound (nor provisioned) until a pod using it is scheduled and
//! the scheduler names its node; until then it stays Pending, and counts
//! in upstream's `pv_collector_unbound_pvc_count`. This gauge has the
//! same labels and one series for each of that gauge's, so that
//! `unbound - waiting` counts the claims that are Pending for any other
//! reason (the alert `PVClaimsPendingLong`).
//!
//! Read at scrape time from the store's census (which counts the
//! unbound claims naming neither a volume nor a selected node) and the
//! StorageClasses' binding modes: a handful of tallies, whatever the
//! number of claims.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::storage::v1::StorageClass;
use prometheus::core::{Collector, Desc};
use prometheus::proto::MetricFamily;
use prometheus::{GaugeVec, Opts};

use crate::pv::store::PvStore;
use crate::runtime::informer::MemStore;
use crate::runtime::keys::ObjectKey;
use crate::runtime::metrics::MetricsError;

/// The collector of the gauge.
pub(crate) struct ConsumerWait {
    store: Arc<PvStore>,
    classes: Arc<MemStore<StorageClass>>,
    desc: Desc,
}

impl ConsumerWait {
    /// The gauge over the controller's store and the StorageClasses.
    pub(crate) fn new(
        store: Arc<PvStore>,
        classes: Arc<MemStore<StorageClass>>,
    ) -> Result<Self, MetricsError> {
        let desc = gauge()
            .map_err(MetricsError::from)?
            .desc()
            .first()
            .map(|desc| (*desc).clone())
            .ok_or_else(|| MetricsError::from(prometheus::Error::Msg("no desc".to_string())))?;
        Ok(Self {
            store,
            classes,
            desc,
        })
    }

    /// Whether the class `name` binds on first consumer.
    fn waits_for_consumer(&self, name: &str) -> bool {
        !name.is_empty()
            && self
                .classes
                .get(&ObjectKey::cluster(name))
                .is_some_and(|class| {
                    class.volume_binding_mode.as_deref() == Some("WaitForFirstConsumer")
                })
    }
}

fn gauge() -> Result<GaugeVec, prometheus::Error> {
    GaugeVec::new(
        Opts::new(
            "pv_controller_claims_waiting_for_consumer",
            "Unbound claims of a WaitForFirstConsumer class that wait for a pod to be scheduled (no selected node, no volume named), by the labels of pv_collector_unbound_pvc_count",
        ),
        &["namespace", "storage_class", "volume_attributes_class"],
    )
}

impl Collector for ConsumerWait {
    fn desc(&self) -> Vec<&Desc> {
        vec![&self.desc]
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let Ok(gauge) = gauge() else {
            return Vec::new();
        };
        let mut counts: BTreeMap<[String; 3], f64> = BTreeMap::new();
        let mut class_waits = BTreeMap::new();
        for (tally, n) in self.store.claim_census() {
            if tally.bound {
                continue;
            }
            let waits = tally.unscheduled
                && *class_waits
                    .entry(tally.class.clone())
                    .or_insert_with(|| self.waits_for_consumer(&tally.class));
            let count = counts
                .entry([tally.namespace, tally.class, tally.attributes_class])
                .or_insert(0.0);
            if waits {
                *count += n as f64;
            }
        }
        for (labels, count) in counts {
            gauge
                .with_label_values(&[&labels[0], &labels[1], &labels[2]])
                .set(count);
        }
        gauge.collect()
    }
}
