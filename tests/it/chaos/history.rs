//! The safety invariants, checked at every step of a run: every change of
//! every volume, claim, pod and ResourceClaim, in the server's order
//! (recorded by memapi observers that no injected fault can hide), is
//! checked against the state just after it, and a violation names its
//! invariant, its object and the step it broke at: the request that
//! committed the change ([`Steps`]), or the test world.
//!
//! - `volume-claimed-twice`: two live claims are never Bound to one volume
//!   at once;
//! - `unfit-binding`: no claim is bound to a volume that does not fit it
//!   (checked when the volume's claimRef takes the claim's UID, by the rules
//!   of [`fit`](super::fit) for how the volume was chosen), nor to another
//!   volume than the one it names;
//! - `unscrubbed-reuse`: a volume a claim was Bound to is offered again
//!   (Available, or another claim's) only after a recycler pod made for
//!   that very release ran to success, and a recycled volume becomes
//!   Available only so;
//! - `finalizer-lost`: the controller removes only its own finalizers,
//!   and only once they hold nothing back: the scheduler's
//!   `resource.kubernetes.io/delete-protection` from a ResourceClaim that
//!   is neither allocated nor reserved, `kubernetes.io/pv-controller` (and
//!   an external provisioner's) from a volume whose storage was deleted or
//!   whose policy is not Delete; never a volume's or a claim's protection
//!   finalizer (`kubernetes.io/pv-protection`, `kubernetes.io/pvc-protection`),
//!   which only its protection controller removes, from an object being
//!   deleted (a volume only once it is not Bound);
//! - `claim-lost-wrongly`: the controller marks a claim Lost only when the
//!   volume it names is gone or bound to another claim (upstream's
//!   `ClaimLost` and `ClaimMisbound`, which say the data is lost), never
//!   while that volume's claimRef still names it;
//! - `volume-deleted-wrongly`: no volume is deleted unless its policy is
//!   Delete and its claim was gone (or, provisioned, its claim was bound to
//!   another volume), or a user deleted it; `storage-deleted-wrongly`: nor
//!   its storage;
//! - `recycler-pod-for-live-claim`: no recycler pod is created for a claim
//!   that still exists; `second-recycler-pod`: nor a second one for one
//!   release (volume and claim UIDs) while the first exists or once the
//!   volume recorded the first (a pod made just before its leader died,
//!   never recorded, is deleted and made again);
//! - `second-provisioned-volume`: no second volume object is provisioned
//!   for a claim.
//!
//! The requests themselves are checked by [`writes`](super::writes).

use std::collections::{BTreeSet, HashMap, HashSet};

use k8s_names::{
    ANN_DYNAMICALLY_PROVISIONED, ANN_RECYCLED_VOLUME_UID, ANN_RECYCLER_POD_UID,
    ANN_RELEASED_CLAIM_UID, FINALIZER_EXTERNAL_PROVISIONER, FINALIZER_PV_CONTROLLER,
    FINALIZER_PV_PROTECTION, FINALIZER_PVC_PROTECTION, FINALIZER_RESOURCE_DELETE_PROTECTION,
};
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::resource::v1::ResourceClaim;
use memapi::{ChangeType, MemApi, Observed, Observer};

use super::fit::{Chosen, misfit};
use super::steps::{Steps, Violation};
use super::world::StorageCall;
use super::writes::unconditional;

/// One change of any kind, for the merged timeline.
enum Change {
    Volume(ChangeType, Box<PersistentVolume>),
    Claim(ChangeType, Box<PersistentVolumeClaim>),
    Pod(ChangeType, Box<Pod>),
    ResourceClaim(ChangeType, Box<ResourceClaim>),
}

/// The observers of one run.
pub(crate) struct History {
    volumes: Observer<PersistentVolume>,
    claims: Observer<PersistentVolumeClaim>,
    pods: Observer<Pod>,
    resource_claims: Observer<ResourceClaim>,
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

fn claim_phase(c: &PersistentVolumeClaim) -> &str {
    c.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("")
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

/// Whether the volume is pre-bound to the claim named `claim` (and of UID
/// `id`): its claimRef names it, without a UID or with that one.
fn pre_bound_to(v: &PersistentVolume, claim: &str, id: &str) -> bool {
    v.spec
        .as_ref()
        .and_then(|s| s.claim_ref.as_ref())
        .is_some_and(|r| {
            r.name.as_deref() == Some(claim) && r.uid.as_deref().is_none_or(|u| u == id)
        })
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

/// A violation found while walking, before its step is named.
struct Found {
    invariant: &'static str,
    object: String,
    version: u64,
    detail: String,
}

/// The state the checks keep while they walk the timeline.
#[derive(Default)]
struct Walk {
    /// The version of the change being walked.
    version: u64,
    /// Whether a request (a replica) made that change, not the test world.
    by_request: bool,
    /// Live claims by UID: the volume each is Bound to, if any.
    live_claims: HashMap<String, Option<String>>,
    /// Live claims by UID, as last seen.
    claims: HashMap<String, PersistentVolumeClaim>,
    /// Live claims by UID: the volume each names (`spec.volumeName`).
    named: HashMap<String, String>,
    /// Claims by UID: the volume each named when it was created.
    user_named: HashMap<String, String>,
    gone_claims: HashSet<String>,
    volumes: HashMap<String, PersistentVolume>,
    /// Volumes (by UID) a claim was Bound to: that claim's UID, until the
    /// volume is offered again.
    tenants: HashMap<String, String>,
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
    /// Volumes (by UID) whose storage was deleted at some point of the run.
    storage_deleted: HashSet<String>,
    /// The finalizers of every object, by kind and key, as last seen.
    finalizers: HashMap<String, Vec<String>>,
    found: Vec<Found>,
}

impl History {
    /// Starts recording (before anything is created).
    pub(crate) fn start(api: &MemApi) -> Self {
        Self {
            volumes: api.observe().expect("observe volumes"),
            claims: api.observe().expect("observe claims"),
            pods: api.observe().expect("observe pods"),
            resource_claims: api.observe().expect("observe ResourceClaims"),
            timeline: Vec::new(),
        }
    }

    /// Takes in what the observers saw so far.
    pub(crate) fn collect(&mut self) {
        drain(&mut self.volumes, &mut self.timeline, Change::Volume);
        drain(&mut self.claims, &mut self.timeline, Change::Claim);
        drain(&mut self.pods, &mut self.timeline, Change::Pod);
        drain(
            &mut self.resource_claims,
            &mut self.timeline,
            Change::ResourceClaim,
        );
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

    /// Every violation of the safety invariants over the whole run, the
    /// first to break first; `user_deleted` are the volume UIDs users
    /// deleted, `storage` the calls the storage backend received, `steps`
    /// memapi's request log.
    pub(crate) fn check(
        &mut self,
        user_deleted: &BTreeSet<String>,
        storage: &[StorageCall],
        steps: &Steps,
    ) -> Vec<Violation> {
        self.collect();
        let mut timeline = std::mem::take(&mut self.timeline);
        timeline.sort_by_key(|(rv, _)| *rv);
        let mut walk = Walk {
            storage_deleted: storage
                .iter()
                .filter_map(|call| match call {
                    StorageCall::Delete { uid, .. } => Some(uid.clone()),
                    StorageCall::Provision { .. } => None,
                })
                .collect(),
            ..Walk::default()
        };
        for (version, change) in &timeline {
            walk.version = *version;
            walk.by_request = steps.request(*version).is_some();
            match change {
                Change::Claim(ty, c) => walk.claim(*ty, c),
                Change::Volume(ty, v) => walk.volume(*ty, v, user_deleted),
                Change::Pod(ty, p) => walk.pod(*ty, p),
                Change::ResourceClaim(ty, c) => walk.resource_claim(*ty, c),
            }
        }
        let end = timeline.last().map_or(0, |(rv, _)| *rv);
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
                walk.found.push(Found {
                    invariant: "storage-deleted-wrongly",
                    object: format!("volume {volume}"),
                    version: end,
                    detail: format!(
                        "storage ({uid:?}) deleted, but the volume was never released with policy Delete"
                    ),
                });
            }
        }
        self.timeline = timeline;
        let mut violations: Vec<Violation> = walk
            .found
            .into_iter()
            .map(|f| Violation {
                invariant: f.invariant,
                object: f.object,
                version: f.version,
                step: steps.describe(f.version),
                detail: f.detail,
            })
            .chain(unconditional(steps))
            .collect();
        violations.sort_by_key(|v| v.version);
        violations
    }
}

impl Walk {
    fn violation(&mut self, invariant: &'static str, object: String, detail: String) {
        self.found.push(Found {
            invariant,
            object,
            version: self.version,
            detail,
        });
    }

    fn claim(&mut self, ty: ChangeType, c: &PersistentVolumeClaim) {
        let id = uid(c);
        let removed = self.finalizers_removed("claim", ty, &c.metadata);
        let object = format!("claim {}", name(c));
        self.not_ours(&object, &removed, &[]);
        let deleting = c.metadata.deletion_timestamp.is_some();
        self.protection_kept(&object, &removed, FINALIZER_PVC_PROTECTION, deleting);
        if ty == ChangeType::Deleted {
            self.live_claims.remove(&id);
            self.claims.remove(&id);
            self.named.remove(&id);
            self.gone_claims.insert(id);
            return;
        }
        let named = c.spec.as_ref().and_then(|s| s.volume_name.clone());
        if ty == ChangeType::Added
            && let Some(volume) = &named
        {
            self.user_named.insert(id.clone(), volume.clone());
        }
        if let Some(volume) = named {
            self.named.insert(id.clone(), volume);
        }
        self.lost(c, &id);
        let bound = bound_volume(c);
        if let Some(volume) = &bound
            && let Some((other, _)) = self
                .live_claims
                .iter()
                .find(|(u, b)| **u != id && b.as_ref() == Some(volume))
        {
            let other = other.clone();
            self.violation(
                "volume-claimed-twice",
                format!("volume {volume}"),
                format!("claim {} ({id}) Bound while claim {other} is", name(c)),
            );
        }
        if let Some(volume) = bound.as_ref().and_then(|v| self.volumes.get(v))
            && claim_uid_of(volume).as_deref() == Some(id.as_str())
        {
            self.tenants.insert(uid(volume), id.clone());
        }
        self.live_claims.insert(id.clone(), bound);
        self.claims.insert(id, c.clone());
    }

    /// `claim-lost-wrongly`: a replica marks a claim Lost while the volume
    /// it names (as the server holds it at that step) is bound to it.
    fn lost(&mut self, c: &PersistentVolumeClaim, id: &str) {
        let was_lost = self
            .claims
            .get(id)
            .is_some_and(|b| claim_phase(b) == "Lost");
        if !self.by_request || claim_phase(c) != "Lost" || was_lost {
            return;
        }
        let Some(named) = c.spec.as_ref().and_then(|s| s.volume_name.as_deref()) else {
            return;
        };
        let Some(volume) = self.volumes.get(named) else {
            return;
        };
        if claim_uid_of(volume).as_deref() == Some(id) {
            let detail = format!(
                "marked Lost while volume {named} ({}) is bound to it",
                volume_phase(volume)
            );
            self.violation("claim-lost-wrongly", format!("claim {}", name(c)), detail);
        }
    }

    fn volume(&mut self, ty: ChangeType, v: &PersistentVolume, user_deleted: &BTreeSet<String>) {
        let id = uid(v);
        let volume = name(v);
        let object = format!("volume {volume}");
        let before = self.volumes.get(&volume).filter(|b| uid(*b) == id).cloned();
        self.volume_finalizers(ty, v);
        if let Some(pod) = annotation(v, ANN_RECYCLER_POD_UID) {
            self.recorded_pods.insert(pod.to_string());
        }
        if ty == ChangeType::Added && volume.starts_with("pvc-") {
            let n = self.provisioned.entry(volume.clone()).or_default();
            *n += 1;
            if *n > 1 {
                let detail = format!(
                    "provisioned a second time for claim {:?}, {} (the first went: {})",
                    claim_uid_of(v),
                    if self.claim_gone(v) {
                        "deleted"
                    } else {
                        "live"
                    },
                    self.deleted_as
                        .get(&volume)
                        .map_or("never deleted", String::as_str)
                );
                self.violation("second-provisioned-volume", object.clone(), detail);
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
                let detail = format!(
                    "deleted, policy {} and claim {:?} not gone",
                    policy(v),
                    claim_uid_of(v)
                );
                self.violation("volume-deleted-wrongly", object, detail);
            }
            self.tenants.remove(&id);
            self.volumes.remove(&volume);
            return;
        }
        self.binding(v, before.as_ref());
        self.reuse(v, before.as_ref());
        self.volumes.insert(volume, v.clone());
    }

    /// `unfit-binding`: when the volume's claimRef takes a live claim's
    /// UID (the first write of a bind, or a volume provisioned for it).
    fn binding(&mut self, v: &PersistentVolume, before: Option<&PersistentVolume>) {
        let Some(id) = claim_uid_of(v) else {
            return;
        };
        if before.and_then(claim_uid_of).as_deref() == Some(id.as_str()) {
            return;
        }
        let Some(claim) = self.claims.get(&id) else {
            return;
        };
        let volume = name(v);
        let claim_name = name(claim);
        // A provisioned volume is made pre-bound to its claim.
        let pre_bound = before.is_none_or(|b| pre_bound_to(b, &claim_name, &id));
        let detail = match self.user_named.get(&id) {
            Some(wanted) if *wanted != volume => Some(format!("the claim names volume {wanted}")),
            wanted => misfit(v, claim, Chosen::of(wanted.is_some(), pre_bound)),
        };
        if let Some(detail) = detail {
            self.violation(
                "unfit-binding",
                format!("claim {claim_name}"),
                format!("bound to volume {volume}: {detail}"),
            );
        }
    }

    /// `unscrubbed-reuse`: a volume offered again after a tenant, or made
    /// Available by a recycle, without a scrub of that release.
    fn reuse(&mut self, v: &PersistentVolume, before: Option<&PersistentVolume>) {
        let id = uid(v);
        let object = format!("volume {}", name(v));
        if let Some(tenant) = self.tenants.get(&id).cloned()
            && claim_uid_of(v).as_deref() != Some(tenant.as_str())
        {
            self.tenants.remove(&id);
            if !self.scrubbed.contains(&(id.clone(), tenant.clone())) {
                let detail = format!(
                    "offered again ({}, claim {:?}) after claim {tenant} was Bound to it, without a recycler pod that ran for that release",
                    volume_phase(v),
                    claim_uid_of(v)
                );
                self.violation("unscrubbed-reuse", object.clone(), detail);
                return;
            }
        }
        if let Some(before) = before
            && policy(v) == "Recycle"
            && volume_phase(v) == "Available"
            && matches!(volume_phase(before), "Released" | "Failed")
            && let Some(claim) = claim_uid_of(before)
            && !self.scrubbed.contains(&(id, claim.clone()))
        {
            let detail = format!(
                "made Available without a recycler pod that ran for the release of claim {claim}"
            );
            self.violation("unscrubbed-reuse", object, detail);
        }
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

    /// The finalizers this change removed from the object, by anyone: for
    /// a removal, those it still had (its last state).
    fn finalizers_removed(
        &mut self,
        kind: &str,
        ty: ChangeType,
        meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    ) -> Vec<String> {
        let key = format!(
            "{kind} {}/{} {}",
            meta.namespace.as_deref().unwrap_or_default(),
            meta.name.as_deref().unwrap_or_default(),
            meta.uid.as_deref().unwrap_or_default()
        );
        let has = meta.finalizers.clone().unwrap_or_default();
        if ty == ChangeType::Deleted {
            self.finalizers.remove(&key);
            return has;
        }
        let had = self.finalizers.insert(key, has.clone()).unwrap_or_default();
        had.into_iter().filter(|f| !has.contains(f)).collect()
    }

    /// `finalizer-lost` for a finalizer a replica removed that is not
    /// its to remove.
    fn not_ours(&mut self, object: &str, removed: &[String], ours: &[&str]) {
        if !self.by_request {
            return;
        }
        for finalizer in removed.iter().filter(|f| !ours.contains(&f.as_str())) {
            self.violation(
                "finalizer-lost",
                object.to_string(),
                format!("{finalizer} removed by the controller, which does not own it"),
            );
        }
    }

    /// `finalizer-lost` for a protection finalizer its protection
    /// controller (the test world) removed while it still protects: from
    /// an object not being deleted (`removable` false), or (a volume) one
    /// still Bound. A replica's removal is [`Walk::not_ours`]'s.
    fn protection_kept(
        &mut self,
        object: &str,
        removed: &[String],
        finalizer: &str,
        removable: bool,
    ) {
        if self.by_request || removable || !removed.iter().any(|f| f == finalizer) {
            return;
        }
        self.violation(
            "finalizer-lost",
            object.to_string(),
            format!("{finalizer} removed while it still protects the object"),
        );
    }

    fn volume_finalizers(&mut self, ty: ChangeType, v: &PersistentVolume) {
        let removed = self.finalizers_removed("volume", ty, &v.metadata);
        let ours = [FINALIZER_PV_CONTROLLER, FINALIZER_EXTERNAL_PROVISIONER];
        let object = format!("volume {}", name(v));
        self.not_ours(&object, &removed, &ours);
        let removable = v.metadata.deletion_timestamp.is_some() && volume_phase(v) != "Bound";
        self.protection_kept(&object, &removed, FINALIZER_PV_PROTECTION, removable);
        let holds = policy(v) == "Delete" && !self.storage_deleted.contains(&uid(v));
        for finalizer in removed.iter().filter(|f| ours.contains(&f.as_str())) {
            if holds {
                self.violation(
                    "finalizer-lost",
                    object.clone(),
                    format!("{finalizer} removed, but the storage of the volume was never deleted"),
                );
            }
        }
    }

    fn resource_claim(&mut self, ty: ChangeType, c: &ResourceClaim) {
        let removed = self.finalizers_removed("resourceclaim", ty, &c.metadata);
        let object = format!("ResourceClaim {}", name(c));
        self.not_ours(&object, &removed, &[FINALIZER_RESOURCE_DELETE_PROTECTION]);
        if !removed
            .iter()
            .any(|f| f == FINALIZER_RESOURCE_DELETE_PROTECTION)
        {
            return;
        }
        let status = c.status.as_ref();
        let allocated = status.is_some_and(|s| s.allocation.is_some());
        let reserved = status
            .and_then(|s| s.reserved_for.as_ref())
            .map_or(0, Vec::len);
        if allocated || reserved > 0 {
            self.violation(
                "finalizer-lost",
                object,
                format!(
                    "{FINALIZER_RESOURCE_DELETE_PROTECTION} removed while the claim is {}",
                    if allocated {
                        format!("allocated (reserved for {reserved})")
                    } else {
                        format!("reserved for {reserved}")
                    }
                ),
            );
        }
    }

    fn pod(&mut self, ty: ChangeType, p: &Pod) {
        let removed = self.finalizers_removed("pod", ty, &p.metadata);
        self.not_ours(&format!("pod {}", name(p)), &removed, &[]);
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
                    self.violation(
                        "recycler-pod-for-live-claim",
                        format!("pod {}", name(p)),
                        format!("created while claim {claim} exists"),
                    );
                }
                let pods = self.recycler_pods.entry(release.clone()).or_default();
                let live = pods.iter().any(|(_, exists)| *exists);
                let recorded = pods.iter().any(|(pod, _)| self.recorded_pods.contains(pod));
                pods.push((uid(p), true));
                if live || recorded {
                    self.violation(
                        "second-recycler-pod",
                        format!("pod {}", name(p)),
                        format!(
                            "for the release of claim {claim} (the first {})",
                            if live {
                                "still exists"
                            } else {
                                "was recorded on the volume"
                            }
                        ),
                    );
                }
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
