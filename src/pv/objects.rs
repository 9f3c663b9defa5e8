//! Typed readings of PersistentVolume and PersistentVolumeClaim fields that the
//! controller and the volume index share: storage class, capacity and request,
//! volume mode, access modes, VolumeAttributesClass, claim references.
//!
//! Each reading follows upstream's helper of the same meaning (mostly
//! `component-helpers/storage/volume`), so that "which class does this claim
//! ask for" has one answer in the whole crate.

use std::fmt;

use k8s_openapi::api::core::v1::{ObjectReference, PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use quantity::{Amount, QuantityError};

use crate::pv::constants::ANN_BETA_STORAGE_CLASS;
use crate::pv::keys::{ClaimKey, VolumeName};

/// The resource name under which capacities and requests hold storage size.
const STORAGE: &str = "storage";

/// Which object a reading failed on, for error messages and events.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ObjectName {
    /// A PersistentVolume.
    Volume(VolumeName),
    /// A PersistentVolumeClaim.
    Claim(ClaimKey),
}

impl ObjectName {
    /// The name of a volume object.
    pub fn of_volume(volume: &PersistentVolume) -> Self {
        Self::Volume(VolumeName::of(volume))
    }

    /// The name of a claim object.
    pub fn of_claim(claim: &PersistentVolumeClaim) -> Self {
        Self::Claim(ClaimKey::of(claim))
    }
}

impl fmt::Display for ObjectName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Volume(name) => write!(f, "volume {name:?}", name = name.0),
            Self::Claim(key) => write!(f, "claim \"{key}\""),
        }
    }
}

/// A field of a volume or claim that cannot be read; the controller reports
/// it as a Warning event on that object.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ObjectError {
    /// A size (capacity or request) is not a valid quantity.
    #[error("{object}: {field} is invalid: {source}")]
    Quantity {
        /// The object the size belongs to.
        object: ObjectName,
        /// The field path, e.g. `spec.capacity[storage]`.
        field: &'static str,
        /// Why it could not be read (with the text of the quantity).
        #[source]
        source: QuantityError,
    },
    /// An access mode is not one of the four Kubernetes knows.
    #[error("{object}: unknown access mode {mode:?}")]
    UnknownAccessMode {
        /// The object that lists the mode.
        object: ObjectName,
        /// The mode as written.
        mode: String,
    },
}

/// The value of annotation `key`, if the object has it.
pub(crate) fn annotation<'a>(meta: &'a ObjectMeta, key: &str) -> Option<&'a str> {
    meta.annotations.as_ref()?.get(key).map(String::as_str)
}

/// Whether the object carries annotation `key`, whatever its value.
pub(crate) fn has_annotation(meta: &ObjectMeta, key: &str) -> bool {
    annotation(meta, key).is_some()
}

/// Whether the object has a deletionTimestamp: it is going away and waits only
/// for its finalizers, so it must not be bound or offered anew.
pub(crate) fn is_being_deleted(meta: &ObjectMeta) -> bool {
    meta.deletion_timestamp.is_some()
}

/// The storage class of a volume: the beta annotation wins over
/// `spec.storageClassName`; no class at all is `""`.
pub(crate) fn volume_class(volume: &PersistentVolume) -> &str {
    if let Some(class) = annotation(&volume.metadata, ANN_BETA_STORAGE_CLASS) {
        return class;
    }
    volume
        .spec
        .as_ref()
        .and_then(|s| s.storage_class_name.as_deref())
        .unwrap_or("")
}

/// The storage class a claim asks for: the beta annotation wins over
/// `spec.storageClassName`; an absent and an empty class are both `""`, which
/// binds only to volumes without a class.
pub(crate) fn claim_class(claim: &PersistentVolumeClaim) -> &str {
    if let Some(class) = annotation(&claim.metadata, ANN_BETA_STORAGE_CLASS) {
        return class;
    }
    claim
        .spec
        .as_ref()
        .and_then(|s| s.storage_class_name.as_deref())
        .unwrap_or("")
}

/// Whether a claim chose a class, even the empty one: `spec.storageClassName`
/// is set (to anything, `""` included) or the beta annotation is present.
/// Only claims without a class get the default class assigned retroactively.
pub(crate) fn claim_has_class(claim: &PersistentVolumeClaim) -> bool {
    let spec_set = claim
        .spec
        .as_ref()
        .is_some_and(|s| s.storage_class_name.is_some());
    spec_set || has_annotation(&claim.metadata, ANN_BETA_STORAGE_CLASS)
}

fn storage_amount(
    list: Option<&std::collections::BTreeMap<String, Quantity>>,
    object: impl FnOnce() -> ObjectName,
    field: &'static str,
) -> Result<Amount, ObjectError> {
    match list.and_then(|l| l.get(STORAGE)) {
        // Upstream reads a missing entry as the zero quantity.
        None => Ok(Amount::ZERO),
        Some(quantity) => Amount::from_quantity(quantity).map_err(|source| ObjectError::Quantity {
            object: object(),
            field,
            source,
        }),
    }
}

/// The size of a volume, `spec.capacity[storage]`; zero when absent (as
/// upstream reads it), an error naming the volume when unparsable.
pub(crate) fn volume_capacity(volume: &PersistentVolume) -> Result<Amount, ObjectError> {
    let capacity = volume.spec.as_ref().and_then(|s| s.capacity.as_ref());
    storage_amount(
        capacity,
        || ObjectName::of_volume(volume),
        "spec.capacity[storage]",
    )
}

/// The size a claim asks for, `spec.resources.requests[storage]`; zero when
/// absent (as upstream reads it), an error naming the claim when unparsable.
pub(crate) fn claim_request(claim: &PersistentVolumeClaim) -> Result<Amount, ObjectError> {
    let requests = claim
        .spec
        .as_ref()
        .and_then(|s| s.resources.as_ref())
        .and_then(|r| r.requests.as_ref());
    storage_amount(
        requests,
        || ObjectName::of_claim(claim),
        "spec.resources.requests[storage]",
    )
}

/// How a volume is presented to a pod.
///
/// An unknown string is kept as `Other` rather than refused: upstream compares
/// the modes as strings, so a claim and a volume with the same unknown mode
/// still match each other and nothing else.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum VolumeMode {
    /// A mounted filesystem; also what an absent mode means.
    Filesystem,
    /// A raw block device.
    Block,
    /// A mode this controller does not know, as written.
    Other(String),
}

impl VolumeMode {
    /// Reads an optional `volumeMode` field; absent means Filesystem (the API
    /// server's default, applied here too for objects from older servers).
    pub(crate) fn parse(mode: Option<&str>) -> Self {
        match mode {
            None | Some("Filesystem") => Self::Filesystem,
            Some("Block") => Self::Block,
            Some(other) => Self::Other(other.to_owned()),
        }
    }
}

/// The volume mode of a volume (`spec.volumeMode`).
pub(crate) fn volume_mode(volume: &PersistentVolume) -> VolumeMode {
    VolumeMode::parse(volume.spec.as_ref().and_then(|s| s.volume_mode.as_deref()))
}

/// The volume mode a claim asks for (`spec.volumeMode`).
pub(crate) fn claim_volume_mode(claim: &PersistentVolumeClaim) -> VolumeMode {
    VolumeMode::parse(claim.spec.as_ref().and_then(|s| s.volume_mode.as_deref()))
}

/// One way a volume can be attached, as the API spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[allow(clippy::enum_variant_names, reason = "the API's names")]
pub(crate) enum AccessMode {
    /// `ReadWriteOnce` (RWO): read-write by one node.
    ReadWriteOnce,
    /// `ReadOnlyMany` (ROX): read-only by many nodes.
    ReadOnlyMany,
    /// `ReadWriteMany` (RWX): read-write by many nodes.
    ReadWriteMany,
    /// `ReadWriteOncePod` (RWOP): read-write by one pod.
    ReadWriteOncePod,
}

impl AccessMode {
    /// All modes, in upstream's canonical order (RWO, ROX, RWX, RWOP).
    pub(crate) const ALL: [AccessMode; 4] = [
        Self::ReadWriteOnce,
        Self::ReadOnlyMany,
        Self::ReadWriteMany,
        Self::ReadWriteOncePod,
    ];

    /// The mode named by the API string, if it is one.
    pub(crate) fn parse(mode: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.as_str() == mode)
    }

    /// The API spelling, e.g. `ReadWriteOnce`.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::ReadWriteOnce => "ReadWriteOnce",
            Self::ReadOnlyMany => "ReadOnlyMany",
            Self::ReadWriteMany => "ReadWriteMany",
            Self::ReadWriteOncePod => "ReadWriteOncePod",
        }
    }

    /// The short form kubectl prints, e.g. `RWO`.
    pub(crate) fn short(self) -> &'static str {
        match self {
            Self::ReadWriteOnce => "RWO",
            Self::ReadOnlyMany => "ROX",
            Self::ReadWriteMany => "RWX",
            Self::ReadWriteOncePod => "RWOP",
        }
    }

    fn bit(self) -> u8 {
        match self {
            Self::ReadWriteOnce => 1,
            Self::ReadOnlyMany => 2,
            Self::ReadWriteMany => 4,
            Self::ReadWriteOncePod => 8,
        }
    }
}

/// A set of access modes; duplicates and order in the API list do not matter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub(crate) struct AccessModes(u8);

impl AccessModes {
    /// The empty set (a claim asking for nothing matches any volume).
    pub(crate) const EMPTY: AccessModes = AccessModes(0);

    /// The set holding exactly `modes`.
    #[cfg(test)]
    pub(crate) fn of(modes: &[AccessMode]) -> Self {
        Self(modes.iter().fold(0, |bits, m| bits | m.bit()))
    }

    /// Reads an API list of modes; the first unknown string is returned as
    /// the error.
    pub(crate) fn parse<S: AsRef<str>>(modes: &[S]) -> Result<Self, String> {
        modes.iter().try_fold(Self::EMPTY, |set, mode| {
            let mode = mode.as_ref();
            AccessMode::parse(mode)
                .map(|m| Self(set.0 | m.bit()))
                .ok_or_else(|| mode.to_owned())
        })
    }

    /// Whether `mode` is in the set.
    pub(crate) fn contains(self, mode: AccessMode) -> bool {
        self.0 & mode.bit() != 0
    }

    /// Whether every mode of `other` is in this set.
    pub(crate) fn is_superset_of(self, other: AccessModes) -> bool {
        self.0 & other.0 == other.0
    }

    /// How many modes the set holds.
    pub(crate) fn len(self) -> u32 {
        self.0.count_ones()
    }

    /// Whether the set holds no mode.
    #[cfg(test)]
    pub(crate) fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The modes in the set, in canonical order.
    pub(crate) fn iter(self) -> impl Iterator<Item = AccessMode> {
        AccessMode::ALL
            .into_iter()
            .filter(move |m| self.contains(*m))
    }

    /// Every set of modes that contains this one, fewest modes first and sets
    /// of equal size in a fixed order (by canonical mode order): the order in
    /// which a claim tries the volume groups, so that a volume offering fewer
    /// extra modes is preferred.
    pub(crate) fn supersets(self) -> impl Iterator<Item = AccessModes> {
        let mut all: Vec<AccessModes> = (0u8..16)
            .map(AccessModes)
            .filter(|s| s.is_superset_of(self))
            .collect();
        all.sort_by_key(|s| (s.len(), s.0));
        all.into_iter()
    }
}

/// Shows the set the way upstream's index keys do: `RWO,ROX`.
impl fmt::Display for AccessModes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.iter().map(AccessMode::short).collect();
        f.write_str(&names.join(","))
    }
}

/// The access modes a volume offers (`spec.accessModes`); an unknown string is
/// an error naming the volume.
pub(crate) fn volume_access_modes(volume: &PersistentVolume) -> Result<AccessModes, ObjectError> {
    let modes = volume
        .spec
        .as_ref()
        .and_then(|s| s.access_modes.as_deref())
        .unwrap_or_default();
    AccessModes::parse(modes).map_err(|mode| ObjectError::UnknownAccessMode {
        object: ObjectName::of_volume(volume),
        mode,
    })
}

/// The access modes a claim asks for (`spec.accessModes`); an unknown string
/// is an error naming the claim.
pub(crate) fn claim_access_modes(
    claim: &PersistentVolumeClaim,
) -> Result<AccessModes, ObjectError> {
    let modes = claim
        .spec
        .as_ref()
        .and_then(|s| s.access_modes.as_deref())
        .unwrap_or_default();
    AccessModes::parse(modes).map_err(|mode| ObjectError::UnknownAccessMode {
        object: ObjectName::of_claim(claim),
        mode,
    })
}

/// Whether the volume is bound or pre-bound to this claim: its claimRef names
/// the claim's namespace and name, and its UID, when set, is the claim's.
pub(crate) fn is_volume_bound_to_claim(
    volume: &PersistentVolume,
    claim: &PersistentVolumeClaim,
) -> bool {
    let Some(claim_ref) = volume.spec.as_ref().and_then(|s| s.claim_ref.as_ref()) else {
        return false;
    };
    let same_name =
        claim_ref.name.as_deref().unwrap_or("") == claim.metadata.name.as_deref().unwrap_or("");
    let same_namespace = claim_ref.namespace.as_deref().unwrap_or("")
        == claim.metadata.namespace.as_deref().unwrap_or("");
    let ref_uid = claim_ref.uid.as_deref().unwrap_or("");
    let uid_fits = ref_uid.is_empty() || ref_uid == claim.metadata.uid.as_deref().unwrap_or("");
    same_name && same_namespace && uid_fits
}

/// The reference to a claim that binding writes into a volume's claimRef:
/// kind, apiVersion, namespace, name, UID and resourceVersion of the claim.
pub(crate) fn claim_reference(claim: &PersistentVolumeClaim) -> ObjectReference {
    ObjectReference {
        kind: Some("PersistentVolumeClaim".to_owned()),
        api_version: Some("v1".to_owned()),
        namespace: claim.metadata.namespace.clone(),
        name: claim.metadata.name.clone(),
        uid: claim.metadata.uid.clone(),
        resource_version: claim.metadata.resource_version.clone(),
        field_path: None,
    }
}

/// The VolumeAttributesClass of a volume (`spec.volumeAttributesClassName`);
/// `None` when absent or empty, which upstream treats alike.
pub(crate) fn volume_vac(volume: &PersistentVolume) -> Option<&str> {
    let name = volume
        .spec
        .as_ref()?
        .volume_attributes_class_name
        .as_deref()?;
    (!name.is_empty()).then_some(name)
}

/// The VolumeAttributesClass a claim asks for (`spec.volumeAttributesClassName`);
/// `None` when absent or empty, which upstream treats alike.
pub(crate) fn claim_vac(claim: &PersistentVolumeClaim) -> Option<&str> {
    let name = claim
        .spec
        .as_ref()?
        .volume_attributes_class_name
        .as_deref()?;
    (!name.is_empty()).then_some(name)
}

/// The phase of a PersistentVolume (`status.phase`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum VolumePhase {
    /// Created, not yet seen by the controller.
    Pending,
    /// Free for a claim.
    Available,
    /// Bound to a claim that exists.
    Bound,
    /// Its claim is gone; the reclaim policy runs.
    Released,
    /// Reclaiming went wrong; the message says why.
    Failed,
}

impl VolumePhase {
    /// The phase as the API spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "Pending",
            Self::Available => "Available",
            Self::Bound => "Bound",
            Self::Released => "Released",
            Self::Failed => "Failed",
        }
    }

    /// The phase of this spelling; `None` for anything else (no phase yet,
    /// or one the controller does not know).
    pub fn parse(text: &str) -> Option<Self> {
        [
            Self::Pending,
            Self::Available,
            Self::Bound,
            Self::Released,
            Self::Failed,
        ]
        .into_iter()
        .find(|phase| phase.as_str() == text)
    }
}

impl fmt::Display for VolumePhase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The phase of a PersistentVolumeClaim (`status.phase`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ClaimPhase {
    /// Not bound yet.
    Pending,
    /// Bound to a volume that points back at it.
    Bound,
    /// Its volume vanished or went to another claim.
    Lost,
}

impl ClaimPhase {
    /// The phase as the API spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "Pending",
            Self::Bound => "Bound",
            Self::Lost => "Lost",
        }
    }

    /// The phase of this spelling; `None` for anything else.
    pub fn parse(text: &str) -> Option<Self> {
        [Self::Pending, Self::Bound, Self::Lost]
            .into_iter()
            .find(|phase| phase.as_str() == text)
    }
}

impl fmt::Display for ClaimPhase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The phase of a volume; `None` when it has none (or an unknown one).
pub(crate) fn volume_phase(volume: &PersistentVolume) -> Option<VolumePhase> {
    VolumePhase::parse(volume.status.as_ref()?.phase.as_deref()?)
}

/// The phase of a claim; `None` when it has none (or an unknown one).
pub(crate) fn claim_phase(claim: &PersistentVolumeClaim) -> Option<ClaimPhase> {
    ClaimPhase::parse(claim.status.as_ref()?.phase.as_deref()?)
}

/// What happens to a volume once its claim is gone
/// (`spec.persistentVolumeReclaimPolicy`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReclaimPolicy {
    /// Keep the volume and its data for an administrator.
    Retain,
    /// Scrub the volume and offer it again.
    Recycle,
    /// Delete the storage and the volume object.
    Delete,
    /// A policy the controller does not know, as written ("" when unset).
    Other(String),
}

impl ReclaimPolicy {
    /// The policy of this spelling.
    pub fn parse(text: &str) -> Self {
        match text {
            "Retain" => Self::Retain,
            "Recycle" => Self::Recycle,
            "Delete" => Self::Delete,
            other => Self::Other(other.to_string()),
        }
    }
}

impl fmt::Display for ReclaimPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Retain => f.write_str("Retain"),
            Self::Recycle => f.write_str("Recycle"),
            Self::Delete => f.write_str("Delete"),
            Self::Other(text) => f.write_str(text),
        }
    }
}

/// A volume's reclaim policy.
pub(crate) fn reclaim_policy(volume: &PersistentVolume) -> ReclaimPolicy {
    ReclaimPolicy::parse(
        volume
            .spec
            .as_ref()
            .and_then(|s| s.persistent_volume_reclaim_policy.as_deref())
            .unwrap_or(""),
    )
}

/// The namespace and name a volume's claimRef names, when it names one.
pub(crate) fn claim_ref_key(volume: &PersistentVolume) -> Option<ClaimKey> {
    let reference = volume.spec.as_ref()?.claim_ref.as_ref()?;
    Some(ClaimKey::of_reference(reference))
}

/// The UID a volume's claimRef names ("" when it names none).
pub(crate) fn claim_ref_uid(volume: &PersistentVolume) -> &str {
    volume
        .spec
        .as_ref()
        .and_then(|s| s.claim_ref.as_ref())
        .and_then(|r| r.uid.as_deref())
        .unwrap_or("")
}

/// Builders for volumes and claims in tests, so a table row fits on a line:
/// `volume("v1", "1Gi").modes(&[RWO]).class("gold")`.
#[cfg(test)]
pub(crate) mod testing {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use k8s_openapi::api::core::v1::{
        ObjectReference, PersistentVolume, PersistentVolumeClaim, PersistentVolumeClaimSpec,
        PersistentVolumeSpec, PersistentVolumeStatus, VolumeResourceRequirements,
    };
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
        LabelSelector, LabelSelectorRequirement, ObjectMeta, Time,
    };
    use k8s_openapi::jiff::Timestamp;

    use super::AccessMode;
    use crate::pv::constants::ANN_BETA_STORAGE_CLASS;

    pub(crate) const RWO: AccessMode = AccessMode::ReadWriteOnce;
    pub(crate) const ROX: AccessMode = AccessMode::ReadOnlyMany;
    pub(crate) const RWX: AccessMode = AccessMode::ReadWriteMany;
    pub(crate) const RWOP: AccessMode = AccessMode::ReadWriteOncePod;

    fn strings(modes: &[AccessMode]) -> Vec<String> {
        modes.iter().map(|m| m.as_str().to_owned()).collect()
    }

    fn annotate(meta: &mut ObjectMeta, key: &str, value: &str) {
        meta.annotations
            .get_or_insert_default()
            .insert(key.to_owned(), value.to_owned());
    }

    /// A volume under construction; `volume(name, size)` starts it as an
    /// Available RWO volume without class or volume mode.
    #[derive(Clone)]
    pub(crate) struct VolumeBuilder(PersistentVolume);

    pub(crate) fn volume(name: &str, size: &str) -> VolumeBuilder {
        VolumeBuilder(PersistentVolume {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                ..Default::default()
            },
            spec: Some(PersistentVolumeSpec {
                capacity: Some(BTreeMap::from([(
                    "storage".to_owned(),
                    Quantity(size.to_owned()),
                )])),
                access_modes: Some(strings(&[RWO])),
                ..Default::default()
            }),
            status: Some(PersistentVolumeStatus {
                phase: Some("Available".to_owned()),
                ..Default::default()
            }),
        })
    }

    impl VolumeBuilder {
        fn spec(&mut self) -> &mut PersistentVolumeSpec {
            self.0.spec.get_or_insert_default()
        }
        pub(crate) fn modes(mut self, modes: &[AccessMode]) -> Self {
            self.spec().access_modes = Some(strings(modes));
            self
        }
        pub(crate) fn raw_modes(mut self, modes: &[&str]) -> Self {
            self.spec().access_modes = Some(modes.iter().map(|m| (*m).to_owned()).collect());
            self
        }
        pub(crate) fn class(mut self, class: &str) -> Self {
            self.spec().storage_class_name = Some(class.to_owned());
            self
        }
        pub(crate) fn beta_class(mut self, class: &str) -> Self {
            annotate(&mut self.0.metadata, ANN_BETA_STORAGE_CLASS, class);
            self
        }
        pub(crate) fn label(mut self, key: &str, value: &str) -> Self {
            self.0
                .metadata
                .labels
                .get_or_insert_default()
                .insert(key.to_owned(), value.to_owned());
            self
        }
        /// Sets claimRef to `namespace/name` with the given UID ("" for none).
        pub(crate) fn claim_ref(mut self, namespace: &str, name: &str, uid: &str) -> Self {
            let text = |s: &str| (!s.is_empty()).then(|| s.to_owned());
            self.spec().claim_ref = Some(ObjectReference {
                namespace: text(namespace),
                name: text(name),
                uid: text(uid),
                ..Default::default()
            });
            self
        }
        pub(crate) fn bound_to(self, name: &str) -> Self {
            self.claim_ref("myns", name, "")
        }
        pub(crate) fn phase(mut self, phase: &str) -> Self {
            self.0.status.get_or_insert_default().phase = Some(phase.to_owned());
            self
        }
        pub(crate) fn volume_mode(mut self, mode: &str) -> Self {
            self.spec().volume_mode = Some(mode.to_owned());
            self
        }
        pub(crate) fn vac(mut self, vac: &str) -> Self {
            self.spec().volume_attributes_class_name = Some(vac.to_owned());
            self
        }
        pub(crate) fn policy(mut self, policy: &str) -> Self {
            self.spec().persistent_volume_reclaim_policy = Some(policy.to_owned());
            self
        }
        pub(crate) fn annotation(mut self, key: &str, value: &str) -> Self {
            annotate(&mut self.0.metadata, key, value);
            self
        }
        pub(crate) fn csi(mut self, driver: &str) -> Self {
            self.spec().csi = Some(k8s_openapi::api::core::v1::CSIPersistentVolumeSource {
                driver: driver.to_owned(),
                volume_handle: "handle".to_owned(),
                ..Default::default()
            });
            self
        }
        pub(crate) fn deleting(mut self) -> Self {
            self.0.metadata.deletion_timestamp = Some(Time(Timestamp::UNIX_EPOCH));
            self
        }
        pub(crate) fn rv(mut self, resource_version: &str) -> Self {
            self.0.metadata.resource_version = Some(resource_version.to_owned());
            self
        }
        pub(crate) fn build(self) -> PersistentVolume {
            self.0
        }
        pub(crate) fn arc(self) -> Arc<PersistentVolume> {
            Arc::new(self.0)
        }
    }

    /// A claim under construction; `claim(name, size)` starts it in namespace
    /// `myns`, asking for RWO, without class, selector or volume mode.
    #[derive(Clone)]
    pub(crate) struct ClaimBuilder(PersistentVolumeClaim);

    pub(crate) fn claim(name: &str, size: &str) -> ClaimBuilder {
        ClaimBuilder(PersistentVolumeClaim {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                namespace: Some("myns".to_owned()),
                ..Default::default()
            },
            spec: Some(PersistentVolumeClaimSpec {
                access_modes: Some(strings(&[RWO])),
                resources: Some(VolumeResourceRequirements {
                    requests: Some(BTreeMap::from([(
                        "storage".to_owned(),
                        Quantity(size.to_owned()),
                    )])),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            status: None,
        })
    }

    impl ClaimBuilder {
        fn spec(&mut self) -> &mut PersistentVolumeClaimSpec {
            self.0.spec.get_or_insert_default()
        }
        fn selector(&mut self) -> &mut LabelSelector {
            self.spec().selector.get_or_insert_default()
        }
        pub(crate) fn volume_name(mut self, name: &str) -> Self {
            self.spec().volume_name = Some(name.to_owned());
            self
        }
        pub(crate) fn uid(mut self, uid: &str) -> Self {
            self.0.metadata.uid = Some(uid.to_owned());
            self
        }
        pub(crate) fn modes(mut self, modes: &[AccessMode]) -> Self {
            self.spec().access_modes = Some(strings(modes));
            self
        }
        pub(crate) fn raw_modes(mut self, modes: &[&str]) -> Self {
            self.spec().access_modes = Some(modes.iter().map(|m| (*m).to_owned()).collect());
            self
        }
        pub(crate) fn class(mut self, class: &str) -> Self {
            self.spec().storage_class_name = Some(class.to_owned());
            self
        }
        pub(crate) fn beta_class(mut self, class: &str) -> Self {
            annotate(&mut self.0.metadata, ANN_BETA_STORAGE_CLASS, class);
            self
        }
        pub(crate) fn match_label(mut self, key: &str, value: &str) -> Self {
            self.selector()
                .match_labels
                .get_or_insert_default()
                .insert(key.to_owned(), value.to_owned());
            self
        }
        pub(crate) fn match_expr(mut self, key: &str, operator: &str, values: &[&str]) -> Self {
            let values =
                (!values.is_empty()).then(|| values.iter().map(|v| (*v).to_owned()).collect());
            self.selector()
                .match_expressions
                .get_or_insert_default()
                .push(LabelSelectorRequirement {
                    key: key.to_owned(),
                    operator: operator.to_owned(),
                    values,
                });
            self
        }
        pub(crate) fn empty_selector(mut self) -> Self {
            self.selector();
            self
        }
        pub(crate) fn volume_mode(mut self, mode: &str) -> Self {
            self.spec().volume_mode = Some(mode.to_owned());
            self
        }
        pub(crate) fn vac(mut self, vac: &str) -> Self {
            self.spec().volume_attributes_class_name = Some(vac.to_owned());
            self
        }
        pub(crate) fn rv(mut self, resource_version: &str) -> Self {
            self.0.metadata.resource_version = Some(resource_version.to_owned());
            self
        }
        pub(crate) fn build(self) -> PersistentVolumeClaim {
            self.0
        }
        pub(crate) fn arc(self) -> Arc<PersistentVolumeClaim> {
            Arc::new(self.0)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::testing::*;
    use super::*;

    #[test]
    fn volume_class_prefers_beta_annotation() {
        assert_eq!(volume_class(&volume("v", "1Gi").build()), "");
        assert_eq!(
            volume_class(&volume("v", "1Gi").class("gold").build()),
            "gold"
        );
        assert_eq!(
            volume_class(
                &volume("v", "1Gi")
                    .class("gold")
                    .beta_class("silver")
                    .build()
            ),
            "silver"
        );
        assert_eq!(
            volume_class(&volume("v", "1Gi").class("gold").beta_class("").build()),
            ""
        );
    }

    #[test]
    fn claim_class_and_has_class() {
        let none = claim("c", "1Gi").build();
        let empty = claim("c", "1Gi").class("").build();
        let gold = claim("c", "1Gi").class("gold").build();
        let beta = claim("c", "1Gi").class("gold").beta_class("silver").build();
        let beta_only = claim("c", "1Gi").beta_class("").build();
        assert_eq!(
            [&none, &empty, &gold, &beta, &beta_only].map(claim_class),
            ["", "", "gold", "silver", ""]
        );
        assert_eq!(
            [&none, &empty, &gold, &beta, &beta_only].map(claim_has_class),
            [false, true, true, true, true]
        );
    }

    #[test]
    fn sizes_are_parsed_or_named_errors() {
        assert_eq!(
            volume_capacity(&volume("v", "1Gi").build()).ok(),
            Amount::parse("1Gi").ok()
        );
        assert_eq!(
            claim_request(&claim("c", "500Mi").build()).ok(),
            Amount::parse("500Mi").ok()
        );

        let mut no_capacity = volume("v", "1Gi").build();
        no_capacity.spec = None;
        assert_eq!(volume_capacity(&no_capacity), Ok(Amount::ZERO));

        let err = volume_capacity(&volume("v9", "lots").build()).err();
        assert!(matches!(
            &err,
            Some(ObjectError::Quantity { object: ObjectName::Volume(name), field: "spec.capacity[storage]", source })
                if name.0 == "v9" && source.input == "lots"
        ));
        let err = claim_request(&claim("c9", "1X").build()).err();
        let message = err.map(|e| e.to_string()).unwrap_or_default();
        assert!(message.contains("claim \"myns/c9\""), "{message}");
        assert!(message.contains("requests[storage]"), "{message}");
    }

    #[test]
    fn volume_modes() {
        assert_eq!(
            volume_mode(&volume("v", "1").build()),
            VolumeMode::Filesystem
        );
        assert_eq!(
            volume_mode(&volume("v", "1").volume_mode("Block").build()),
            VolumeMode::Block
        );
        assert_eq!(
            claim_volume_mode(&claim("c", "1").volume_mode("Filesystem").build()),
            VolumeMode::Filesystem
        );
        assert_eq!(
            claim_volume_mode(&claim("c", "1").volume_mode("Tape").build()),
            VolumeMode::Other("Tape".into())
        );
    }

    #[test]
    fn access_mode_sets() {
        let set = AccessModes::of(&[ROX, RWO, RWO]);
        assert_eq!(set.len(), 2);
        assert!(set.contains(RWO) && set.contains(ROX) && !set.contains(RWX));
        assert!(set.is_superset_of(AccessModes::of(&[RWO])));
        assert!(!AccessModes::of(&[RWO]).is_superset_of(set));
        assert_eq!(set.to_string(), "RWO,ROX");
        assert_eq!(
            AccessModes::parse(&["ReadWriteOncePod", "ReadWriteMany"]),
            Ok(AccessModes::of(&[RWX, RWOP]))
        );
        assert_eq!(
            AccessModes::parse(&["ReadWriteOnce", "rwo"]),
            Err("rwo".to_owned())
        );
        assert!(AccessModes::EMPTY.is_empty());
    }

    #[test]
    fn supersets_fewest_modes_first_in_fixed_order() {
        let order: Vec<String> = AccessModes::of(&[RWO])
            .supersets()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(
            order,
            [
                "RWO",
                "RWO,ROX",
                "RWO,RWX",
                "RWO,RWOP",
                "RWO,ROX,RWX",
                "RWO,ROX,RWOP",
                "RWO,RWX,RWOP",
                "RWO,ROX,RWX,RWOP"
            ]
        );
        assert_eq!(AccessModes::EMPTY.supersets().count(), 16);
        assert_eq!(
            AccessModes::of(&[RWO, ROX, RWX, RWOP]).supersets().count(),
            1
        );
    }

    #[test]
    fn unknown_access_modes_are_named_errors() {
        assert_eq!(
            volume_access_modes(&volume("v", "1").modes(&[RWX, RWO]).build()),
            Ok(AccessModes::of(&[RWO, RWX]))
        );
        assert_eq!(
            volume_access_modes(&volume("v", "1").raw_modes(&["ReadWriteSometimes"]).build()),
            Err(ObjectError::UnknownAccessMode {
                object: ObjectName::Volume(VolumeName("v".into())),
                mode: "ReadWriteSometimes".into()
            })
        );
        assert_eq!(
            claim_access_modes(&claim("c", "1").raw_modes(&["X"]).build()),
            Err(ObjectError::UnknownAccessMode {
                object: ObjectName::Claim(ClaimKey::new("myns", "c")),
                mode: "X".into()
            })
        );
        let mut no_spec = claim("c", "1").build();
        no_spec.spec = None;
        assert_eq!(claim_access_modes(&no_spec), Ok(AccessModes::EMPTY));
    }

    #[test]
    fn bound_to_claim_needs_name_namespace_and_fitting_uid() {
        let c = claim("claim1", "1Gi").uid("uid-1").build();
        let cases = [
            (volume("v", "1").build(), false),
            (
                volume("v", "1").claim_ref("myns", "claim1", "").build(),
                true,
            ),
            (
                volume("v", "1")
                    .claim_ref("myns", "claim1", "uid-1")
                    .build(),
                true,
            ),
            (
                volume("v", "1")
                    .claim_ref("myns", "claim1", "uid-2")
                    .build(),
                false,
            ),
            (
                volume("v", "1").claim_ref("other", "claim1", "").build(),
                false,
            ),
            (
                volume("v", "1").claim_ref("myns", "claim2", "").build(),
                false,
            ),
            (volume("v", "1").claim_ref("", "", "").build(), false),
        ];
        for (i, (v, expected)) in cases.iter().enumerate() {
            assert_eq!(is_volume_bound_to_claim(v, &c), *expected, "case {i}");
        }
    }

    #[test]
    fn claim_reference_carries_identity() {
        let c = claim("claim1", "1Gi").uid("uid-1").rv("42").build();
        let r = claim_reference(&c);
        assert_eq!(r.kind.as_deref(), Some("PersistentVolumeClaim"));
        assert_eq!(r.api_version.as_deref(), Some("v1"));
        assert_eq!(r.namespace.as_deref(), Some("myns"));
        assert_eq!(r.name.as_deref(), Some("claim1"));
        assert_eq!(r.uid.as_deref(), Some("uid-1"));
        assert_eq!(r.resource_version.as_deref(), Some("42"));
        let v = volume("v", "1").build();
        let mut bound = v.clone();
        bound.spec.get_or_insert_default().claim_ref = Some(r);
        assert!(is_volume_bound_to_claim(&bound, &c));
    }

    #[test]
    fn annotations_deletion_and_vac() {
        let v = volume("v", "1")
            .beta_class("gold")
            .deleting()
            .vac("fast")
            .build();
        assert_eq!(
            annotation(&v.metadata, ANN_BETA_STORAGE_CLASS),
            Some("gold")
        );
        assert_eq!(annotation(&v.metadata, "other"), None);
        assert!(has_annotation(&v.metadata, ANN_BETA_STORAGE_CLASS));
        assert!(is_being_deleted(&v.metadata));
        assert!(!is_being_deleted(&volume("v", "1").build().metadata));
        assert_eq!(volume_vac(&v), Some("fast"));
        assert_eq!(volume_vac(&volume("v", "1").vac("").build()), None);
        assert_eq!(
            claim_vac(&claim("c", "1").vac("fast").build()),
            Some("fast")
        );
        assert_eq!(claim_vac(&claim("c", "1").build()), None);
    }
}
