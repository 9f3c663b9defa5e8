//! The gauges set when Prometheus scrapes, as upstream's collector sets
//! them: `pv_collector_*` from the store's census
//! ([`crate::pv::census`]), the depths of the two queues, the number of
//! claims waiting for a volume and the store's sizes. Wiring: it reads the
//! store and the queues the wiring built, and nothing below the store
//! reads it.

use std::collections::BTreeMap;
use std::sync::Arc;

use prometheus::core::{Collector, Desc};
use prometheus::proto::MetricFamily;
use prometheus::{GaugeVec, Opts};

use crate::pv::keys::VolumeName;
use crate::pv::store::PvStore;
use crate::runtime::keys::ObjectKey;
use crate::runtime::metrics::MetricsError;
use crate::runtime::queue::WorkQueue;

/// Computes the state gauges at scrape time: upstream's `pv_collector_*`
/// from the store's census, and the queue depths and store sizes.
pub(crate) struct StateCollector {
    store: Arc<PvStore>,
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
    store_objects: GaugeVec,
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
            store_objects: GaugeVec::new(
                Opts::new(
                    "pv_controller_store_objects",
                    "Volumes and claims held in the binder's store, by kind",
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
            &self.store_objects,
            &self.waiting_claims,
        ]
    }
}

impl StateCollector {
    /// A collector over the controller's store and queues.
    pub(crate) fn new(
        store: Arc<PvStore>,
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
            store,
            volume_queue,
            claim_queue,
            waiting_claims: Box::new(waiting_claims),
            descs,
        })
    }

    /// Sets every gauge from the store's census and the queues.
    fn fill(&self, gauges: &StateGauges) {
        let (mut bound_pv, mut unbound_pv, mut total_pv) =
            (Counts::new(), Counts::new(), Counts::new());
        for (tally, n) in self.store.volume_census() {
            let by_bound = if tally.bound {
                &mut bound_pv
            } else {
                &mut unbound_pv
            };
            add(by_bound, vec![tally.class], n);
            add(&mut total_pv, vec![tally.plugin, tally.mode], n);
        }
        let (mut bound_pvc, mut unbound_pvc) = (Counts::new(), Counts::new());
        for (tally, n) in self.store.claim_census() {
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
            .store_objects
            .with_label_values(&["persistentvolume"])
            .set(self.store.volumes_len() as f64);
        gauges
            .store_objects
            .with_label_values(&["persistentvolumeclaim"])
            .set(self.store.claims_len() as f64);
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
mod tests;
