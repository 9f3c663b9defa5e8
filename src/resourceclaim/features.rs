//! The feature gates the ResourceClaim controller consults, read once from
//! the process's gates into the controller's settings.

use crate::feature_gates::{Feature, FeatureGates};

/// The feature gates the controller consults (upstream's `Features`): a
/// template asking for what a gate switched off makes no claim.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Features {
    /// DRAAdminAccess: requests may ask for admin access to devices.
    pub admin_access: bool,
    /// DRAPrioritizedList: requests may list alternatives
    /// (`firstAvailable`).
    pub prioritized_list: bool,
}

impl Default for Features {
    /// Both on, as in Kubernetes 1.34 and 1.35.
    fn default() -> Self {
        Self::from_gates(&FeatureGates::default())
    }
}

impl Features {
    /// The features as `gates` set them.
    pub fn from_gates(gates: &FeatureGates) -> Self {
        Self {
            admin_access: gates.enabled(Feature::DraAdminAccess),
            prioritized_list: gates.enabled(Feature::DraPrioritizedList),
        }
    }
}
