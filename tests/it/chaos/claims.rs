//! The ResourceClaim side of a chaos run: pods with claims from a
//! template, a scheduler that allocates those claims (with its finalizer)
//! and reserves them before it places the pod, a garbage collector for the
//! claims of pods that are gone, and the state the ResourceClaim
//! controller must settle to.
//!
//! The scheduler and the garbage collector write to the store directly:
//! the request faults are the controllers', not theirs.

use k8s_names::FINALIZER_RESOURCE_DELETE_PROTECTION;
use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceClaimTemplate};
use memapi::MemApi;
use serde_json::json;

use super::world::Rng;

/// The template every pod's entries name.
const TEMPLATE: &str = "chaos-template";
/// The scheduler's finalizer on the claims it allocates.
/// The node pods are placed on.
const NODE: &str = "node-1";
const NAMESPACE: &str = "default";

/// The template of the chaos world's pods.
pub(crate) fn template() -> ResourceClaimTemplate {
    serde_json::from_value(json!({
        "metadata": { "name": TEMPLATE, "namespace": NAMESPACE },
        "spec": { "spec": {} },
    }))
    .expect("template")
}

/// A pod with one or two entries from the template.
pub(crate) fn pod(name: &str, entries: usize) -> Pod {
    let claims: Vec<_> = ["gpu", "nic"]
        .iter()
        .take(entries)
        .map(|entry| json!({ "name": entry, "resourceClaimTemplateName": TEMPLATE }))
        .collect();
    serde_json::from_value(json!({
        "metadata": { "name": name, "namespace": NAMESPACE },
        "spec": {
            "containers": [ { "name": "c", "image": "busybox" } ],
            "resourceClaims": claims,
        },
        "status": { "phase": "Pending" },
    }))
    .expect("pod")
}

/// Whether the pod has entries in `spec.resourceClaims`.
pub(crate) fn has_claims(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.resource_claims.as_ref())
        .is_some_and(|c| !c.is_empty())
}

fn node(pod: &Pod) -> Option<&str> {
    pod.spec.as_ref().and_then(|s| s.node_name.as_deref())
}

fn uid<K: kube::Resource>(object: &K) -> &str {
    object.meta().uid.as_deref().unwrap_or("")
}

fn name<K: kube::Resource>(object: &K) -> &str {
    object.meta().name.as_deref().unwrap_or("")
}

/// Whether none of the pod's containers runs or will run (the
/// controller's own rule).
fn is_done(pod: &Pod) -> bool {
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    matches!(phase, Some("Succeeded" | "Failed"))
        || (pod.metadata.deletion_timestamp.is_some() && node(pod).is_none())
}

/// The claim each entry is recorded with in the pod's status.
fn recorded(pod: &Pod) -> BTreeMap<String, Option<String>> {
    pod.status
        .as_ref()
        .and_then(|s| s.resource_claim_statuses.as_ref())
        .into_iter()
        .flatten()
        .map(|s| (s.name.clone(), s.resource_claim_name.clone()))
        .collect()
}

fn entries(pod: &Pod) -> Vec<String> {
    pod.spec
        .as_ref()
        .and_then(|s| s.resource_claims.as_ref())
        .into_iter()
        .flatten()
        .map(|c| c.name.clone())
        .collect()
}

/// The UID of the pod that controls the claim, if a pod does.
fn owner(claim: &ResourceClaim) -> Option<&str> {
    claim
        .metadata
        .owner_references
        .iter()
        .flatten()
        .find(|r| r.kind == "Pod" && r.controller == Some(true))
        .map(|r| r.uid.as_str())
}

fn is_allocated(claim: &ResourceClaim) -> bool {
    claim
        .status
        .as_ref()
        .is_some_and(|s| s.allocation.is_some())
}

fn has_finalizer(claim: &ResourceClaim) -> bool {
    claim
        .metadata
        .finalizers
        .iter()
        .flatten()
        .any(|f| f == FINALIZER_RESOURCE_DELETE_PROTECTION)
}

fn consumers(claim: &ResourceClaim) -> Vec<(String, String)> {
    claim
        .status
        .as_ref()
        .and_then(|s| s.reserved_for.as_ref())
        .into_iter()
        .flatten()
        .map(|c| (c.name.clone(), c.uid.clone()))
        .collect()
}

/// The claims of a pod's entries, when every entry has its claim recorded,
/// existing, controlled by the pod and not being deleted.
fn claims_ready<'a>(pod: &Pod, claims: &'a [ResourceClaim]) -> Option<Vec<&'a ResourceClaim>> {
    let recorded = recorded(pod);
    entries(pod)
        .iter()
        .map(|entry| {
            let wanted = recorded.get(entry)?.as_deref()?;
            claims.iter().find(|c| {
                name(*c) == wanted
                    && owner(c) == Some(uid(pod))
                    && c.metadata.deletion_timestamp.is_none()
            })
        })
        .collect()
}

/// The scheduler: places a pending pod whose claims are all there, after
/// allocating each claim (with its finalizer) and reserving it for the
/// pod. Returns how many pods it placed.
pub(crate) fn schedule(api: &MemApi, rng: &mut Rng) -> u64 {
    let claims = api.list::<ResourceClaim>();
    let mut placed = 0;
    for mut pod in api.list::<Pod>() {
        if !has_claims(&pod)
            || node(&pod).is_some()
            || pod.metadata.deletion_timestamp.is_some()
            || is_done(&pod)
            || !rng.chance(0.5)
        {
            continue;
        }
        let Some(ready) = claims_ready(&pod, &claims) else {
            continue;
        };
        for claim in ready {
            let mut allocated = claim.clone();
            let finalizers = allocated.metadata.finalizers.get_or_insert_with(Vec::new);
            if !finalizers
                .iter()
                .any(|f| f == FINALIZER_RESOURCE_DELETE_PROTECTION)
            {
                finalizers.push(FINALIZER_RESOURCE_DELETE_PROTECTION.to_string());
            }
            let status = allocated.status.get_or_insert_with(Default::default);
            status.allocation = Some(Default::default());
            status.reserved_for = Some(vec![
                serde_json::from_value(
                    json!({ "resource": "pods", "name": name(&pod), "uid": uid(&pod) }),
                )
                .expect("consumer"),
            ]);
            api.put(&allocated).expect("allocate claim");
        }
        if let Some(spec) = pod.spec.as_mut() {
            spec.node_name = Some(NODE.to_string());
        }
        api.put(&pod).expect("place pod");
        placed += 1;
    }
    placed
}

/// The garbage collector: deletes the claims whose controlling pod is
/// gone (a finalizer holds such a claim Terminating). Returns how many
/// deletions it started.
pub(crate) fn collect_garbage(api: &MemApi) -> u64 {
    let pods = api.list::<Pod>();
    let mut deleted = 0;
    for claim in api.list::<ResourceClaim>() {
        let Some(owner) = owner(&claim) else {
            continue;
        };
        if claim.metadata.deletion_timestamp.is_some() || pods.iter().any(|p| uid(p) == owner) {
            continue;
        }
        if api
            .delete::<ResourceClaim>(Some(NAMESPACE), name(&claim))
            .is_ok()
        {
            deleted += 1;
        }
    }
    deleted
}

/// What keeps the ResourceClaims and their pods from being settled: a
/// claim left Terminating, an allocation or reservation nothing uses, a
/// generated claim of a pod that is done or gone, a running pod without
/// its claims.
pub(crate) fn unsettled(api: &MemApi) -> Vec<String> {
    let pods = api.list::<Pod>();
    let claims = api.list::<ResourceClaim>();
    let pod_of = |uid_wanted: &str| pods.iter().find(|p| uid(*p) == uid_wanted);
    let mut problems = Vec::new();
    for claim in &claims {
        let claim_name = name(claim);
        if claim.metadata.deletion_timestamp.is_some() {
            problems.push(format!("claim {claim_name} is left Terminating"));
        }
        for (pod_name, pod_uid) in consumers(claim) {
            if pod_of(&pod_uid).is_none_or(is_done) {
                problems.push(format!(
                    "claim {claim_name} is reserved for pod {pod_name}, which is done or gone"
                ));
            }
        }
        if is_allocated(claim) && consumers(claim).is_empty() {
            problems.push(format!("claim {claim_name} is allocated for no one"));
        }
        if has_finalizer(claim) && !is_allocated(claim) {
            problems.push(format!(
                "claim {claim_name} keeps the finalizer without an allocation"
            ));
        }
        if let Some(owner) = owner(claim)
            && pod_of(owner).is_none_or(is_done)
        {
            let pod = pod_of(owner).map(|p| {
                let recorded = recorded(p).values().flatten().any(|n| n == claim_name);
                format!(
                    "pod {} is {:?}{}, {}",
                    name(p),
                    p.status.as_ref().and_then(|s| s.phase.as_deref()),
                    if p.metadata.deletion_timestamp.is_some() {
                        " and being deleted"
                    } else {
                        ""
                    },
                    if recorded {
                        "recorded the claim"
                    } else {
                        "did not record the claim"
                    },
                )
            });
            problems.push(format!(
                "generated claim {claim_name} outlives its pod ({})",
                pod.as_deref().unwrap_or("gone")
            ));
        }
    }
    for pod in &pods {
        if !has_claims(pod) || is_done(pod) || pod.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let recorded = recorded(pod);
        for entry in entries(pod) {
            let claim = recorded.get(&entry).cloned().flatten();
            let fine = claim.as_deref().is_some_and(|wanted| {
                claims
                    .iter()
                    .any(|c| name(c) == wanted && owner(c) == Some(uid(pod)))
            });
            if !fine {
                problems.push(format!(
                    "pod {} has no claim of its own for entry {entry} (recorded: {claim:?})",
                    name(pod)
                ));
            }
        }
    }
    problems
}
