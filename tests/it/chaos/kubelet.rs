//! The test's kubelet: it runs every pod it finds (recycler pods, and pods
//! with ResourceClaims once the scheduler placed them) to success after a
//! while, and sometimes lets a finished pod linger (Terminating on a node
//! that is gone) for a while after it is deleted.

use std::collections::HashMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Pod, PodStatus};
use memapi::MemApi;
use tokio::time::Instant;

use super::claims::has_claims;
use super::world::Rng;

const LINGER_FINALIZER: &str = "example.com/node-gone";

/// What the kubelet will do with one pod.
struct Plan {
    finish_at: Instant,
    linger: Option<Duration>,
    finished: bool,
    release_at: Option<Instant>,
}

/// The kubelet of one chaos run.
pub(crate) struct Kubelet {
    rng: Rng,
    plans: HashMap<String, Plan>,
    /// Pods that lingered after their deletion.
    pub(crate) lingered: u64,
}

impl Kubelet {
    pub(crate) fn new(seed: u64) -> Self {
        Self {
            rng: Rng::new(seed),
            plans: HashMap::new(),
            lingered: 0,
        }
    }

    /// One look at the pods: finishes those whose time came, releases the
    /// lingering ones whose time came. Talks to the store directly (the
    /// faults are the controller's, not the kubelet's).
    pub(crate) fn step(&mut self, api: &MemApi, lingering: bool) {
        let now = Instant::now();
        for pod in api.list::<Pod>() {
            let placed = pod
                .spec
                .as_ref()
                .and_then(|s| s.node_name.as_ref())
                .is_some();
            if has_claims(&pod) && !placed {
                continue;
            }
            let uid = pod.metadata.uid.clone().unwrap_or_default();
            let rng = &mut self.rng;
            let plan = self.plans.entry(uid).or_insert_with(|| {
                // Pods with claims run longer than a scrub.
                let runs = if has_claims(&pod) {
                    5_000 + rng.below(25_000)
                } else {
                    500 + rng.below(3000)
                };
                Plan {
                    finish_at: now + Duration::from_millis(runs),
                    linger: (lingering && rng.chance(0.3))
                        .then(|| Duration::from_secs(5 + rng.below(40))),
                    finished: false,
                    release_at: None,
                }
            });
            if !plan.finished && now >= plan.finish_at {
                plan.finished = true;
                finish(api, pod.clone(), plan.linger.is_some());
                continue;
            }
            if pod.metadata.deletion_timestamp.is_some() {
                let linger = plan.linger.unwrap_or_default();
                let release_at = *plan.release_at.get_or_insert_with(|| {
                    self.lingered += 1;
                    now + linger
                });
                if now >= release_at {
                    let name = pod.metadata.name.clone().unwrap_or_default();
                    api.remove::<Pod>(pod.metadata.namespace.as_deref(), &name);
                }
            }
        }
    }
}

/// Marks the pod Succeeded (keeping what else its status records); a
/// lingering one gets a node and a finalizer first, so that its deletion
/// leaves it Terminating.
fn finish(api: &MemApi, mut pod: Pod, linger: bool) {
    if linger {
        pod.metadata
            .finalizers
            .get_or_insert_with(Vec::new)
            .push(LINGER_FINALIZER.to_string());
        if let Some(spec) = pod.spec.as_mut() {
            spec.node_name = Some("node-gone".to_string());
        }
    }
    pod.status.get_or_insert_with(PodStatus::default).phase = Some("Succeeded".to_string());
    // A pod deleted meanwhile is simply not there any more.
    let _ = api.put(&pod);
}
