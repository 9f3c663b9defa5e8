//! The safety invariants, checked on the whole history of a run: every
//! change of every volume, claim and recycler pod, in the server's order,
//! recorded by memapi observers that no injected fault can hide.
//!
//! - no volume is claimed twice: two live claims are never Bound to one
//!   volume at once;
//! - no volume is deleted, nor its storage deleted, unless its policy is
//!   Delete and its claim was gone (or, provisioned, its claim was bound
//!   to another volume), or a user deleted it;
//! - no recycler pod is created for a claim that still exists, and no
//!   second one for one release (volume and claim UIDs) while the first
//!   exists or once the volume recorded the first (a pod made just before
//!   its leader died, never recorded, is deleted and made again);
//! - no second volume object is provisioned for a live claim;
//! - a recycled volume becomes Available only after a pod made for that
//!   very release ran to success.

use std::collections::{BTreeSet, HashMap, HashSet};

use k8s_names::ANN_DYNAMICALLY_PROVISIONED;
use k8s_names::ANN_RECYCLED_VOLUME_UID;
use k8s_names::ANN_RECYCLER_POD_UID;
use k8s_names::ANN_RELEASED_CLAIM_UID;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use memapi::{ChangeType, MemApi, Observed, Observer};

use super::world::StorageCall;

/// One change of any kind, for the merged timeline.
enum Change {
    Volume(ChangeType, Box<PersistentVolume>),
    Claim(ChangeType, Box<PersistentVolumeClaim>),
    Pod(ChangeType, Box<Pod>),
}

/// The observers of one run.
pub(crate) struct History {
    volumes: Observer<PersistentVolume>,
    claims: Observer<PersistentVolumeClaim>,
    pods: Observer<Pod>,
    timeline: Vec<(u64, Change)>,
}

fn uid<K: kube::Resource>(o: &K) -> String {
    o.meta().uid.clone().unwrap_or_default()
}

fn name<K: kube::Resource>(o: &K) -> String {
    o.meta().name.clone().unwrap_or_default()
}

fn annotation<'a, K: kube::Resource>(o: &'a K, key: &str) -> Option<&'a str> {
    o.meta().annotations.as_ref()?.get(key).map(String::as_str)
}

fn volume_phase(v: &PersistentVolume) -> &str {
    v.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("")
}

fn policy(v: &PersistentVolume) -> &str {
    v.spec
        .as_ref()
        .and_then(|s| s.persistent_volume_reclaim_policy.as_deref())
        .unwrap_or("")
}

fn claim_uid_of(v: &PersistentVolume) -> Option<String> {
    v.spec.as_ref()?.claim_ref.as_ref()?.uid.clone()
}

/// The volume a claim is Bound to, if it is.
fn bound_volume(c: &PersistentVolumeClaim) -> Option<String> {
    let bound = c.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound");
    bound
        .then(|| c.spec.as_ref()?.volume_name.clone())
        .flatten()
}

fn drain<K>(
    observer: &mut Observer<K>,
    into: &mut Vec<(u64, Change)>,
    wrap: fn(ChangeType, Box<K>) -> Change,
) where
    K: serde::de::DeserializeOwned,
{
    for Observed {
        change,
        resource_version,
        object,
    } in observer.drain()
    {
        into.push((resource_version, wrap(change, Box::new(object))));
    }
}

/// The state the checks keep while they walk the timeline.
#[derive(Default)]
struct Walk {
    /// Live claims by UID: the volume each is Bound to, if any.
    live_claims: HashMap<String, Option<String>>,
    /// Live claims by UID: the volume each names (`spec.volumeName`).
    named: HashMap<String, String>,
    gone_claims: HashSet<String>,
    volumes: HashMap<String, PersistentVolume>,
    /// Volume UID and claim UID of each release whose recycler pod ran.
    scrubbed: HashSet<(String, String)>,
    /// The recycler pods of each release (by UID), and whether each still
    /// exists.
    recycler_pods: HashMap<(String, String), Vec<(String, bool)>>,
    /// The recycler pods (by UID) a volume ever recorded as its own.
    recorded_pods: HashSet<String>,
    provisioned: HashMap<String, u32>,
    /// How each deleted provisioned volume looked when it went, by name.
    deleted_as: HashMap<String, String>,
    /// Volumes (by UID) that were Released with policy Delete.
    deletable: HashSet<String>,
    problems: Vec<String>,
}

impl History {
    /// Starts recording (before anything is created).
    pub(crate) fn start(api: &MemApi) -> Self {
        Self {
            volumes: api.observe().expect("observe volumes"),
            claims: api.observe().expect("observe claims"),
            pods: api.observe().expect("observe pods"),
            timeline: Vec::new(),
        }
    }

    /// Takes in what the observers saw so far.
    pub(crate) fn collect(&mut self) {
        drain(&mut self.volumes, &mut self.timeline, Change::Volume);
        drain(&mut self.claims, &mut self.timeline, Change::Claim);
        drain(&mut self.pods, &mut self.timeline, Change::Pod);
    }

    /// Whether a volume is reserved for a claim that does not name it yet:
    /// a bind between its volume write and its claim write.
    pub(crate) fn mid_bind(api: &MemApi) -> bool {
        let claims = api.list::<PersistentVolumeClaim>();
        api.list::<PersistentVolume>().iter().any(|v| {
            let Some(uid) = claim_uid_of(v) else {
                return false;
            };
            claims.iter().any(|c| {
                c.metadata.uid.as_deref() == Some(uid.as_str())
                    && c.spec
                        .as_ref()
                        .and_then(|s| s.volume_name.as_deref())
                        .is_none()
            })
        })
    }

    /// Every violation of the safety invariants over the whole run;
    /// `user_deleted` are the volume UIDs users deleted, `storage` the
    /// calls the storage backend received.
    pub(crate) fn check(
        &mut self,
        user_deleted: &BTreeSet<String>,
        storage: &[StorageCall],
    ) -> Vec<String> {
        self.collect();
        let mut timeline = std::mem::take(&mut self.timeline);
        timeline.sort_by_key(|(rv, _)| *rv);
        let mut walk = Walk::default();
        for (_, change) in &timeline {
            match change {
                Change::Claim(ty, c) => walk.claim(*ty, c),
                Change::Volume(ty, v) => walk.volume(*ty, v, user_deleted),
                Change::Pod(ty, p) => walk.pod(*ty, p),
            }
        }
        for call in storage {
            let StorageCall::Delete { volume, uid } = call else {
                continue;
            };
            // No UID: storage whose volume object could not be stored is
            // deleted again; wrong if the object was stored after all.
            let wrong = if uid.is_empty() {
                walk.provisioned.contains_key(volume)
            } else {
                !walk.deletable.contains(uid) && !user_deleted.contains(uid)
            };
            if wrong {
                walk.problems.push(format!(
                    "storage of volume {volume} ({uid:?}) deleted, but it was never released with policy Delete"
                ));
            }
        }
        self.timeline = timeline;
        walk.problems
    }
}

impl Walk {
    fn claim(&mut self, ty: ChangeType, c: &PersistentVolumeClaim) {
        let id = uid(c);
        if ty == ChangeType::Deleted {
            self.live_claims.remove(&id);
            self.named.remove(&id);
            self.gone_claims.insert(id);
            return;
        }
        if let Some(volume) = c.spec.as_ref().and_then(|s| s.volume_name.clone()) {
            self.named.insert(id.clone(), volume);
        }
        let bound = bound_volume(c);
        if let Some(volume) = &bound
            && let Some((other, _)) = self
                .live_claims
                .iter()
                .find(|(u, b)| **u != id && b.as_ref() == Some(volume))
        {
            self.problems.push(format!(
                "volume {volume} claimed twice: claim {} ({id}) Bound while claim {other} is",
                name(c)
            ));
        }
        self.live_claims.insert(id, bound);
    }

    fn volume(&mut self, ty: ChangeType, v: &PersistentVolume, user_deleted: &BTreeSet<String>) {
        let id = uid(v);
        let volume = name(v);
        let before = self.volumes.get(&volume).filter(|b| uid(*b) == id).cloned();
        if let Some(pod) = annotation(v, ANN_RECYCLER_POD_UID) {
            self.recorded_pods.insert(pod.to_string());
        }
        if ty == ChangeType::Added && volume.starts_with("pvc-") {
            let n = self.provisioned.entry(volume.clone()).or_default();
            *n += 1;
            if *n > 1 {
                self.problems.push(format!(
                    "volume {volume} provisioned a second time for claim {:?}, {} (the first went: {})",
                    claim_uid_of(v),
                    if self.claim_gone(v) { "deleted" } else { "live" },
                    self.deleted_as.get(&volume).map_or("never deleted", String::as_str)
                ));
            }
        }
        let released = matches!(volume_phase(v), "Released" | "Failed");
        if released && self.deletable_now(v) {
            self.deletable.insert(id.clone());
        }
        if ty == ChangeType::Deleted {
            let claim = claim_uid_of(v);
            self.deleted_as.insert(
                volume.clone(),
                format!(
                    "phase {}, claim {claim:?} naming {:?}, user-deleted {}",
                    volume_phase(v),
                    claim.as_ref().and_then(|c| self.named.get(c)),
                    user_deleted.contains(&id)
                ),
            );
            if !(user_deleted.contains(&id) || self.deletable_now(v)) {
                self.problems.push(format!(
                    "volume {volume} deleted, policy {} and claim {:?} not gone",
                    policy(v),
                    claim_uid_of(v)
                ));
            }
            self.volumes.remove(&volume);
            return;
        }
        if let Some(before) = before
            && policy(v) == "Recycle"
            && volume_phase(v) == "Available"
            && matches!(volume_phase(&before), "Released" | "Failed")
            && let Some(claim) = claim_uid_of(&before)
            && !self.scrubbed.contains(&(id.clone(), claim.clone()))
        {
            self.problems.push(format!(
                "volume {volume} made Available without a recycler pod that ran for the release of claim {claim}"
            ));
        }
        self.volumes.insert(volume, v.clone());
    }

    fn claim_gone(&self, v: &PersistentVolume) -> bool {
        claim_uid_of(v).is_some_and(|u| self.gone_claims.contains(&u))
    }

    /// Whether a volume of policy Delete may be deleted: its claim is gone,
    /// or (a volume with `provisioned-by`) its claim names another volume,
    /// so it is not needed (upstream deletes it too).
    fn deletable_now(&self, v: &PersistentVolume) -> bool {
        let provisioned = annotation(v, ANN_DYNAMICALLY_PROVISIONED).is_some();
        let bound_elsewhere = claim_uid_of(v)
            .and_then(|u| self.named.get(&u))
            .is_some_and(|other| *other != name(v));
        policy(v) == "Delete" && (self.claim_gone(v) || provisioned && bound_elsewhere)
    }

    fn pod(&mut self, ty: ChangeType, p: &Pod) {
        let (Some(volume), Some(claim)) = (
            annotation(p, ANN_RECYCLED_VOLUME_UID),
            annotation(p, ANN_RELEASED_CLAIM_UID),
        ) else {
            return;
        };
        let release = (volume.to_string(), claim.to_string());
        match ty {
            ChangeType::Added => {
                if !self.gone_claims.contains(claim) {
                    self.problems.push(format!(
                        "recycler pod {} created while claim {claim} exists",
                        name(p)
                    ));
                }
                let pods = self.recycler_pods.entry(release).or_default();
                let live = pods.iter().any(|(_, exists)| *exists);
                let recorded = pods.iter().any(|(pod, _)| self.recorded_pods.contains(pod));
                if live || recorded {
                    self.problems.push(format!(
                        "second recycler pod {} for the release of claim {claim} (the first {})",
                        name(p),
                        if live {
                            "still exists"
                        } else {
                            "was recorded on the volume"
                        }
                    ));
                }
                pods.push((uid(p), true));
            }
            ChangeType::Modified => {
                let succeeded =
                    p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Succeeded");
                if succeeded {
                    self.scrubbed.insert(release);
                }
            }
            ChangeType::Deleted => {
                let gone = uid(p);
                for (pod, exists) in self.recycler_pods.entry(release).or_default() {
                    if *pod == gone {
                        *exists = false;
                    }
                }
            }
        }
    }
}
