//! Which pods and claims a pod event gives work to (upstream's
//! `enqueuePod`, `podNeedsClaims` and `podNeedsWork`). The event handlers
//! of the base call these to queue only what needs a sync.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::Pod;

use crate::resourceclaim::claims::ClaimStore;
use crate::resourceclaim::objects::{
    ClaimName, can_be_reserved, claim_name, extended_claim, is_allocated, is_for_pod, is_pod_done,
    is_reserved_for_pod, node_name, pod_claims,
};
use crate::runtime::informer::Store;
use crate::runtime::keys::ObjectKey;

/// The claims a pod that will not run (any more) should release, when it
/// was deleted or is done: every claim it names, its extended-resource
/// claim, and every claim it controls, recorded or not (a claim whose
/// create was answered too late to be recorded is the pod's too). None
/// while the pod may run.
pub(crate) fn claims_to_release(pod: &Pod, deleted: bool, claims: &ClaimStore) -> Vec<ObjectKey> {
    if !deleted && !is_pod_done(pod) {
        return Vec::new();
    }
    let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
    let named = pod_claims(pod)
        .iter()
        .filter_map(|pod_claim| claim_name(pod, pod_claim).name())
        .chain(extended_claim(pod))
        .map(|name| ObjectKey::new(namespace, name));
    let owned = claims
        .owned_by(pod)
        .into_iter()
        .map(|claim| ObjectKey::of(claim.as_ref()));
    named
        .chain(owned)
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect()
}

/// Whether a pod (not deleted) needs a sync: a template entry without its
/// claim in the cache, or, once scheduled, an allocated claim not reserved
/// for it, or a recorded claim that the pod does not own.
pub(crate) fn pod_needs_work(pod: &Pod, claims: &ClaimStore) -> bool {
    if pod.metadata.deletion_timestamp.is_some() || is_pod_done(pod) {
        return false;
    }
    let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
    let scheduled = !node_name(pod).is_empty();
    for pod_claim in pod_claims(pod) {
        let name = claim_name(pod, pod_claim);
        let claim_name = match name {
            ClaimName::Unsupported | ClaimName::NotRecorded => return true,
            ClaimName::NotNeeded => continue,
            ClaimName::Named(claim_name) | ClaimName::Generated(claim_name) => claim_name,
        };
        let Some(claim) = claims.get(&ObjectKey::new(namespace, claim_name)) else {
            if pod_claim.resource_claim_template_name.is_some() {
                return true;
            }
            // The user has to create it.
            continue;
        };
        if name.must_check_owner() && !is_for_pod(pod, &claim) {
            // The recorded claim is someone else's: the sync makes the pod
            // its own (upstream waits here, though its sync would do the
            // same when the pod comes by for another reason).
            return true;
        }
        if scheduled
            && is_allocated(&claim)
            && !is_reserved_for_pod(pod, &claim)
            && can_be_reserved(&claim)
        {
            return true;
        }
    }
    false
}

/// The claims a pod names (for the index of pods by claim).
pub(crate) fn named_claims(pod: &Pod) -> Vec<ObjectKey> {
    let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
    pod_claims(pod)
        .iter()
        .filter_map(|pod_claim| claim_name(pod, pod_claim).name())
        .map(|name| ObjectKey::new(namespace, name))
        .collect()
}

/// The templates a pod's entries name (for the index of pods by template).
pub(crate) fn named_templates(pod: &Pod) -> Vec<ObjectKey> {
    let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
    pod_claims(pod)
        .iter()
        .filter_map(|pod_claim| pod_claim.resource_claim_template_name.as_deref())
        .map(|template| ObjectKey::new(namespace, template))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect()
}

#[cfg(test)]
mod tests;
