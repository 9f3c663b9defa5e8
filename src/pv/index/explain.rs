//! Why a claim gets the volume it gets, or none: every volume of the index
//! with the first rule of the search ([`VolumeIndex::find_best_match`]) it
//! fails, read from what the search itself reads, and the search's own
//! choice. Events, `/explain` and `pv-controller explain` tell users this.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use quantity::Amount;
use serde::{Deserialize, Serialize};

use super::{Entry, MatchError, Place, Selector, VolumeIndex};
use crate::pv::objects::{
    AccessModes, claim_access_modes, claim_class, claim_request, claim_vac, claim_volume_mode,
    is_volume_bound_to_claim,
};
use crate::runtime::keys::ObjectKey;

/// One volume and what the search makes of it for a claim.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Candidate {
    /// The volume's name.
    pub name: String,
    /// Its class (`""`: none).
    pub class: String,
    /// Its capacity, as written (`None`: unreadable).
    pub capacity: Option<String>,
    /// Whether its claimRef names this claim (pre-bound to it).
    pub pre_bound: bool,
    /// The verdict.
    pub verdict: Verdict,
}

/// The first rule a volume fails for a claim, or that it fits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "reason", rename_all = "camelCase")]
pub enum Verdict {
    /// The search's choice.
    Chosen,
    /// Fits as well, but another is chosen (smaller, fewer extra access
    /// modes, or first by name).
    Fits,
    /// Its capacity or access modes cannot be read: never offered.
    Unreadable,
    /// Marked for deletion.
    BeingDeleted,
    /// Its claimRef names another claim (bound to it, or pre-bound).
    ClaimedBy {
        /// `namespace/name` of that claim.
        claim: String,
    },
    /// Pre-bound to this claim's name, but to an earlier claim of that
    /// name (another UID).
    ClaimedByEarlierClaim,
    /// Unclaimed but not offered in its phase (Released, Failed, Bound).
    NotAvailable {
        /// The phase.
        phase: String,
    },
    /// Another StorageClass.
    OtherClass {
        /// The volume's class (`""`: none).
        class: String,
    },
    /// Lacks access modes the claim asks for.
    LacksAccessModes {
        /// The missing modes.
        missing: Vec<String>,
    },
    /// Another volume mode (Filesystem, Block).
    OtherVolumeMode {
        /// The volume's.
        volume: String,
        /// The claim's.
        claim: String,
    },
    /// Another VolumeAttributesClass.
    OtherAttributesClass,
    /// Smaller than the request.
    TooSmall {
        /// The volume's capacity.
        capacity: String,
        /// The claim's request.
        request: String,
    },
    /// Its labels do not satisfy the claim's selector.
    SelectorMismatch,
    /// Held for another claim whose binding is under way.
    ReservedFor {
        /// `namespace/name` of that claim.
        claim: String,
    },
    /// The claim's class binds on first consumer: only a volume pre-bound
    /// to it (by the scheduler) is taken.
    WaitsForConsumer,
}

impl Verdict {
    /// Whether the volume fits the claim.
    pub fn fits(&self) -> bool {
        matches!(self, Verdict::Chosen | Verdict::Fits)
    }

    /// The verdict in a few words, naming the volume's side, for events and
    /// tables ("too small (1Gi < 2Gi)", "lacks ReadWriteMany").
    pub fn describe(&self) -> String {
        match self {
            Verdict::Chosen => "fits (chosen)".to_string(),
            Verdict::Fits => "fits".to_string(),
            Verdict::Unreadable => "unreadable capacity or access modes".to_string(),
            Verdict::BeingDeleted => "being deleted".to_string(),
            Verdict::ClaimedBy { claim } => format!("claimed by {claim}"),
            Verdict::ClaimedByEarlierClaim => {
                "pre-bound to an earlier claim of this name".to_string()
            }
            Verdict::NotAvailable { phase } => format!("not available ({phase})"),
            Verdict::OtherClass { class } if class.is_empty() => "has no class".to_string(),
            Verdict::OtherClass { class } => format!("of class {class:?}"),
            Verdict::LacksAccessModes { missing } => format!("lacks {}", missing.join(",")),
            Verdict::OtherVolumeMode { volume, claim } => {
                format!("wrong volume mode ({volume}, not {claim})")
            }
            Verdict::OtherAttributesClass => "other VolumeAttributesClass".to_string(),
            Verdict::TooSmall { capacity, request } => {
                format!("too small ({capacity} < {request})")
            }
            Verdict::SelectorMismatch => "labels do not match the selector".to_string(),
            Verdict::ReservedFor { claim } => format!("reserved for {claim}"),
            Verdict::WaitsForConsumer => "waits for the scheduler to pick it".to_string(),
        }
    }

    /// The verdict as a count's label ("9 smaller, 2 bound elsewhere").
    pub fn tally(&self) -> &'static str {
        match self {
            Verdict::Chosen | Verdict::Fits => "fit",
            Verdict::Unreadable => "unreadable",
            Verdict::BeingDeleted => "being deleted",
            Verdict::ClaimedBy { .. } | Verdict::ClaimedByEarlierClaim => "bound elsewhere",
            Verdict::NotAvailable { .. } => "not available",
            Verdict::OtherClass { .. } => "of another class",
            Verdict::LacksAccessModes { .. } => "lacking access modes",
            Verdict::OtherVolumeMode { .. } => "wrong volume mode",
            Verdict::OtherAttributesClass => "other VolumeAttributesClass",
            Verdict::TooSmall { .. } => "smaller",
            Verdict::SelectorMismatch => "not selected",
            Verdict::ReservedFor { .. } => "reserved for other claims",
            Verdict::WaitsForConsumer => "waiting for the scheduler",
        }
    }

    /// How near the volume came to fitting: the later the rule it fails in
    /// the search, the nearer (0: fits).
    pub fn distance(&self) -> u8 {
        match self {
            Verdict::Chosen => 0,
            Verdict::Fits => 1,
            Verdict::ReservedFor { .. } | Verdict::WaitsForConsumer => 2,
            Verdict::SelectorMismatch => 3,
            Verdict::TooSmall { .. } => 4,
            Verdict::LacksAccessModes { .. }
            | Verdict::OtherVolumeMode { .. }
            | Verdict::OtherAttributesClass => 5,
            Verdict::ClaimedBy { .. }
            | Verdict::ClaimedByEarlierClaim
            | Verdict::NotAvailable { .. }
            | Verdict::BeingDeleted => 6,
            Verdict::Unreadable => 7,
            Verdict::OtherClass { .. } => 8,
        }
    }
}

impl VolumeIndex {
    /// Every volume the claim could get or asks for (of its class,
    /// pre-bound to it, the one it names) with its verdict, the search's
    /// choice marked [`Verdict::Chosen`]; `delay_binding` as for
    /// [`VolumeIndex::find_best_match`]. Fails as the search does, for a
    /// claim whose request, access modes or selector cannot be read.
    pub fn explain(
        &self,
        claim: &PersistentVolumeClaim,
        delay_binding: bool,
    ) -> Result<Vec<Candidate>, MatchError> {
        let key = ObjectKey::of(claim);
        let mut candidates = Vec::new();
        self.judge(claim, delay_binding, |name, entry, verdict| {
            candidates.push(Candidate {
                name: name.to_string(),
                class: entry
                    .traits
                    .as_ref()
                    .map(|t| t.bucket.class.clone())
                    .unwrap_or_default(),
                capacity: entry.traits.as_ref().map(|t| human(t.capacity)),
                pre_bound: entry
                    .traits
                    .as_ref()
                    .is_some_and(|t| matches!(&t.place, Place::Claimed(k) if **k == key)),
                verdict,
            });
        })?;
        candidates.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(candidates)
    }

    /// The nearest misses among the volumes [`VolumeIndex::explain`] judges,
    /// in a few words for an event ([`Misses`]); `None` when the claim's
    /// class has no volume. Only the few volumes it names are kept while
    /// the rest are counted, so a claim left Pending among 100,000 volumes
    /// costs no list of all of them.
    pub fn nearest_misses(
        &self,
        claim: &PersistentVolumeClaim,
        delay_binding: bool,
    ) -> Result<Option<String>, MatchError> {
        let class = claim_class(claim);
        let mut misses = Misses::default();
        self.judge(claim, delay_binding, |name, entry, verdict| {
            let volume_class = entry.traits.as_ref().map_or("", |t| &*t.bucket.class);
            if volume_class == class || verdict.fits() {
                misses.add(name, verdict);
            }
        })?;
        Ok(misses.text(class))
    }

    /// Calls `each` with every volume [`VolumeIndex::explain`] lists and
    /// its verdict, in the index's order.
    fn judge(
        &self,
        claim: &PersistentVolumeClaim,
        delay_binding: bool,
        mut each: impl FnMut(&str, &Entry, Verdict),
    ) -> Result<(), MatchError> {
        let chosen = self
            .find_best_match(claim, delay_binding)?
            .and_then(|volume| volume.metadata.name.clone());
        let request = claim_request(claim)?;
        let modes = claim_access_modes(claim)?;
        let selector = self.selectors.of(claim)?;
        let wanted = Wanted {
            claim,
            key: ObjectKey::of(claim),
            request,
            modes,
            class: claim_class(claim),
            volume_mode: claim_volume_mode(claim).as_str().to_string(),
            vac: claim_vac(claim),
            selector,
            delay_binding,
        };
        let named = claim
            .spec
            .as_ref()
            .and_then(|s| s.volume_name.as_deref())
            .unwrap_or_default();
        for (name, entry) in &self.volumes {
            // Only what the claim could get or asked for: its class,
            // pre-bound to it, the volume it names, the search's choice.
            let listed = entry.traits.as_ref().is_none_or(|t| {
                *t.bucket.class == *wanted.class
                    || matches!(&t.place, Place::Claimed(key) if **key == wanted.key)
            }) || &**name == named
                || chosen.as_deref() == Some(&**name);
            if !listed {
                continue;
            }
            let verdict = if chosen.as_deref() == Some(&**name) {
                Verdict::Chosen
            } else {
                self.verdict(name, entry, &wanted)
            };
            each(name, entry, verdict);
        }
        Ok(())
    }

    /// The first rule of the search `entry` fails for the claim.
    fn verdict(&self, name: &str, entry: &Entry, wanted: &Wanted<'_>) -> Verdict {
        let Some(traits) = entry.traits.as_ref() else {
            return Verdict::Unreadable;
        };
        let pre_bound = matches!(&traits.place, Place::Claimed(key) if **key == wanted.key);
        if !pre_bound && traits.bucket.class != wanted.class {
            return Verdict::OtherClass {
                class: traits.bucket.class.clone(),
            };
        }
        if traits.deleting {
            return Verdict::BeingDeleted;
        }
        match &traits.place {
            Place::Claimed(key) if **key != wanted.key => {
                return Verdict::ClaimedBy {
                    claim: key.to_string(),
                };
            }
            Place::Claimed(_) => {
                if !entry
                    .volume
                    .object()
                    .is_some_and(|v| is_volume_bound_to_claim(&v, wanted.claim))
                {
                    return Verdict::ClaimedByEarlierClaim;
                }
            }
            Place::Unavailable => {
                let phase = entry
                    .volume
                    .object()
                    .and_then(|v| v.status.as_ref().cloned())
                    .and_then(|s| s.phase)
                    .unwrap_or_default();
                return Verdict::NotAvailable { phase };
            }
            Place::Free(..) => {}
        }
        if !traits.bucket.modes.is_superset_of(wanted.modes) {
            return Verdict::LacksAccessModes {
                missing: missing_modes(traits.bucket.modes, wanted.modes),
            };
        }
        if traits.bucket.volume_mode.as_str() != wanted.volume_mode {
            return Verdict::OtherVolumeMode {
                volume: traits.bucket.volume_mode.as_str().to_string(),
                claim: wanted.volume_mode.clone(),
            };
        }
        if traits.bucket.vac.as_deref() != wanted.vac {
            return Verdict::OtherAttributesClass;
        }
        if traits.capacity < wanted.request {
            return Verdict::TooSmall {
                capacity: human(traits.capacity),
                request: human(wanted.request),
            };
        }
        if pre_bound {
            return Verdict::Fits;
        }
        if wanted.delay_binding {
            return Verdict::WaitsForConsumer;
        }
        if let (Some(selector), Place::Free(labels)) = (&wanted.selector, &traits.place)
            && !selector.matches_labels(Some(labels))
        {
            return Verdict::SelectorMismatch;
        }
        match self.reserved.get(name) {
            Some(hold) if hold.claim != wanted.key => Verdict::ReservedFor {
                claim: hold.claim.to_string(),
            },
            _ => Verdict::Fits,
        }
    }
}

/// What the claim asks for, read once.
struct Wanted<'a> {
    claim: &'a PersistentVolumeClaim,
    key: ObjectKey,
    request: Amount,
    modes: AccessModes,
    class: &'a str,
    volume_mode: String,
    vac: Option<&'a str>,
    selector: Option<Arc<Selector>>,
    delay_binding: bool,
}

/// The claim's modes the volume lacks, by name.
fn missing_modes(offered: AccessModes, wanted: AccessModes) -> Vec<String> {
    wanted
        .iter()
        .filter(|mode| !offered.contains(*mode))
        .map(|mode| mode.as_str().to_string())
        .collect()
}

/// The nearest misses in a few words, for an event: at most three volumes
/// of the claim's class named, nearest first, then the rest counted by
/// verdict (`pv-a too small (1Gi < 2Gi), pv-b lacks ReadWriteMany; 9
/// smaller, 2 bound elsewhere`). Fed one volume at a time, it keeps only
/// the volumes it names.
#[derive(Default)]
struct Misses {
    /// The nearest volumes so far, nearest first (by verdict distance,
    /// then name); at most [`NAMED`].
    nearest: Vec<(String, Verdict)>,
    /// Every volume fed, by verdict distance and tally.
    counts: BTreeMap<(u8, &'static str), usize>,
    /// How many volumes were fed.
    total: usize,
}

impl Misses {
    /// Counts the volume `name` with its verdict, and keeps it when it is
    /// among the nearest so far.
    fn add(&mut self, name: &str, verdict: Verdict) {
        self.total += 1;
        *self
            .counts
            .entry((verdict.distance(), verdict.tally()))
            .or_default() += 1;
        let rank = (verdict.distance(), name);
        let at = self
            .nearest
            .partition_point(|(kept, v)| (v.distance(), kept.as_str()) < rank);
        if at < NAMED {
            self.nearest.insert(at, (name.to_string(), verdict));
            self.nearest.truncate(NAMED);
        }
    }

    /// The event's text for a claim of `class`; `None` when no volume was
    /// fed.
    fn text(mut self, class: &str) -> Option<String> {
        if self.total == 0 {
            return None;
        }
        for (_, verdict) in &self.nearest {
            let key = (verdict.distance(), verdict.tally());
            if let Some(count) = self.counts.get_mut(&key) {
                *count -= 1;
                if *count == 0 {
                    self.counts.remove(&key);
                }
            }
        }
        let named: Vec<String> = self
            .nearest
            .iter()
            .map(|(name, verdict)| format!("{name} {}", verdict.describe()))
            .collect();
        Some(misses_text(class, self.total, &named, &self.counts))
    }
}

/// The event's words for the nearest misses of a claim of `class`: how
/// many volumes were judged, the ones `named` (each "name verdict"), and
/// the rest counted by verdict distance and tally.
pub(super) fn misses_text(
    class: &str,
    total: usize,
    named: &[String],
    rest: &BTreeMap<(u8, &'static str), usize>,
) -> String {
    let class_name = if class.is_empty() {
        "without a class".to_string()
    } else {
        format!("in class {class:?}")
    };
    let mut text = format!(
        "nearest of {total} volumes {class_name}: {}",
        named.join(", ")
    );
    if !rest.is_empty() {
        let counted: Vec<String> = rest
            .iter()
            .map(|((_, tally), count)| format!("{count} {tally}"))
            .collect();
        text.push_str("; ");
        text.push_str(&counted.join(", "));
    }
    text
}

/// An amount of bytes as people write it: `2Gi`, `500Mi`, `1500`.
pub(crate) fn human(amount: Amount) -> String {
    let bytes = amount.nanos() / 1_000_000_000;
    if amount.nanos() % 1_000_000_000 != 0 || bytes == 0 {
        return amount.to_string();
    }
    for (suffix, size) in [
        ("Ti", 1_i128 << 40),
        ("Gi", 1 << 30),
        ("Mi", 1 << 20),
        ("Ki", 1 << 10),
    ] {
        if bytes % size == 0 {
            return format!("{}{suffix}", bytes / size);
        }
    }
    bytes.to_string()
}

/// How many volumes an event names.
const NAMED: usize = 3;
