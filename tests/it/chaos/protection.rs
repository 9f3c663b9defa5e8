//! Stand-ins for kube-controller-manager's pvc-protection and
//! pv-protection controllers, beside memapi's StorageObjectInUseProtection
//! admission (which gives every volume and claim the replicas create its
//! finalizer): most volumes and claims the test world creates carry
//! `kubernetes.io/pv-protection` / `kubernetes.io/pvc-protection`
//! ([`Protection::mark`]); the others get theirs after a while, as the
//! protection controllers add a missing one to an object not being
//! deleted. A deleted volume or claim stays, terminating, until its
//! finalizer is removed: a claim's once no pod on a node names it, a
//! volume's once it is not Bound, as upstream's controllers decide. Each
//! waits a delay drawn from the seed first (the controllers' latency, now
//! and then a pod that still uses a claim for a while), so the replicas
//! see terminating objects for a time.
//!
//! The stand-ins write to the store directly: the request faults are the
//! replicas'.

use std::collections::HashMap;
use std::time::Duration;

use k8s_names::{FINALIZER_PV_PROTECTION, FINALIZER_PVC_PROTECTION};
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use memapi::MemApi;
use tokio::time::Instant;

use super::world::Rng;

/// Share of the volumes and claims the test world creates with their
/// protection finalizer already (the rest get it from the stand-ins).
const MARKED: f64 = 0.8;

/// What the stand-ins did in one step.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Done {
    /// Protection finalizers added to objects that lacked them.
    pub(crate) added: u64,
    /// Protection finalizers removed from objects being deleted.
    pub(crate) removed: u64,
}

/// The protection controllers of one run.
pub(crate) struct Protection {
    rng: Rng,
    /// When each object (by UID) may next be acted on.
    due: HashMap<String, Instant>,
}

fn has(meta: &ObjectMeta, finalizer: &str) -> bool {
    meta.finalizers.iter().flatten().any(|f| f == finalizer)
}

fn uid(meta: &ObjectMeta) -> String {
    meta.uid.clone().unwrap_or_default()
}

/// Whether a pod placed on a node names the claim in its volumes: the
/// pvc-protection controller's "in use" (an unscheduled pod never
/// started, and the kubelet starts none on a claim being deleted).
fn used_by_a_pod(claim: &PersistentVolumeClaim, pods: &[Pod]) -> bool {
    pods.iter().any(|pod| {
        let Some(spec) = pod.spec.as_ref() else {
            return false;
        };
        pod.metadata.namespace == claim.metadata.namespace
            && spec.node_name.is_some()
            && spec.volumes.iter().flatten().any(|v| {
                v.persistent_volume_claim
                    .as_ref()
                    .is_some_and(|c| Some(&c.claim_name) == claim.metadata.name.as_ref())
            })
    })
}

fn volume_phase(v: &PersistentVolume) -> Option<&str> {
    v.status.as_ref().and_then(|s| s.phase.as_deref())
}

/// Adds `finalizer`, or removes it, on `meta`.
fn set(meta: &mut ObjectMeta, finalizer: &str, on: bool) {
    let mut finalizers = meta.finalizers.take().unwrap_or_default();
    finalizers.retain(|f| f != finalizer);
    if on {
        finalizers.push(finalizer.to_string());
    }
    meta.finalizers = (!finalizers.is_empty()).then_some(finalizers);
}

impl Protection {
    pub(crate) fn new(seed: u64) -> Self {
        Self {
            rng: Rng::new(seed ^ 0x7072_6F74_6563_7421),
            due: HashMap::new(),
        }
    }

    /// Gives most new objects of the test world their finalizer, as the
    /// admission plugin gives it to every object created through the API.
    pub(crate) fn mark(&mut self, meta: &mut ObjectMeta, finalizer: &str) {
        if self.rng.chance(MARKED) {
            set(meta, finalizer, true);
        }
    }

    /// Whether the object's time came: the first look at it draws its
    /// delay (mostly the controllers' latency, sometimes a pod that keeps
    /// a claim for a while); the object is forgotten once acted on.
    fn ready(&mut self, meta: &ObjectMeta, now: Instant) -> bool {
        let rng = &mut self.rng;
        let due = *self.due.entry(uid(meta)).or_insert_with(|| {
            let millis = if rng.chance(0.2) {
                5_000 + rng.below(25_000)
            } else {
                250 + rng.below(2_750)
            };
            now + Duration::from_millis(millis)
        });
        now >= due
    }

    /// One look at every volume and claim: a finalizer added where one is
    /// missing, removed where the object is being deleted and no longer
    /// protected.
    pub(crate) fn step(&mut self, api: &MemApi) -> Done {
        let now = Instant::now();
        let mut done = Done::default();
        let pods = api.list::<Pod>();
        for mut claim in api.list::<PersistentVolumeClaim>() {
            let marked = has(&claim.metadata, FINALIZER_PVC_PROTECTION);
            let deleting = claim.metadata.deletion_timestamp.is_some();
            let act = match (deleting, marked) {
                (false, false) => true,
                (true, true) => !used_by_a_pod(&claim, &pods),
                _ => false,
            };
            if !act || !self.ready(&claim.metadata, now) {
                continue;
            }
            self.due.remove(&uid(&claim.metadata));
            set(&mut claim.metadata, FINALIZER_PVC_PROTECTION, !deleting);
            api.put(&claim).expect("protection of a claim");
            if deleting {
                done.removed += 1;
            } else {
                done.added += 1;
            }
        }
        for mut volume in api.list::<PersistentVolume>() {
            let marked = has(&volume.metadata, FINALIZER_PV_PROTECTION);
            let deleting = volume.metadata.deletion_timestamp.is_some();
            let act = match (deleting, marked) {
                (false, false) => true,
                (true, true) => volume_phase(&volume) != Some("Bound"),
                _ => false,
            };
            if !act || !self.ready(&volume.metadata, now) {
                continue;
            }
            self.due.remove(&uid(&volume.metadata));
            set(&mut volume.metadata, FINALIZER_PV_PROTECTION, !deleting);
            api.put(&volume).expect("protection of a volume");
            if deleting {
                done.removed += 1;
            } else {
                done.added += 1;
            }
        }
        done
    }
}
