//! The volume index: every known PersistentVolume, filed so that the best
//! volume for a claim is found without scanning them all.
//!
//! The choice is upstream's (`index.go` `findByClaim` with
//! `FindMatchingVolume`, controller path: no node, no exclusions):
//!
//! 1. Volumes are grouped by their set of access modes. A claim tries every
//!    group whose set contains the modes it asks for, fewest modes first
//!    (equal sizes in canonical mode order, where upstream's order is
//!    random), and takes the first group that yields a volume. So a volume
//!    with fewer extra modes beats a smaller one with more.
//! 2. Within a group a volume is skipped when its claimRef names another
//!    claim, when it is smaller than the request, when its volume mode or its
//!    VolumeAttributesClass differs from the claim's, or when it is being
//!    deleted.
//! 3. A volume pre-bound to the claim (claimRef names it) that passes step 2
//!    is taken at once, whatever its phase, labels or class (of several in
//!    one group, the first by name).
//! 4. Otherwise, under delayed binding (WaitForFirstConsumer) nothing else is
//!    taken: the scheduler binds such claims. Without it, the smallest
//!    Available volume of the claim's class whose labels fit the claim's
//!    selector is taken (ties by name, where upstream keeps the first seen).
//!
//! To keep a search cheap with thousands of volumes, each volume's capacity,
//! modes and filters are read once when it is inserted. Unclaimed Available
//! volumes sit in buckets keyed by everything that must be equal (modes,
//! class, volume mode, VolumeAttributesClass), each ordered by capacity, so a
//! search starts at the requested size and only checks the selector.
//! Volumes with a claimRef are filed under the claim they name, which is all
//! step 3 needs. A volume whose capacity or access modes cannot be read is
//! stored but never offered.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use quantity::Amount;

use crate::pv::keys::ClaimKey;
use crate::pv::objects::{
    AccessModes, ObjectError, VolumeMode, claim_access_modes, claim_class, claim_request,
    claim_vac, claim_volume_mode, is_being_deleted, is_volume_bound_to_claim, volume_access_modes,
    volume_capacity, volume_class, volume_mode, volume_vac,
};

/// Why a claim could not be matched at all (as opposed to "no volume fits").
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MatchError {
    /// The claim's request or access modes cannot be read.
    #[error("cannot match {0}")]
    Claim(#[from] ObjectError),
    /// The claim's label selector is invalid.
    #[error("cannot match claim \"{claim}\": invalid label selector: {source}")]
    Selector {
        /// The claim with the bad selector.
        claim: ClaimKey,
        /// What is wrong with it.
        #[source]
        source: SelectorError,
    },
}

/// What makes a label selector requirement invalid (upstream's
/// `LabelSelectorAsSelector` rules; key and value syntax is not checked).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    /// The operator is not In, NotIn, Exists or DoesNotExist.
    #[error("key {key:?}: unknown operator {operator:?}")]
    UnknownOperator {
        /// The label key of the requirement.
        key: String,
        /// The operator as written.
        operator: String,
    },
    /// In or NotIn without values.
    #[error("key {key:?}: operator {operator} needs at least one value")]
    MissingValues {
        /// The label key of the requirement.
        key: String,
        /// In or NotIn.
        operator: String,
    },
    /// Exists or DoesNotExist with values.
    #[error("key {key:?}: operator {operator} takes no values")]
    UnexpectedValues {
        /// The label key of the requirement.
        key: String,
        /// Exists or DoesNotExist.
        operator: String,
    },
}

/// All volumes the controller knows, with the structures that make
/// [`VolumeIndex::find_best_match`] fast. See the module documentation.
#[derive(Debug, Default)]
pub struct VolumeIndex {
    volumes: BTreeMap<String, Entry>,
    available: HashMap<Bucket, BTreeSet<(Amount, String)>>,
    claimed: HashMap<ClaimKey, BTreeSet<String>>,
}

#[derive(Debug)]
struct Entry {
    volume: Arc<PersistentVolume>,
    /// `None` when the volume can never match (unreadable capacity or modes).
    traits: Option<Traits>,
}

/// What matching needs of a volume, read once at insertion.
#[derive(Debug)]
struct Traits {
    modes: AccessModes,
    capacity: Amount,
    volume_mode: VolumeMode,
    vac: Option<String>,
    deleting: bool,
    place: Place,
}

/// Where a searchable volume is filed.
#[derive(Debug)]
enum Place {
    /// Unclaimed, Available, not being deleted: offered to any fitting claim.
    Available(Bucket),
    /// Has a claimRef: offered only to the claim it names.
    Claimed(ClaimKey),
    /// Unclaimed but not Available or being deleted: offered to no one.
    Unavailable,
}

/// Everything that must be equal between an unclaimed volume and a claim.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Bucket {
    modes: AccessModes,
    class: String,
    volume_mode: VolumeMode,
    vac: Option<String>,
}

impl Traits {
    fn read(volume: &PersistentVolume) -> Option<Self> {
        let capacity = volume_capacity(volume).ok()?;
        let modes = volume_access_modes(volume).ok()?;
        let volume_mode = volume_mode(volume);
        let vac = volume_vac(volume).map(str::to_owned);
        let deleting = is_being_deleted(&volume.metadata);
        let spec = volume.spec.as_ref();
        let claim_ref = spec.and_then(|s| s.claim_ref.as_ref());
        let available =
            volume.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Available");
        let place = match claim_ref {
            Some(r) => Place::Claimed(ClaimKey::new(
                r.namespace.clone().unwrap_or_default(),
                r.name.clone().unwrap_or_default(),
            )),
            None if available && !deleting => Place::Available(Bucket {
                modes,
                class: volume_class(volume).to_owned(),
                volume_mode: volume_mode.clone(),
                vac: vac.clone(),
            }),
            None => Place::Unavailable,
        };
        Some(Self {
            modes,
            capacity,
            volume_mode,
            vac,
            deleting,
            place,
        })
    }
}

impl VolumeIndex {
    /// Adds a volume, replacing any volume of the same name.
    pub fn insert(&mut self, volume: Arc<PersistentVolume>) {
        let name = volume.metadata.name.clone().unwrap_or_default();
        self.remove(&name);
        let traits = Traits::read(&volume);
        if let Some(traits) = &traits {
            match &traits.place {
                Place::Available(bucket) => {
                    self.available
                        .entry(bucket.clone())
                        .or_default()
                        .insert((traits.capacity, name.clone()));
                }
                Place::Claimed(key) => {
                    self.claimed
                        .entry(key.clone())
                        .or_default()
                        .insert(name.clone());
                }
                Place::Unavailable => {}
            }
        }
        self.volumes.insert(name, Entry { volume, traits });
    }

    /// Removes the volume of that name, returning it if it was there.
    pub fn remove(&mut self, name: &str) -> Option<Arc<PersistentVolume>> {
        let entry = self.volumes.remove(name)?;
        if let Some(traits) = &entry.traits {
            match &traits.place {
                Place::Available(bucket) => {
                    if let Some(set) = self.available.get_mut(bucket) {
                        set.remove(&(traits.capacity, name.to_owned()));
                        if set.is_empty() {
                            self.available.remove(bucket);
                        }
                    }
                }
                Place::Claimed(key) => {
                    if let Some(set) = self.claimed.get_mut(key) {
                        set.remove(name);
                        if set.is_empty() {
                            self.claimed.remove(key);
                        }
                    }
                }
                Place::Unavailable => {}
            }
        }
        Some(entry.volume)
    }

    /// The volume of that name, if present.
    pub fn get(&self, name: &str) -> Option<&Arc<PersistentVolume>> {
        self.volumes.get(name).map(|e| &e.volume)
    }

    /// All volumes, in name order.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<PersistentVolume>> {
        self.volumes.values().map(|e| &e.volume)
    }

    /// How many volumes are stored, searchable or not.
    pub fn len(&self) -> usize {
        self.volumes.len()
    }

    /// Whether no volume is stored.
    pub fn is_empty(&self) -> bool {
        self.volumes.is_empty()
    }

    /// The volume the controller should bind `claim` to, if any, by the rules
    /// of the module documentation. `delay_binding` is true for claims whose
    /// class binds on first consumer: then only a volume pre-bound to the
    /// claim is returned.
    pub fn find_best_match(
        &self,
        claim: &PersistentVolumeClaim,
        delay_binding: bool,
    ) -> Result<Option<Arc<PersistentVolume>>, MatchError> {
        let request = claim_request(claim)?;
        let modes = claim_access_modes(claim)?;
        let selector = claim
            .spec
            .as_ref()
            .and_then(|s| s.selector.as_ref())
            .map(Selector::compile)
            .transpose()
            .map_err(|source| MatchError::Selector {
                claim: ClaimKey::of(claim),
                source,
            })?;
        let volume_mode = claim_volume_mode(claim);
        let vac = claim_vac(claim);

        let fits = |t: &Traits| {
            t.capacity >= request
                && t.volume_mode == volume_mode
                && t.vac.as_deref() == vac
                && !t.deleting
        };
        let prebound: Vec<(AccessModes, &Arc<PersistentVolume>)> = self
            .claimed
            .get(&ClaimKey::of(claim))
            .into_iter()
            .flatten()
            .filter_map(|name| self.volumes.get(name))
            .filter_map(|e| Some((e.traits.as_ref()?, &e.volume)))
            .filter(|(t, v)| fits(t) && is_volume_bound_to_claim(v, claim))
            .map(|(t, v)| (t.modes, v))
            .collect();

        let mut bucket = Bucket {
            modes,
            class: claim_class(claim).to_owned(),
            volume_mode: volume_mode.clone(),
            vac: vac.map(str::to_owned),
        };
        for group in modes.supersets() {
            if let Some((_, volume)) = prebound.iter().find(|(m, _)| *m == group) {
                return Ok(Some(Arc::clone(volume)));
            }
            if delay_binding {
                continue;
            }
            bucket.modes = group;
            let Some(candidates) = self.available.get(&bucket) else {
                continue;
            };
            let found = candidates
                .range((request, String::new())..)
                .filter_map(|(_, name)| self.volumes.get(name))
                .find(|e| selector.as_ref().is_none_or(|s| s.matches(&e.volume)));
            if let Some(entry) = found {
                return Ok(Some(Arc::clone(&entry.volume)));
            }
        }
        Ok(None)
    }
}

/// A claim's label selector, checked once and then applied to many volumes.
struct Selector<'a> {
    requirements: Vec<Requirement<'a>>,
}

enum Requirement<'a> {
    Equals(&'a str, &'a str),
    In(&'a str, &'a [String]),
    NotIn(&'a str, &'a [String]),
    Exists(&'a str),
    DoesNotExist(&'a str),
}

impl<'a> Selector<'a> {
    fn compile(selector: &'a LabelSelector) -> Result<Self, SelectorError> {
        let mut requirements: Vec<Requirement<'a>> = selector
            .match_labels
            .iter()
            .flatten()
            .map(|(k, v)| Requirement::Equals(k.as_str(), v.as_str()))
            .collect();
        for expr in selector.match_expressions.iter().flatten() {
            let key = expr.key.as_str();
            let values = expr.values.as_deref().unwrap_or_default();
            let operator = expr.operator.as_str();
            let requirement = match operator {
                "In" | "NotIn" if values.is_empty() => {
                    return Err(SelectorError::MissingValues {
                        key: key.to_owned(),
                        operator: operator.to_owned(),
                    });
                }
                "Exists" | "DoesNotExist" if !values.is_empty() => {
                    return Err(SelectorError::UnexpectedValues {
                        key: key.to_owned(),
                        operator: operator.to_owned(),
                    });
                }
                "In" => Requirement::In(key, values),
                "NotIn" => Requirement::NotIn(key, values),
                "Exists" => Requirement::Exists(key),
                "DoesNotExist" => Requirement::DoesNotExist(key),
                _ => {
                    return Err(SelectorError::UnknownOperator {
                        key: key.to_owned(),
                        operator: operator.to_owned(),
                    });
                }
            };
            requirements.push(requirement);
        }
        Ok(Self { requirements })
    }

    /// Whether the volume's labels satisfy every requirement; an empty
    /// selector matches everything.
    fn matches(&self, volume: &PersistentVolume) -> bool {
        let labels = volume.metadata.labels.as_ref();
        let label = |key: &str| labels.and_then(|l| l.get(key)).map(String::as_str);
        self.requirements.iter().all(|r| match r {
            Requirement::Equals(k, v) => label(k) == Some(*v),
            Requirement::In(k, values) => label(k).is_some_and(|l| values.iter().any(|v| v == l)),
            Requirement::NotIn(k, values) => label(k).is_none_or(|l| values.iter().all(|v| v != l)),
            Requirement::Exists(k) => label(k).is_some(),
            Requirement::DoesNotExist(k) => label(k).is_none(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pv::objects::testing::*;
    use crate::pv::objects::{ObjectName, claim_reference};

    fn index_of(volumes: Vec<PersistentVolume>) -> VolumeIndex {
        let mut index = VolumeIndex::default();
        for v in volumes {
            index.insert(Arc::new(v));
        }
        index
    }

    fn best(index: &VolumeIndex, claim: &PersistentVolumeClaim, delay: bool) -> Option<String> {
        match index.find_best_match(claim, delay) {
            Ok(found) => found.and_then(|v| v.metadata.name.clone()),
            Err(e) => panic!("unexpected error: {e}"),
        }
    }

    /// Upstream's `createTestVolumes` (without the node-affinity volumes,
    /// which only the scheduler path uses), named by upstream's UIDs.
    fn upstream_volumes() -> Vec<PersistentVolume> {
        vec![
            volume("gce-pd-10", "10G").modes(&[RWO, ROX]).build(),
            volume("gce-pd-20", "20G")
                .modes(&[RWO, ROX])
                .claim_ref("", "", "def456")
                .phase("Bound")
                .build(),
            volume("nfs-5", "5G").modes(&[RWO, ROX, RWX]).build(),
            volume("gce-pd-1", "1G")
                .modes(&[RWO, ROX])
                .claim_ref("", "", "abc123")
                .phase("Bound")
                .build(),
            volume("nfs-10", "10G").modes(&[RWO, ROX, RWX]).build(),
            volume("gce-pd-5", "5G").modes(&[RWO, ROX]).build(),
            volume("nfs-1", "1G").modes(&[RWO, ROX, RWX]).build(),
            volume("gce-pd-2", "20000G")
                .modes(&[RWO])
                .label("should-exist", "true")
                .build(),
            volume("gce-pd-silver1", "10000G")
                .modes(&[RWO])
                .label("should-exist", "true")
                .class("silver")
                .build(),
            volume("gce-pd-silver2", "100G")
                .modes(&[RWO])
                .class("silver")
                .build(),
            volume("gce-pd-gold", "50G")
                .modes(&[RWO])
                .class("gold")
                .build(),
            volume("local-pd-very-large", "200E")
                .modes(&[RWO, ROX, RWX])
                .class("large")
                .build(),
            volume("local-pd-extremely-large", "800E")
                .modes(&[RWO, ROX, RWX])
                .class("large")
                .build(),
        ]
    }

    /// Upstream's `makePVC`: claim01 in myns asking for ROX+RWO, Filesystem.
    fn pvc(size: &str) -> ClaimBuilder {
        claim("claim01", size)
            .modes(&[ROX, RWO])
            .volume_mode("Filesystem")
    }

    #[test]
    fn match_volume_upstream_table() {
        let index = index_of(upstream_volumes());
        let cases: Vec<(&str, PersistentVolumeClaim, Option<&str>)> = vec![
            (
                "successful-match-gce-10",
                pvc("8G").build(),
                Some("gce-pd-10"),
            ),
            (
                "successful-match-nfs-5",
                pvc("5G").modes(&[ROX, RWO, RWX]).build(),
                Some("nfs-5"),
            ),
            (
                "successful-skip-1g-bound-volume",
                pvc("1G").build(),
                Some("gce-pd-5"),
            ),
            ("successful-no-match", pvc("999G").build(), None),
            (
                "no-match-due-to-label",
                pvc("999G").match_label("should-not-exist", "true").build(),
                None,
            ),
            (
                "no-match-due-to-size-constraint-with-label-selector",
                pvc("20000G")
                    .match_label("should-exist", "true")
                    .modes(&[ROX, RWO])
                    .build(),
                None,
            ),
            (
                "match-due-with-constraint-and-label-selector",
                pvc("20000G")
                    .match_label("should-exist", "true")
                    .modes(&[RWO])
                    .build(),
                Some("gce-pd-2"),
            ),
            (
                "successful-match-with-class",
                pvc("1G")
                    .match_label("should-exist", "true")
                    .modes(&[RWO])
                    .class("silver")
                    .build(),
                Some("gce-pd-silver1"),
            ),
            (
                "successful-match-with-class-and-labels",
                pvc("1G").modes(&[RWO]).class("silver").build(),
                Some("gce-pd-silver2"),
            ),
            (
                "successful-match-very-large",
                pvc("1E").modes(&[RWO]).class("large").build(),
                Some("local-pd-very-large"),
            ),
            (
                "successful-match-exact-extremely-large",
                pvc("800E").modes(&[RWO]).class("large").build(),
                Some("local-pd-extremely-large"),
            ),
            (
                "successful-no-match-way-too-large",
                pvc("950E").modes(&[RWO]).class("large").build(),
                None,
            ),
        ];
        assert_eq!(cases.len(), 12);
        for (name, claim, expected) in cases {
            assert_eq!(best(&index, &claim, false).as_deref(), expected, "{name}");
        }
    }

    #[test]
    fn matching_with_bound_volumes() {
        let index = index_of(vec![
            volume("gce001", "1G")
                .modes(&[RWO, ROX])
                .claim_ref("", "", "abc123")
                .phase("Bound")
                .build(),
            volume("gce002", "1G").modes(&[RWO, ROX]).build(),
        ]);
        assert_eq!(
            best(&index, &pvc("1G").build(), false).as_deref(),
            Some("gce002")
        );
    }

    #[test]
    fn finding_volume_with_different_access_modes() {
        let gce = || volume("gce", "10G").modes(&[RWO, ROX]);
        let ebs = || volume("ebs", "10G").modes(&[RWO]);
        let nfs = || volume("nfs", "10G").modes(&[RWO, ROX, RWX]);
        let mut index = index_of(vec![gce().build(), ebs().build(), nfs().build()]);
        let ask =
            |index: &VolumeIndex, modes: &[_]| best(index, &pvc("1G").modes(modes).build(), false);

        assert_eq!(ask(&index, &[RWO]).as_deref(), Some("ebs"));
        assert_eq!(ask(&index, &[RWO, ROX]).as_deref(), Some("gce"));
        // The order of the requested modes does not matter.
        assert_eq!(ask(&index, &[RWX, RWO, ROX]).as_deref(), Some("nfs"));
        // Fewer modes requested still match.
        assert_eq!(ask(&index, &[RWX]).as_deref(), Some("nfs"));
        // The exact match is bound elsewhere: the next level of modes.
        index.insert(ebs().claim_ref("", "", "").arc());
        assert_eq!(ask(&index, &[RWO]).as_deref(), Some("gce"));
        // And the next.
        index.insert(gce().claim_ref("", "", "").arc());
        assert_eq!(ask(&index, &[RWO]).as_deref(), Some("nfs"));
        // Partial mode request.
        index.insert(gce().arc());
        assert_eq!(ask(&index, &[ROX]).as_deref(), Some("gce"));
    }

    #[test]
    fn fewer_modes_beat_a_smaller_volume() {
        let index = index_of(vec![
            volume("small-many-modes", "1Gi").modes(&[RWO, RWX]).build(),
            volume("big-one-mode", "100Gi").modes(&[RWO]).build(),
        ]);
        assert_eq!(
            best(&index, &claim("c", "1Gi").build(), false).as_deref(),
            Some("big-one-mode")
        );
    }

    #[test]
    fn equal_size_groups_are_tried_in_canonical_mode_order() {
        let index = index_of(vec![
            volume("rwop", "1Gi").modes(&[RWO, RWOP]).build(),
            volume("rwx", "1Gi").modes(&[RWO, RWX]).build(),
            volume("rox", "5Gi").modes(&[RWO, ROX]).build(),
        ]);
        // {RWO,ROX} comes before {RWO,RWX} and {RWO,RWOP}, even though it is bigger.
        assert_eq!(
            best(&index, &claim("c", "1Gi").build(), false).as_deref(),
            Some("rox")
        );
    }

    #[test]
    fn volume_mode_check() {
        // (claim mode, volume mode, matches); None is an absent field.
        let cases = [
            (Some("Block"), Some("Filesystem"), false),
            (Some("Filesystem"), Some("Block"), false),
            (Some("Block"), Some("Block"), true),
            (Some("Filesystem"), Some("Filesystem"), true),
            (Some("Filesystem"), None, true),
            (None, Some("Filesystem"), true),
            (None, None, true),
            (None, Some("Block"), false),
            (Some("Block"), None, false),
            (Some("Tape"), Some("Tape"), true),
            (Some("Tape"), None, false),
        ];
        for (claim_mode, volume_mode, matches) in cases {
            let mut v = volume("v", "10G");
            if let Some(mode) = volume_mode {
                v = v.volume_mode(mode);
            }
            let mut c = claim("c", "8G");
            if let Some(mode) = claim_mode {
                c = c.volume_mode(mode);
            }
            let index = index_of(vec![v.build()]);
            let found = best(&index, &c.build(), false);
            assert_eq!(
                found.is_some(),
                matches,
                "claim {claim_mode:?} volume {volume_mode:?}"
            );
        }
    }

    #[test]
    fn deletion_timestamp_filters_volumes() {
        let c = claim("pvc1", "1G").volume_mode("Filesystem").build();
        let live = index_of(vec![volume("pv1", "1G").volume_mode("Filesystem").build()]);
        let deleting = index_of(vec![
            volume("pv1", "1G")
                .volume_mode("Filesystem")
                .deleting()
                .build(),
        ]);
        assert_eq!(best(&live, &c, false).as_deref(), Some("pv1"));
        assert_eq!(best(&deleting, &c, false), None);
        // Also when the volume is pre-bound to the claim.
        let prebound = index_of(vec![
            volume("pv1", "1G").bound_to("pvc1").deleting().build(),
        ]);
        assert_eq!(best(&prebound, &c, false), None);
    }

    #[test]
    fn finding_prebound_volumes() {
        let c = claim("claim01", "1Gi").uid("claim-uid").build();
        let claim_ref = claim_reference(&c);
        let pv = |name: &str, size: &str| volume(name, size);
        let prebound = |b: VolumeBuilder| {
            let mut v = b.build();
            v.spec.get_or_insert_default().claim_ref = Some(claim_ref.clone());
            Arc::new(v)
        };
        let mut index = index_of(vec![
            pv("pv1", "1Gi").build(),
            pv("pv5", "5Gi").build(),
            pv("pv8", "8Gi").build(),
            pv("pvBadSize", "1Mi").build(),
            pv("pvBadMode", "1Gi").modes(&[ROX]).build(),
        ]);
        // Exact match on size.
        assert_eq!(best(&index, &c, false).as_deref(), Some("pv1"));
        // The exact match is pre-bound elsewhere: the next size up.
        index.insert(pv("pv1", "1Gi").claim_ref("bar", "foo", "").arc());
        assert_eq!(best(&index, &c, false).as_deref(), Some("pv5"));
        // The largest volume is pre-bound to the claim: it wins.
        index.insert(pv("pv1", "1Gi").arc());
        index.insert(prebound(pv("pv8", "8Gi")));
        assert_eq!(best(&index, &c, false).as_deref(), Some("pv8"));
        // A too-small volume pre-bound to the claim is ignored.
        index.insert(pv("pv8", "8Gi").arc());
        index.insert(prebound(pv("pvBadSize", "1Mi")));
        assert_eq!(best(&index, &c, false).as_deref(), Some("pv1"));
        // A volume without the requested mode pre-bound to the claim is ignored.
        index.insert(pv("pvBadSize", "1Mi").arc());
        index.insert(prebound(pv("pvBadMode", "1Gi").modes(&[ROX])));
        assert_eq!(best(&index, &c, false).as_deref(), Some("pv1"));
    }

    #[test]
    fn prebound_volume_ignores_phase_class_and_selector_but_not_uid() {
        let c = claim("c", "1Gi")
            .uid("u1")
            .class("gold")
            .match_label("tier", "db")
            .build();
        let shaped = || volume("pre", "2Gi").phase("Released").class("silver");
        let index = index_of(vec![
            volume("free", "1Gi")
                .class("gold")
                .label("tier", "db")
                .build(),
        ]);
        assert_eq!(best(&index, &c, false).as_deref(), Some("free"));

        let mut with_pre = index_of(vec![
            volume("free", "1Gi")
                .class("gold")
                .label("tier", "db")
                .build(),
            shaped().claim_ref("myns", "c", "u1").build(),
        ]);
        assert_eq!(best(&with_pre, &c, false).as_deref(), Some("pre"));
        // A claimRef UID of another claim with the same name: not this claim's.
        with_pre.insert(shaped().claim_ref("myns", "c", "u0").arc());
        assert_eq!(best(&with_pre, &c, false).as_deref(), Some("free"));
    }

    #[test]
    fn first_group_wins_even_over_a_prebound_volume_with_more_modes() {
        let c = claim("c", "1Gi").build();
        let index = index_of(vec![
            volume("exact-modes", "1Gi").build(),
            volume("prebound-more-modes", "1Gi")
                .modes(&[RWO, RWX])
                .bound_to("c")
                .build(),
        ]);
        assert_eq!(best(&index, &c, false).as_deref(), Some("exact-modes"));
        // Within one group the pre-bound volume wins over a smaller free one.
        let index = index_of(vec![
            volume("free", "1Gi").build(),
            volume("pre", "5Gi").bound_to("c").build(),
        ]);
        assert_eq!(best(&index, &c, false).as_deref(), Some("pre"));
    }

    #[test]
    fn best_match_delayed() {
        let index = index_of(upstream_volumes());
        assert_eq!(best(&index, &pvc("8G").build(), true), None);
        assert_eq!(
            best(&index, &pvc("8G").build(), false).as_deref(),
            Some("gce-pd-10")
        );
        // A pre-bound volume is still returned under delayed binding.
        let index = index_of(vec![
            volume("free", "1Gi").build(),
            volume("pre", "5Gi").bound_to("c").build(),
        ]);
        assert_eq!(
            best(&index, &claim("c", "1Gi").build(), true).as_deref(),
            Some("pre")
        );
    }

    #[test]
    fn volume_attributes_class_must_be_equal() {
        // (claim VAC, volume VAC, matches); "" is an empty name, None absent.
        let cases = [
            (None, None, true),
            (Some("fast"), Some("fast"), true),
            (Some("fast"), Some("slow"), false),
            (Some("fast"), None, false),
            (None, Some("fast"), false),
            (Some(""), None, true),
            (None, Some(""), true),
        ];
        for (claim_vac, volume_vac, matches) in cases {
            for prebound in [false, true] {
                let mut v = volume("v", "1Gi");
                if let Some(vac) = volume_vac {
                    v = v.vac(vac);
                }
                if prebound {
                    v = v.bound_to("c");
                }
                let mut c = claim("c", "1Gi");
                if let Some(vac) = claim_vac {
                    c = c.vac(vac);
                }
                let found = best(&index_of(vec![v.build()]), &c.build(), false);
                assert_eq!(
                    found.is_some(),
                    matches,
                    "claim {claim_vac:?} volume {volume_vac:?} prebound {prebound}"
                );
            }
        }
    }

    #[test]
    fn filters_phase_and_class() {
        let index = index_of(vec![
            volume("pending", "1Gi").phase("Pending").build(),
            volume("released", "1Gi").phase("Released").build(),
            volume("no-status", "1Gi").build(),
            volume("gold", "2Gi").class("gold").build(),
            volume("beta-silver", "3Gi")
                .class("gold")
                .beta_class("silver")
                .build(),
            volume("plain", "4Gi").build(),
        ]);
        let mut no_status = volume("no-status", "1Gi").build();
        no_status.status = None;
        let mut index = index;
        index.insert(Arc::new(no_status));
        assert_eq!(
            best(&index, &claim("c", "1Gi").build(), false).as_deref(),
            Some("plain")
        );
        assert_eq!(
            best(&index, &claim("c", "1Gi").class("").build(), false).as_deref(),
            Some("plain")
        );
        assert_eq!(
            best(&index, &claim("c", "1Gi").class("gold").build(), false).as_deref(),
            Some("gold")
        );
        assert_eq!(
            best(
                &index,
                &claim("c", "1Gi").beta_class("silver").build(),
                false
            )
            .as_deref(),
            Some("beta-silver")
        );
        assert_eq!(
            best(&index, &claim("c", "1Gi").class("bronze").build(), false),
            None
        );
    }

    #[test]
    fn smallest_fitting_volume_wins_ties_by_name() {
        let index = index_of(vec![
            volume("d", "3Gi").build(),
            volume("c", "2Gi").build(),
            volume("b", "2048Mi").build(),
            volume("a", "1Gi").build(),
        ]);
        assert_eq!(
            best(&index, &claim("x", "1.5Gi").build(), false).as_deref(),
            Some("b")
        );
        assert_eq!(
            best(&index, &claim("x", "1Gi").build(), false).as_deref(),
            Some("a")
        );
        assert_eq!(
            best(&index, &claim("x", "3Gi").build(), false).as_deref(),
            Some("d")
        );
        assert_eq!(best(&index, &claim("x", "3.1Gi").build(), false), None);
    }

    #[test]
    fn label_selector_expressions() {
        let index = index_of(vec![
            volume("a-ssd", "1Gi")
                .label("disk", "ssd")
                .label("zone", "a")
                .build(),
            volume("b-hdd", "2Gi")
                .label("disk", "hdd")
                .label("zone", "b")
                .build(),
            volume("bare", "3Gi").build(),
        ]);
        let cases: Vec<(ClaimBuilder, Option<&str>)> = vec![
            (claim("c", "1").empty_selector(), Some("a-ssd")),
            (
                claim("c", "1").match_expr("disk", "In", &["hdd", "nvme"]),
                Some("b-hdd"),
            ),
            (
                claim("c", "1").match_expr("disk", "NotIn", &["ssd"]),
                Some("b-hdd"),
            ),
            (
                claim("c", "1").match_expr("disk", "NotIn", &["ssd", "hdd"]),
                Some("bare"),
            ),
            (
                claim("c", "1")
                    .match_expr("zone", "Exists", &[])
                    .match_label("disk", "hdd"),
                Some("b-hdd"),
            ),
            (
                claim("c", "1").match_expr("disk", "DoesNotExist", &[]),
                Some("bare"),
            ),
            (claim("c", "1").match_expr("disk", "In", &["tape"]), None),
        ];
        for (i, (c, expected)) in cases.into_iter().enumerate() {
            assert_eq!(
                best(&index, &c.build(), false).as_deref(),
                expected,
                "case {i}"
            );
        }
    }

    #[test]
    fn bad_claims_are_errors_naming_the_claim() {
        let index = index_of(vec![volume("v", "1Gi").build()]);
        let key = ClaimKey::new("myns", "bad");
        let cases: Vec<(PersistentVolumeClaim, MatchError)> = vec![
            (
                claim("bad", "1Gi")
                    .match_expr("disk", "Near", &["x"])
                    .build(),
                MatchError::Selector {
                    claim: key.clone(),
                    source: SelectorError::UnknownOperator {
                        key: "disk".into(),
                        operator: "Near".into(),
                    },
                },
            ),
            (
                claim("bad", "1Gi").match_expr("disk", "In", &[]).build(),
                MatchError::Selector {
                    claim: key.clone(),
                    source: SelectorError::MissingValues {
                        key: "disk".into(),
                        operator: "In".into(),
                    },
                },
            ),
            (
                claim("bad", "1Gi")
                    .match_expr("disk", "Exists", &["x"])
                    .build(),
                MatchError::Selector {
                    claim: key.clone(),
                    source: SelectorError::UnexpectedValues {
                        key: "disk".into(),
                        operator: "Exists".into(),
                    },
                },
            ),
            (
                claim("bad", "1Gi")
                    .raw_modes(&["ReadWriteOnce", "WriteOnly"])
                    .build(),
                MatchError::Claim(ObjectError::UnknownAccessMode {
                    object: ObjectName::Claim(key.clone()),
                    mode: "WriteOnly".into(),
                }),
            ),
        ];
        for (c, expected) in cases {
            assert_eq!(index.find_best_match(&c, false), Err(expected));
        }
        let err = index.find_best_match(&claim("bad", "huge").build(), false);
        let message = err.err().map(|e| e.to_string()).unwrap_or_default();
        assert!(
            message.contains("claim \"myns/bad\"") && message.contains("huge"),
            "{message}"
        );
    }

    #[test]
    fn unreadable_volumes_are_stored_but_never_offered() {
        let index = index_of(vec![
            volume("bad-size", "lots").build(),
            volume("bad-mode", "1Gi")
                .raw_modes(&["ReadWriteSometimes"])
                .build(),
            volume("bad-prebound", "lots").bound_to("c").build(),
        ]);
        assert_eq!(index.len(), 3);
        assert!(index.get("bad-size").is_some());
        assert_eq!(best(&index, &claim("c", "0").build(), false), None);
        assert_eq!(
            best(&index, &claim("c", "0").modes(&[]).build(), false),
            None
        );
    }

    #[test]
    fn claim_without_modes_matches_any_group() {
        let index = index_of(vec![
            volume("rwx", "1Gi").modes(&[RWX]).build(),
            volume("no-modes", "5Gi").modes(&[]).build(),
        ]);
        // The empty group comes first: fewest modes.
        assert_eq!(
            best(&index, &claim("c", "1Gi").modes(&[]).build(), false).as_deref(),
            Some("no-modes")
        );
        assert_eq!(best(&index, &claim("c", "1Gi").build(), false), None);
    }

    #[test]
    fn insert_replaces_and_remove_forgets() {
        let mut index = index_of(vec![
            volume("v1", "1Gi").build(),
            volume("v2", "2Gi").build(),
        ]);
        let c = claim("c", "1Gi").build();
        assert_eq!(best(&index, &c, false).as_deref(), Some("v1"));
        // Replaced by a bigger v1: v1's old slot must be gone, v2 is now smallest.
        index.insert(volume("v1", "3Gi").arc());
        assert_eq!(index.len(), 2);
        assert_eq!(best(&index, &c, false).as_deref(), Some("v2"));
        // v1 becomes bound to another claim, v2 removed.
        index.insert(volume("v1", "3Gi").bound_to("other").phase("Bound").arc());
        let removed = index.remove("v2");
        assert_eq!(
            removed.and_then(|v| v.metadata.name.clone()).as_deref(),
            Some("v2")
        );
        assert_eq!(index.remove("v2"), None);
        assert_eq!(best(&index, &c, false), None);
        assert_eq!(index.len(), 1);
        assert!(!index.is_empty());
        assert_eq!(index.iter().count(), 1);
        index.remove("v1");
        assert!(index.is_empty());
        assert!(index.available.is_empty() && index.claimed.is_empty());
    }

    #[test]
    fn thousands_of_volumes() {
        let mut index = VolumeIndex::default();
        for i in 0..5000u32 {
            let class = if i % 2 == 0 { "even" } else { "odd" };
            index.insert(
                volume(&format!("v{i:05}"), &format!("{}Mi", 5000 - i))
                    .class(class)
                    .arc(),
            );
        }
        // Volume vN has 5000-N Mi: class "even" holds the even sizes, "odd" the odd ones.
        assert_eq!(
            best(&index, &claim("c", "1001Mi").class("even").build(), false).as_deref(),
            Some("v03998")
        );
        assert_eq!(
            best(&index, &claim("c", "1001Mi").class("odd").build(), false).as_deref(),
            Some("v03999")
        );
        assert_eq!(index.len(), 5000);
    }
}
