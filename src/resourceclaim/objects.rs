//! Reading pods and claims the way the controller needs them: which claim
//! a pod's entry names, who owns a claim, whether a pod is done, and the
//! claim a template makes for a pod. Pure functions, no API access.

use crate::kinds::pod::is_pod_terminal;
use k8s_openapi::api::core::v1::{Pod, PodResourceClaim};
use k8s_openapi::api::resource::v1::{
    DeviceRequest, ResourceClaim, ResourceClaimSpec, ResourceClaimTemplate,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use super::constants::{MAX_GENERATE_NAME, RESERVED_FOR_MAX};
use k8s_names::{ANN_EXTENDED_RESOURCE_CLAIM, ANN_POD_CLAIM_NAME};

/// What one `pod.spec.resourceClaims[]` entry names (upstream's
/// `resourceclaim.Name`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ClaimName<'a> {
    /// `resourceClaimName`: a claim made by the user, used as it is.
    Named(&'a str),
    /// A claim generated from the template and recorded in the pod's
    /// status; it must be owned by the pod to count.
    Generated(&'a str),
    /// The status records that no claim is needed for this entry.
    NotNeeded,
    /// A template entry whose claim is not recorded in the status yet.
    NotRecorded,
    /// Neither a name nor a template: an API this controller does not know.
    Unsupported,
}

impl<'a> ClaimName<'a> {
    /// The claim's name, when the entry names one.
    pub(crate) fn name(self) -> Option<&'a str> {
        match self {
            Self::Named(name) | Self::Generated(name) => Some(name),
            Self::NotNeeded | Self::NotRecorded | Self::Unsupported => None,
        }
    }

    /// Whether the named claim must be owned by the pod to be its claim.
    pub(crate) fn must_check_owner(self) -> bool {
        matches!(self, Self::Generated(_))
    }
}

/// The `spec.resourceClaims` of a pod (empty when it has none).
pub(crate) fn pod_claims(pod: &Pod) -> &[PodResourceClaim] {
    pod.spec
        .as_ref()
        .and_then(|spec| spec.resource_claims.as_deref())
        .unwrap_or_default()
}

/// The claim the scheduler made for the pod's extended resources
/// (`status.extendedResourceClaimStatus`), if any.
pub(crate) fn extended_claim(pod: &Pod) -> Option<&str> {
    pod.status
        .as_ref()
        .and_then(|status| status.extended_resource_claim_status.as_ref())
        .map(|extended| extended.resource_claim_name.as_str())
}

/// Whether the pod uses ResourceClaims at all: entries in
/// `spec.resourceClaims`, or an extended-resource claim.
pub(crate) fn uses_claims(pod: &Pod) -> bool {
    !pod_claims(pod).is_empty() || extended_claim(pod).is_some()
}

/// What the entry `pod_claim` of `pod` names.
pub(crate) fn claim_name<'a>(pod: &'a Pod, pod_claim: &'a PodResourceClaim) -> ClaimName<'a> {
    if let Some(name) = pod_claim.resource_claim_name.as_deref() {
        return ClaimName::Named(name);
    }
    if pod_claim.resource_claim_template_name.is_none() {
        return ClaimName::Unsupported;
    }
    let recorded = pod
        .status
        .as_ref()
        .and_then(|status| status.resource_claim_statuses.as_deref())
        .unwrap_or_default()
        .iter()
        .find(|status| status.name == pod_claim.name);
    match recorded {
        Some(status) => match status.resource_claim_name.as_deref() {
            Some(name) => ClaimName::Generated(name),
            None => ClaimName::NotNeeded,
        },
        None => ClaimName::NotRecorded,
    }
}

/// The pod's UID ("" when it has none).
pub(crate) fn uid(meta: &ObjectMeta) -> &str {
    meta.uid.as_deref().unwrap_or_default()
}

/// Whether `reference` is a controller reference to a core/v1 Pod.
fn is_pod_controller(reference: &OwnerReference) -> bool {
    reference.controller == Some(true) && reference.api_version == "v1" && reference.kind == "Pod"
}

/// The pod (name and UID) that controls the claim, if a pod does.
pub(crate) fn owning_pod(claim: &ResourceClaim) -> Option<(&str, &str)> {
    claim
        .metadata
        .owner_references
        .iter()
        .flatten()
        .find(|reference| is_pod_controller(reference))
        .map(|reference| (reference.name.as_str(), reference.uid.as_str()))
}

/// Whether the claim was made for this pod: same namespace and the pod is
/// its controller (upstream's `resourceclaim.IsForPod`).
pub(crate) fn is_for_pod(pod: &Pod, claim: &ResourceClaim) -> bool {
    claim.metadata.namespace == pod.metadata.namespace
        && claim
            .metadata
            .owner_references
            .iter()
            .flatten()
            .any(|reference| {
                reference.controller == Some(true) && reference.uid == uid(&pod.metadata)
            })
}

/// The node the pod is scheduled to ("" when it is not).
pub(crate) fn node_name(pod: &Pod) -> &str {
    pod.spec
        .as_ref()
        .and_then(|spec| spec.node_name.as_deref())
        .unwrap_or_default()
}

/// Whether it is certain that none of the pod's containers runs or will
/// run: it ended, or it is being deleted before it was scheduled.
pub(crate) fn is_pod_done(pod: &Pod) -> bool {
    is_pod_terminal(pod) || (pod.metadata.deletion_timestamp.is_some() && node_name(pod).is_empty())
}

/// Whether the claim has an allocation.
pub(crate) fn is_allocated(claim: &ResourceClaim) -> bool {
    claim
        .status
        .as_ref()
        .is_some_and(|status| status.allocation.is_some())
}

/// The number of consumers in `status.reservedFor`.
pub(crate) fn reserved_count(claim: &ResourceClaim) -> usize {
    claim
        .status
        .as_ref()
        .and_then(|status| status.reserved_for.as_ref())
        .map_or(0, Vec::len)
}

/// Whether the claim is reserved for this very pod (by UID).
pub(crate) fn is_reserved_for_pod(pod: &Pod, claim: &ResourceClaim) -> bool {
    claim
        .status
        .as_ref()
        .and_then(|status| status.reserved_for.as_ref())
        .is_some_and(|consumers| consumers.iter().any(|c| c.uid == uid(&pod.metadata)))
}

/// Whether one more consumer fits into `status.reservedFor`.
pub(crate) fn can_be_reserved(claim: &ResourceClaim) -> bool {
    reserved_count(claim) < RESERVED_FOR_MAX
}

fn requests(spec: &ResourceClaimSpec) -> &[DeviceRequest] {
    spec.devices
        .as_ref()
        .and_then(|devices| devices.requests.as_deref())
        .unwrap_or_default()
}

/// Whether a request of the claim asks for admin access to its devices
/// (`exactly.adminAccess`; alternatives in `firstAvailable` are not
/// looked at, as upstream's `admin_access` metric label).
pub(crate) fn requests_admin_access(spec: &ResourceClaimSpec) -> bool {
    requests(spec).iter().any(|request| {
        request
            .exactly
            .as_ref()
            .and_then(|exactly| exactly.admin_access)
            .unwrap_or(false)
    })
}

/// Whether a request of the claim lists alternatives (`firstAvailable`),
/// which only clusters with the DRAPrioritizedList feature accept.
pub(crate) fn requests_prioritized_list(spec: &ResourceClaimSpec) -> bool {
    requests(spec).iter().any(|request| {
        request
            .first_available
            .as_ref()
            .is_some_and(|list| !list.is_empty())
    })
}

/// Who made a claim, as upstream's `source` metric label tells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum ClaimSource {
    /// A user (`""`).
    User,
    /// This controller, from a pod's template (`resource_claim_template`).
    Template,
    /// The scheduler, for a pod's extended resources (`extended_resource`).
    ExtendedResource,
}

impl ClaimSource {
    /// The label value.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Self::User => "",
            Self::Template => "resource_claim_template",
            Self::ExtendedResource => "extended_resource",
        }
    }
}

/// Who made the claim, by its annotations.
pub(crate) fn claim_source(claim: &ResourceClaim) -> ClaimSource {
    let annotation = |key: &str| {
        claim
            .metadata
            .annotations
            .as_ref()
            .and_then(|annotations| annotations.get(key))
            .map(String::as_str)
    };
    if annotation(ANN_EXTENDED_RESOURCE_CLAIM) == Some("true") {
        ClaimSource::ExtendedResource
    } else if annotation(ANN_POD_CLAIM_NAME).is_some_and(|entry| !entry.is_empty()) {
        ClaimSource::Template
    } else {
        ClaimSource::User
    }
}

/// The `generateName` of a claim generated for `pod_claim` of `pod`:
/// `<pod>-<claim>-`. When that is longer than [`MAX_GENERATE_NAME`], both
/// names are cut in proportion to their lengths (each keeping at least its
/// first character), and the hyphens stay, so the claim's name is always
/// told apart from the random suffix.
pub(crate) fn generate_name(pod: &str, pod_claim: &str) -> String {
    let full = pod.len() + pod_claim.len() + 2;
    if full <= MAX_GENERATE_NAME {
        return format!("{pod}-{pod_claim}-");
    }
    let budget = MAX_GENERATE_NAME - 2;
    // Each keeps at least its first character: a name may not start with
    // the hyphen (upstream's plain proportion gives a short pod name none,
    // and the claim's name is then refused).
    let pod_len = (pod.len() * budget / (pod.len() + pod_claim.len())).clamp(1, pod.len().max(1));
    let claim_len = budget - pod_len;
    let cut = |s: &str, n: usize| -> String {
        let taken: String = s.chars().take(n).collect();
        taken.trim_end_matches('.').to_string()
    };
    format!("{}-{}-", cut(pod, pod_len), cut(pod_claim, claim_len))
}

/// The claim `template` makes for entry `pod_claim` of `pod`: the
/// template's labels, annotations and spec, the pod as controlling owner
/// (without `blockOwnerDeletion`, as upstream since 1.35: setting it would
/// take permission to update the pod's finalizers), the annotation naming
/// the entry, and a generated name.
pub(crate) fn claim_from_template(
    pod: &Pod,
    pod_claim: &PodResourceClaim,
    template: &ResourceClaimTemplate,
) -> ResourceClaim {
    let template_meta = template.spec.metadata.clone().unwrap_or_default();
    let mut annotations = template_meta.annotations.unwrap_or_default();
    annotations.insert(ANN_POD_CLAIM_NAME.to_string(), pod_claim.name.clone());
    let pod_name = pod.metadata.name.clone().unwrap_or_default();
    ResourceClaim {
        metadata: ObjectMeta {
            generate_name: Some(generate_name(&pod_name, &pod_claim.name)),
            namespace: pod.metadata.namespace.clone(),
            owner_references: Some(vec![OwnerReference {
                api_version: "v1".to_string(),
                kind: "Pod".to_string(),
                name: pod_name,
                uid: uid(&pod.metadata).to_string(),
                controller: Some(true),
                block_owner_deletion: None,
            }]),
            annotations: Some(annotations),
            labels: template_meta.labels,
            ..ObjectMeta::default()
        },
        spec: template.spec.spec.clone(),
        status: None,
    }
}

#[cfg(test)]
mod tests;
