//! The state a chaos run must settle to once the faults stop: every
//! binding complete and consistent, every release reclaimed, every claim
//! that has a fitting volume bound.

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use memapi::MemApi;

use crate::harness::check_invariants;

use super::fit::{Chosen, misfit};
use super::world::CLASS;

fn volume_phase(v: &PersistentVolume) -> &str {
    v.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("")
}

fn claim_phase(c: &PersistentVolumeClaim) -> &str {
    c.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("")
}

fn claim_class(c: &PersistentVolumeClaim) -> &str {
    c.spec
        .as_ref()
        .and_then(|s| s.storage_class_name.as_deref())
        .unwrap_or("")
}

fn name<K: kube::Resource>(o: &K) -> &str {
    o.meta().name.as_deref().unwrap_or("")
}

/// Whether an unclaimed Available volume could take the claim `c`: it
/// fits it by every rule of a match (size, class, modes, selector).
fn free_for(v: &PersistentVolume, c: &PersistentVolumeClaim) -> bool {
    let spec = v.spec.as_ref();
    volume_phase(v) == "Available"
        && spec.and_then(|s| s.claim_ref.as_ref()).is_none()
        && v.metadata.deletion_timestamp.is_none()
        && misfit(v, c, Chosen::Matched).is_none()
}

/// Whether the volume's claimRef names a claim other than `c`.
fn claimed_by_another(v: &PersistentVolume, c: &PersistentVolumeClaim) -> bool {
    let Some(reference) = v.spec.as_ref().and_then(|s| s.claim_ref.as_ref()) else {
        return false;
    };
    reference.name != c.metadata.name
        || reference
            .uid
            .as_ref()
            .is_some_and(|uid| Some(uid) != c.metadata.uid.as_ref())
}

/// Whether a volume a claim names can serve it: not being deleted, and
/// fitting it as a volume a claim names must (size, class, modes).
fn can_serve(v: &PersistentVolume, c: &PersistentVolumeClaim) -> bool {
    v.metadata.deletion_timestamp.is_none() && misfit(v, c, Chosen::ByClaim).is_none()
}

/// What keeps the server's state from being settled, if anything.
pub(crate) fn unsettled(api: &MemApi) -> Vec<String> {
    let volumes = api.list::<PersistentVolume>();
    let claims = api.list::<PersistentVolumeClaim>();
    let mut problems = check_invariants(api);
    for c in claims
        .iter()
        .filter(|c| c.metadata.deletion_timestamp.is_none())
    {
        // Bound, or Lost with its volume (upstream never binds it again).
        if matches!(claim_phase(c), "Bound" | "Lost") {
            continue;
        }
        let wanted = c.spec.as_ref().and_then(|s| s.volume_name.as_deref());
        if let Some(wanted) = wanted {
            // Pending is right while the volume is another claim's, or
            // cannot serve this one (upstream's checks).
            let free_for_it = volumes
                .iter()
                .find(|v| name(*v) == wanted)
                .is_some_and(|v| !claimed_by_another(v, c) && can_serve(v, c));
            if free_for_it {
                problems.push(format!(
                    "claim {} names volume {wanted} but is not Bound",
                    name(c)
                ));
            }
            continue;
        }
        let dynamic = claim_class(c) == CLASS;
        let free = volumes.iter().filter(|v| free_for(v, c)).count();
        if dynamic || free > 0 {
            problems.push(format!(
                "claim {} is {:?} while {}",
                name(c),
                claim_phase(c),
                if dynamic {
                    "its class provisions".to_string()
                } else {
                    format!("{free} volume(s) are free")
                }
            ));
        }
    }
    for v in &volumes {
        let reference = v.spec.as_ref().and_then(|s| s.claim_ref.as_ref());
        let Some(uid) = reference.and_then(|r| r.uid.as_deref()) else {
            continue;
        };
        let claim = claims
            .iter()
            .find(|c| c.metadata.uid.as_deref() == Some(uid));
        let policy = v
            .spec
            .as_ref()
            .and_then(|s| s.persistent_volume_reclaim_policy.as_deref())
            .unwrap_or("");
        let fine = match claim {
            Some(c) => {
                volume_phase(v) == "Bound"
                    && c.spec.as_ref().and_then(|s| s.volume_name.as_deref()) == Some(name(v))
            }
            // A released volume: kept (Retain) or reclaimed (the others).
            None => policy == "Retain" && volume_phase(v) == "Released",
        };
        if !fine {
            problems.push(format!(
                "volume {} ({policy}, {}) names claim {uid}, which {}",
                name(v),
                volume_phase(v),
                if claim.is_some() {
                    "does not name it back"
                } else {
                    "is gone"
                }
            ));
        }
    }
    problems
}
