//! Typed readings of PersistentVolume and PersistentVolumeClaim fields that the
//! controller and the volume index share: storage class, capacity and request,
//! volume mode, access modes, VolumeAttributesClass, claim references, and
//! the plugin name upstream's metrics label a volume with.
//!
//! Each reading follows upstream's helper of the same meaning (mostly
//! `component-helpers/storage/volume`), so that "which class does this claim
//! ask for" has one answer in the whole crate.

use std::fmt;

use k8s_openapi::api::core::v1::{ObjectReference, PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use quantity::{Amount, QuantityError};

use crate::pv::keys::VolumeName;
use crate::runtime::keys::ObjectKey;
use k8s_names::ANN_BETA_STORAGE_CLASS;

/// The resource name under which capacities and requests hold storage size.
const STORAGE: &str = "storage";

/// Which object a reading failed on, for error messages and events.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ObjectName {
    /// A PersistentVolume.
    Volume(VolumeName),
    /// A PersistentVolumeClaim.
    Claim(ObjectKey),
}

impl ObjectName {
    /// The name of a volume object.
    pub fn of_volume(volume: &PersistentVolume) -> Self {
        Self::Volume(VolumeName::of(volume))
    }

    /// The name of a claim object.
    pub fn of_claim(claim: &PersistentVolumeClaim) -> Self {
        Self::Claim(ObjectKey::of(claim))
    }
}

impl fmt::Display for ObjectName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Volume(name) => write!(f, "volume {:?}", name.as_str()),
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

    /// The mode as written in the API.
    pub(crate) fn as_str(&self) -> &str {
        match self {
            Self::Filesystem => "Filesystem",
            Self::Block => "Block",
            Self::Other(other) => other,
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
pub(crate) enum VolumePhase {
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
    pub(crate) fn as_str(self) -> &'static str {
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
    pub(crate) fn parse(text: &str) -> Option<Self> {
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
pub(crate) enum ClaimPhase {
    /// Not bound yet.
    Pending,
    /// Bound to a volume that points back at it.
    Bound,
    /// Its volume vanished or went to another claim.
    Lost,
}

impl ClaimPhase {
    /// The phase as the API spells it.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "Pending",
            Self::Bound => "Bound",
            Self::Lost => "Lost",
        }
    }

    /// The phase of this spelling; `None` for anything else.
    pub(crate) fn parse(text: &str) -> Option<Self> {
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

/// Whether a volume is new: no claimRef, not being deleted, and Pending or
/// without a phase (the controller has not written its phase yet).
pub(crate) fn is_new_volume(volume: &PersistentVolume) -> bool {
    let unclaimed = volume.spec.as_ref().is_none_or(|s| s.claim_ref.is_none());
    let phase = volume.status.as_ref().and_then(|s| s.phase.as_deref());
    let pending = phase.is_none_or(|text| VolumePhase::parse(text) == Some(VolumePhase::Pending));
    unclaimed && !is_being_deleted(&volume.metadata) && pending
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
    pub(crate) fn parse(text: &str) -> Self {
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
pub(crate) fn claim_ref_key(volume: &PersistentVolume) -> Option<ObjectKey> {
    let reference = volume.spec.as_ref()?.claim_ref.as_ref()?;
    Some(ObjectKey::of_reference(reference))
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

/// Label value upstream uses when a volume has no known plugin.
pub(crate) const NO_PLUGIN: &str = "N/A";

/// The volume plugin upstream would find for a volume's source
/// (`FindPluginBySpec`): CSI volumes as `kubernetes.io/csi:<driver>`, the
/// in-tree plugins the controller still knows by their plugin names, and
/// `N/A` for anything else.
pub(crate) fn plugin_name(volume: &PersistentVolume) -> String {
    let Some(spec) = volume.spec.as_ref() else {
        return NO_PLUGIN.to_string();
    };
    if let Some(csi) = spec.csi.as_ref() {
        return format!("kubernetes.io/csi:{}", csi.driver);
    }
    let name = if spec.nfs.is_some() {
        "kubernetes.io/nfs"
    } else if spec.host_path.is_some() {
        "kubernetes.io/host-path"
    } else if spec.local.is_some() {
        "kubernetes.io/local-volume"
    } else {
        NO_PLUGIN
    };
    name.to_string()
}

mod access;
#[cfg(test)]
use access::AccessMode;
pub(crate) use access::{AccessModes, claim_access_modes, volume_access_modes};

#[cfg(test)]
mod tests;
