//! The volume index against a brute-force matcher written from upstream's
//! rules (`findByClaim` + `FindMatchingVolume`, controller path), on random
//! pools and claims: both must choose the same volume every time.
//!
//! The reference scans every volume for every group of access modes; it
//! shares nothing with the index but the quantity parser (fuzzed on its
//! own in the `quantity` crate). Ties the upstream code leaves to map order
//! are broken as the index documents: groups of equal size by mode bits
//! (RWO, ROX, RWX, RWOP), volumes of equal size by name.
//!
//! A selector claim is searched both ways the index has: label set by label
//! set (a bucket with few), and walking the bucket in capacity order (one
//! with many), the latter on an index that held an older version of each
//! volume first, so labels and places left over from it would show.
//!
//! `MATCHER_CASES` sets the number of cases (default 100,000).

use std::collections::BTreeMap;

use k8s_names::ANN_BETA_STORAGE_CLASS;
use k8s_openapi::api::core::v1::{
    ObjectReference, PersistentVolume, PersistentVolumeClaim, PersistentVolumeClaimSpec,
    PersistentVolumeSpec, PersistentVolumeStatus, VolumeResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    LabelSelector, LabelSelectorRequirement, ObjectMeta, Time,
};
use proptest::prelude::*;
use quantity::Amount;

use crate::pv::index::{Verdict, VolumeIndex};

const MODES: [&str; 4] = [
    "ReadWriteOnce",
    "ReadOnlyMany",
    "ReadWriteMany",
    "ReadWriteOncePod",
];
const SIZES: [&str; 7] = ["500Mi", "1Gi", "1G", "1536Mi", "2Gi", "5Gi", "bogus"];
const CLASSES: [&str; 3] = ["", "gold", "silver"];
const VOLUME_MODES: [Option<&str>; 3] = [None, Some("Filesystem"), Some("Block")];
const VACS: [Option<&str>; 3] = [None, Some(""), Some("fast")];
const PHASES: [&str; 4] = ["Available", "Pending", "Bound", "Released"];

/// A random volume, as small numbers.
#[derive(Debug, Clone)]
struct VolumeCase {
    size: usize,
    modes: u8,
    class: usize,
    beta_class: bool,
    volume_mode: usize,
    vac: usize,
    phase: usize,
    /// 0: none; 1: pre-bound to the claim's name; 2: bound to the claim
    /// (its UID); 3: the claim's name, another UID; 4: another claim.
    claim_ref: u8,
    tier: u8,
    deleting: bool,
}

/// A random claim, as small numbers.
#[derive(Debug, Clone)]
struct ClaimCase {
    size: usize,
    modes: u8,
    class: usize,
    beta_class: bool,
    volume_mode: usize,
    vac: usize,
    /// 0: none; 1: tier=gold; 2: tier In (gold, silver); 3: tier NotIn
    /// (gold); 4: tier Exists; 5: tier DoesNotExist; 6: an empty selector.
    selector: u8,
    delay: bool,
}

fn volume_case() -> impl Strategy<Value = VolumeCase> {
    (
        (0..SIZES.len(), 0u8..16, 0..CLASSES.len(), any::<bool>()),
        (0..VOLUME_MODES.len(), 0..VACS.len(), 0..PHASES.len()),
        (0u8..5, 0u8..3, prop::bool::weighted(0.1)),
    )
        .prop_map(
            |(
                (size, modes, class, beta_class),
                (volume_mode, vac, phase),
                (claim_ref, tier, deleting),
            )| {
                VolumeCase {
                    size,
                    modes,
                    class,
                    beta_class,
                    volume_mode,
                    vac,
                    phase,
                    claim_ref,
                    tier,
                    deleting,
                }
            },
        )
}

fn claim_case() -> impl Strategy<Value = ClaimCase> {
    (
        (0..SIZES.len(), 1u8..16, 0..CLASSES.len(), any::<bool>()),
        (0..VOLUME_MODES.len(), 0..VACS.len(), 0u8..7, any::<bool>()),
    )
        .prop_map(
            |((size, modes, class, beta_class), (volume_mode, vac, selector, delay))| ClaimCase {
                size,
                modes,
                class,
                beta_class,
                volume_mode,
                vac,
                selector,
                delay,
            },
        )
}

fn mode_list(bits: u8) -> Vec<String> {
    (0..4)
        .filter(|i| bits & (1 << i) != 0)
        .map(|i| MODES[i].to_string())
        .collect()
}

fn storage(size: &str) -> BTreeMap<String, Quantity> {
    BTreeMap::from([("storage".to_string(), Quantity(size.to_string()))])
}

fn with_class(meta: &mut ObjectMeta, beta: bool, class: &str) -> Option<String> {
    if beta {
        meta.annotations = Some(BTreeMap::from([(
            ANN_BETA_STORAGE_CLASS.to_string(),
            class.to_string(),
        )]));
        // The annotation wins: a field that says otherwise must not count.
        return Some("ignored".to_string());
    }
    // An empty class is written out ("" and absent mean the same).
    Some(class.to_string())
}

fn build_volume(i: usize, c: &VolumeCase) -> PersistentVolume {
    let mut metadata = ObjectMeta {
        name: Some(format!("v{i}")),
        ..ObjectMeta::default()
    };
    let class = with_class(&mut metadata, c.beta_class, CLASSES[c.class]);
    if c.tier > 0 {
        let tier = if c.tier == 1 { "gold" } else { "silver" };
        metadata.labels = Some(BTreeMap::from([("tier".to_string(), tier.to_string())]));
    }
    if c.deleting {
        metadata.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
    }
    let reference = |name: &str, uid: Option<&str>| ObjectReference {
        namespace: Some("ns".to_string()),
        name: Some(name.to_string()),
        uid: uid.map(str::to_string),
        ..ObjectReference::default()
    };
    let claim_ref = match c.claim_ref {
        1 => Some(reference("claim", None)),
        2 => Some(reference("claim", Some("uid-claim"))),
        3 => Some(reference("claim", Some("uid-old"))),
        4 => Some(reference("other", Some("uid-other"))),
        _ => None,
    };
    PersistentVolume {
        metadata,
        spec: Some(PersistentVolumeSpec {
            capacity: Some(storage(SIZES[c.size])),
            access_modes: Some(mode_list(c.modes)),
            storage_class_name: class,
            volume_mode: VOLUME_MODES[c.volume_mode].map(str::to_string),
            volume_attributes_class_name: VACS[c.vac].map(str::to_string),
            claim_ref,
            ..PersistentVolumeSpec::default()
        }),
        status: Some(PersistentVolumeStatus {
            phase: Some(PHASES[c.phase].to_string()),
            ..PersistentVolumeStatus::default()
        }),
    }
}

fn selector(kind: u8) -> Option<LabelSelector> {
    let expression = |operator: &str, values: &[&str]| LabelSelector {
        match_expressions: Some(vec![LabelSelectorRequirement {
            key: "tier".to_string(),
            operator: operator.to_string(),
            values: (!values.is_empty()).then(|| values.iter().map(ToString::to_string).collect()),
        }]),
        ..LabelSelector::default()
    };
    match kind {
        1 => Some(LabelSelector {
            match_labels: Some(BTreeMap::from([("tier".to_string(), "gold".to_string())])),
            ..LabelSelector::default()
        }),
        2 => Some(expression("In", &["gold", "silver"])),
        3 => Some(expression("NotIn", &["gold"])),
        4 => Some(expression("Exists", &[])),
        5 => Some(expression("DoesNotExist", &[])),
        6 => Some(LabelSelector::default()),
        _ => None,
    }
}

fn build_claim(c: &ClaimCase) -> PersistentVolumeClaim {
    let mut metadata = ObjectMeta {
        name: Some("claim".to_string()),
        namespace: Some("ns".to_string()),
        uid: Some("uid-claim".to_string()),
        ..ObjectMeta::default()
    };
    let class = with_class(&mut metadata, c.beta_class, CLASSES[c.class]);
    PersistentVolumeClaim {
        metadata,
        spec: Some(PersistentVolumeClaimSpec {
            access_modes: Some(mode_list(c.modes)),
            resources: Some(VolumeResourceRequirements {
                requests: Some(storage(SIZES[c.size])),
                ..VolumeResourceRequirements::default()
            }),
            storage_class_name: class,
            volume_mode: VOLUME_MODES[c.volume_mode].map(str::to_string),
            volume_attributes_class_name: VACS[c.vac].map(str::to_string),
            selector: selector(c.selector),
            ..PersistentVolumeClaimSpec::default()
        }),
        status: None,
    }
}

/// What the reference reads of a volume: its storage class (annotation
/// first), its mode bits, its volume mode (absent is Filesystem) and its
/// attributes class (empty is none).
fn class_of(meta: &ObjectMeta, field: Option<&String>) -> String {
    meta.annotations
        .as_ref()
        .and_then(|a| a.get(ANN_BETA_STORAGE_CLASS))
        .or(field)
        .cloned()
        .unwrap_or_default()
}

fn mode_bits(list: Option<&Vec<String>>) -> u8 {
    list.into_iter()
        .flatten()
        .map(|m| {
            MODES
                .iter()
                .position(|known| known == m)
                .map_or(0, |i| 1 << i)
        })
        .fold(0, |acc, bit| acc | bit)
}

fn volume_mode_of(mode: Option<&String>) -> &str {
    mode.map_or("Filesystem", String::as_str)
}

fn vac_of(vac: Option<&String>) -> Option<&str> {
    vac.map(String::as_str).filter(|v| !v.is_empty())
}

fn size_of(quantities: Option<&BTreeMap<String, Quantity>>) -> Option<Amount> {
    Amount::parse(&quantities?.get("storage")?.0).ok()
}

fn labels_match(selector: Option<&LabelSelector>, volume: &PersistentVolume) -> bool {
    let Some(selector) = selector else {
        return true;
    };
    let tier = volume
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get("tier"))
        .map(String::as_str);
    let by_labels = selector
        .match_labels
        .iter()
        .flatten()
        .all(|(k, v)| k == "tier" && tier == Some(v.as_str()));
    let by_expressions = selector.match_expressions.iter().flatten().all(|e| {
        let values = e.values.clone().unwrap_or_default();
        match e.operator.as_str() {
            "In" => tier.is_some_and(|t| values.iter().any(|v| v == t)),
            "NotIn" => tier.is_none_or(|t| values.iter().all(|v| v != t)),
            "Exists" => tier.is_some(),
            _ => tier.is_none(),
        }
    });
    by_labels && by_expressions
}

/// Upstream's choice, by scanning every volume for every group.
fn reference(
    volumes: &[PersistentVolume],
    claim: &PersistentVolumeClaim,
    delay: bool,
) -> Option<String> {
    let spec = claim.spec.as_ref()?;
    let request = size_of(spec.resources.as_ref()?.requests.as_ref())?;
    let wanted = mode_bits(spec.access_modes.as_ref());
    let class = class_of(&claim.metadata, spec.storage_class_name.as_ref());
    let mut groups: Vec<u8> = volumes
        .iter()
        .map(|v| mode_bits(v.spec.as_ref().and_then(|s| s.access_modes.as_ref())))
        .filter(|bits| bits & wanted == wanted)
        .collect();
    groups.sort_by_key(|bits| (bits.count_ones(), *bits));
    groups.dedup();
    // Ties go to the first volume by name.
    let mut volumes: Vec<&PersistentVolume> = volumes.iter().collect();
    volumes.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    for group in groups {
        let mut best: Option<(Amount, &PersistentVolume)> = None;
        for volume in volumes.iter().copied() {
            let Some(vspec) = volume.spec.as_ref() else {
                continue;
            };
            if mode_bits(vspec.access_modes.as_ref()) != group {
                continue;
            }
            let Some(capacity) = size_of(vspec.capacity.as_ref()) else {
                continue;
            };
            let bound_to_claim = vspec.claim_ref.as_ref().map(|r| {
                r.name == claim.metadata.name
                    && r.namespace == claim.metadata.namespace
                    && r.uid
                        .as_ref()
                        .is_none_or(|u| Some(u) == claim.metadata.uid.as_ref())
            });
            if bound_to_claim == Some(false)
                || capacity < request
                || volume_mode_of(vspec.volume_mode.as_ref())
                    != volume_mode_of(spec.volume_mode.as_ref())
                || vac_of(vspec.volume_attributes_class_name.as_ref())
                    != vac_of(spec.volume_attributes_class_name.as_ref())
                || volume.metadata.deletion_timestamp.is_some()
            {
                continue;
            }
            if bound_to_claim == Some(true) {
                return volume.metadata.name.clone();
            }
            let offered = matches!(
                volume.status.as_ref().and_then(|s| s.phase.as_deref()),
                None | Some("Available" | "Pending")
            );
            if delay
                || !offered
                || !labels_match(spec.selector.as_ref(), volume)
                || class_of(&volume.metadata, vspec.storage_class_name.as_ref()) != class
            {
                continue;
            }
            if best.is_none_or(|(size, _)| capacity < size) {
                best = Some((capacity, volume));
            }
        }
        if let Some((_, volume)) = best {
            return volume.metadata.name.clone();
        }
    }
    None
}

fn cases() -> u32 {
    std::env::var("MATCHER_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000)
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: cases(),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn index_chooses_as_a_brute_force_scan(
        pool in prop::collection::vec(volume_case(), 0..12),
        claim in claim_case(),
    ) {
        let volumes: Vec<PersistentVolume> =
            pool.iter().enumerate().map(|(i, c)| build_volume(i, c)).collect();
        let claim_object = build_claim(&claim);
        let mut index = VolumeIndex::default();
        for volume in &volumes {
            index.insert(volume).expect("packed");
        }
        let found = index.find_best_match(&claim_object, claim.delay);
        // Only an unreadable request makes the search itself fail.
        prop_assert_eq!(found.is_err(), SIZES[claim.size] == "bogus");
        let chosen = found.ok().flatten().and_then(|v| v.metadata.name.clone());
        prop_assert_eq!(&chosen, &reference(&volumes, &claim_object, claim.delay));
        // The same search walking every bucket in capacity order (as with
        // many label sets), on an index that first held an older version
        // of each volume: free, with another tier label.
        let mut walking = VolumeIndex { always_walk: true, ..VolumeIndex::default() };
        for (i, case) in pool.iter().enumerate() {
            let older = VolumeCase {
                tier: (case.tier + 1) % 3,
                claim_ref: 0,
                phase: 0,
                deleting: false,
                ..case.clone()
            };
            walking.insert(build_volume(i, &older)).expect("packed");
        }
        for volume in &volumes {
            walking.insert(volume).expect("packed");
        }
        let walked = walking
            .find_best_match(&claim_object, claim.delay)
            .ok()
            .flatten()
            .and_then(|v| v.metadata.name.clone());
        prop_assert_eq!(&walked, &chosen, "walked in capacity order");
        // The explanation is the search's: its chosen volume is the
        // search's choice, and each volume it says fits is one the search
        // takes when that volume is the only one.
        let Ok(explained) = index.explain(&claim_object, claim.delay) else {
            return Ok(());
        };
        let explained_choice = explained
            .iter()
            .find(|c| c.verdict == Verdict::Chosen)
            .map(|c| c.name.clone());
        prop_assert_eq!(&explained_choice, &chosen);
        for candidate in &explained {
            let alone = volumes
                .iter()
                .find(|v| v.metadata.name.as_deref() == Some(candidate.name.as_str()))
                .expect("explained volumes are the index's");
            let mut single = VolumeIndex::default();
            single.insert(alone).expect("packed");
            let taken = single
                .find_best_match(&claim_object, claim.delay)
                .ok()
                .flatten()
                .is_some();
            prop_assert_eq!(
                candidate.verdict.fits(),
                taken,
                "{} explained as {:?}",
                &candidate.name,
                &candidate.verdict
            );
        }
        // The event's nearest misses, kept a few at a time, are those of
        // the whole explanation sorted.
        let class = crate::pv::objects::claim_class(&claim_object);
        prop_assert_eq!(
            index.nearest_misses(&claim_object, claim.delay).ok().flatten(),
            misses_of_all(&explained, class)
        );
    }
}

/// The nearest misses from the whole explanation: the volumes of the
/// class (and any that fits) sorted by distance and name, three named and
/// the rest counted, in the event's words.
fn misses_of_all(candidates: &[crate::pv::index::Candidate], class: &str) -> Option<String> {
    let mut in_class: Vec<&crate::pv::index::Candidate> = candidates
        .iter()
        .filter(|c| c.class == class || c.verdict.fits())
        .collect();
    if in_class.is_empty() {
        return None;
    }
    in_class.sort_by(|a, b| (a.verdict.distance(), &a.name).cmp(&(b.verdict.distance(), &b.name)));
    let named: Vec<String> = in_class
        .iter()
        .take(3)
        .map(|c| format!("{} {}", c.name, c.verdict.describe()))
        .collect();
    let mut counts: BTreeMap<(u8, &'static str), usize> = BTreeMap::new();
    for c in in_class.iter().skip(3) {
        *counts
            .entry((c.verdict.distance(), c.verdict.tally()))
            .or_default() += 1;
    }
    Some(crate::pv::index::explain::misses_text(
        class,
        in_class.len(),
        &named,
        &counts,
    ))
}
