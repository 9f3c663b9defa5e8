//! `--feature-gates`, in kube-controller-manager's syntax
//! (`Name=true,Other=false`), for the gates the controllers of this
//! process consult, with the defaults of Kubernetes 1.35. A gate this
//! process does not know is refused, so a typo never passes for a setting.

use std::fmt;
use std::str::FromStr;

/// A feature gate this process knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Feature {
    /// ResourceClaims at all (GA, locked on since 1.34).
    DynamicResourceAllocation,
    /// Templates whose requests ask for admin access to devices (beta, on).
    DraAdminAccess,
    /// Templates whose requests list alternatives, `firstAvailable` (beta,
    /// on).
    DraPrioritizedList,
    /// Claims the scheduler makes for extended resources (alpha, off). The
    /// ResourceClaim controller releases such claims whatever the gate, as
    /// kube-controller-manager 1.35 does; the gate is accepted so the same
    /// line works for both.
    DraExtendedResource,
}

impl Feature {
    /// Every gate, in name order.
    const ALL: [Feature; 4] = [
        Feature::DraAdminAccess,
        Feature::DraExtendedResource,
        Feature::DraPrioritizedList,
        Feature::DynamicResourceAllocation,
    ];

    /// The gate's name in `--feature-gates`.
    pub fn name(self) -> &'static str {
        match self {
            Self::DynamicResourceAllocation => "DynamicResourceAllocation",
            Self::DraAdminAccess => "DRAAdminAccess",
            Self::DraPrioritizedList => "DRAPrioritizedList",
            Self::DraExtendedResource => "DRAExtendedResource",
        }
    }

    /// Its value unless set.
    fn default(self) -> bool {
        !matches!(self, Self::DraExtendedResource)
    }

    /// Whether it is fixed at its default for good (setting the other value
    /// is refused, as kube-controller-manager refuses it).
    fn locked(self) -> bool {
        matches!(self, Self::DynamicResourceAllocation)
    }
}

/// The gates' values: the defaults, with what `--feature-gates` set.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FeatureGates {
    set: Vec<(Feature, bool)>,
}

impl FeatureGates {
    /// Whether `feature` is on.
    pub fn enabled(&self, feature: Feature) -> bool {
        self.set
            .iter()
            .rev()
            .find(|(f, _)| *f == feature)
            .map_or(feature.default(), |(_, on)| *on)
    }

    /// The gates with `feature` set to `on` (a test's or an embedder's
    /// setting; a locked gate is set all the same).
    pub fn with(mut self, feature: Feature, on: bool) -> Self {
        self.set.push((feature, on));
        self
    }
}

/// Why a `--feature-gates` value was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FeatureGateError {
    /// An entry is not `Name=value`.
    #[error("missing bool value for feature gate {0:?} (want Name=true or Name=false)")]
    Malformed(String),
    /// A gate this process does not know.
    #[error(
        "unrecognized feature gate: {0} (this process knows {known}; leave out gates it does not consult)",
        known = known_names()
    )]
    Unknown(String),
    /// A value that is no boolean.
    #[error("invalid value of {gate}: {value:?} (want true or false)")]
    Invalid {
        /// The gate.
        gate: String,
        /// What was given.
        value: String,
    },
    /// A locked gate set to the value it cannot take.
    #[error("cannot set feature gate {gate} to {value}, feature is locked to {locked}")]
    Locked {
        /// The gate.
        gate: String,
        /// What was given.
        value: bool,
        /// The only value it takes.
        locked: bool,
    },
}

fn known_names() -> String {
    Feature::ALL.map(Feature::name).join(", ")
}

/// Go's `strconv.ParseBool`, which kube-controller-manager uses.
fn parse_bool(value: &str) -> Option<bool> {
    match value {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

impl FromStr for FeatureGates {
    type Err = FeatureGateError;

    /// Parses `Name=value,Name=value` (empty: every gate at its default).
    fn from_str(input: &str) -> Result<Self, Self::Err> {
        let mut gates = Self::default();
        for entry in input.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let (name, value) = entry
                .split_once('=')
                .ok_or_else(|| FeatureGateError::Malformed(entry.to_string()))?;
            let (name, value) = (name.trim(), value.trim());
            let gate = Feature::ALL
                .into_iter()
                .find(|gate| gate.name() == name)
                .ok_or_else(|| FeatureGateError::Unknown(name.to_string()))?;
            let on = parse_bool(value).ok_or_else(|| FeatureGateError::Invalid {
                gate: name.to_string(),
                value: value.to_string(),
            })?;
            if gate.locked() && on != gate.default() {
                return Err(FeatureGateError::Locked {
                    gate: name.to_string(),
                    value: on,
                    locked: gate.default(),
                });
            }
            gates.set.push((gate, on));
        }
        Ok(gates)
    }
}

impl fmt::Display for FeatureGates {
    /// Every gate with its value, as `--feature-gates` takes them.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let entries: Vec<String> = Feature::ALL
            .iter()
            .map(|gate| format!("{}={}", gate.name(), self.enabled(*gate)))
            .collect();
        f.write_str(&entries.join(","))
    }
}

#[cfg(test)]
mod tests;
