//! Access modes: how a volume can be attached, as a volume offers them and
//! a claim asks for them, kept as a small set so that matching compares
//! sets without allocating.

use std::fmt;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};

use super::{ObjectError, ObjectName};

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
