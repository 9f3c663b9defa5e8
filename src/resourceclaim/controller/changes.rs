//! The changes the controller's plans make, as data: the named fields of a
//! ResourceClaim each change sets (re-checking, on the newest copy when its
//! step runs, what the decision assumed), and the pod status the controller
//! applies (which may name claims created earlier in the same plan).

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceClaimConsumerReference};
use serde_json::json;

use super::ClaimPlan;
use crate::runtime::keys::ObjectKey;
use crate::runtime::kinds::Part;
use crate::runtime::plan::{Answer, Applied};
use k8s_names::FINALIZER_RESOURCE_DELETE_PROTECTION;

/// Whether the claim carries the scheduler's finalizer.
pub(crate) fn has_finalizer(claim: &ResourceClaim) -> bool {
    claim
        .metadata
        .finalizers
        .iter()
        .flatten()
        .any(|f| f == FINALIZER_RESOURCE_DELETE_PROTECTION)
}

/// The consumers in a claim's `status.reservedFor`.
fn reserved_for(claim: &ResourceClaim) -> &[ResourceClaimConsumerReference] {
    claim
        .status
        .as_ref()
        .and_then(|status| status.reserved_for.as_deref())
        .unwrap_or_default()
}

/// Plans the reservation of `claim` for `consumer` (a scheduled pod).
pub(crate) fn reserve(
    plan: &mut ClaimPlan,
    claim: &Arc<ResourceClaim>,
    consumer: ResourceClaimConsumerReference,
) {
    let label = format!("reservedFor + {}", consumer_name(&consumer));
    plan.update(claim, Part::Status, label, |claim| {
        if reserved_for(claim).iter().any(|c| c.uid == consumer.uid) {
            return false;
        }
        claim
            .status
            .get_or_insert_with(Default::default)
            .reserved_for
            .get_or_insert_with(Vec::new)
            .push(consumer);
        true
    });
}

/// Plans `claim`'s reservations cut down to `keep`, and its allocation
/// cleared too when `deallocate`; returns the claim as the plan leaves it.
pub(crate) fn release(
    plan: &mut ClaimPlan,
    claim: &Arc<ResourceClaim>,
    keep: Vec<ResourceClaimConsumerReference>,
    deallocate: bool,
) -> Arc<ResourceClaim> {
    let kept: Vec<String> = keep.iter().map(consumer_name).collect();
    let mut label = format!("reservedFor [{}]", kept.join(", "));
    if deallocate {
        label.push_str(", allocation cleared");
    }
    plan.update(claim, Part::Status, label, |claim| {
        let status = claim.status.get_or_insert_with(Default::default);
        status.reserved_for = (!keep.is_empty()).then_some(keep);
        if deallocate {
            status.allocation = None;
        }
        true
    })
}

/// Plans `claim`'s allocation cleared; returns the claim as the plan
/// leaves it.
pub(crate) fn deallocate(plan: &mut ClaimPlan, claim: &Arc<ResourceClaim>) -> Arc<ResourceClaim> {
    plan.update(claim, Part::Status, "allocation cleared", |claim| {
        claim
            .status
            .as_mut()
            .and_then(|status| status.allocation.take())
            .is_some()
    })
}

/// Plans the scheduler's finalizer removed from `claim`.
pub(crate) fn remove_finalizer(plan: &mut ClaimPlan, claim: &Arc<ResourceClaim>) {
    let label = format!("finalizer {FINALIZER_RESOURCE_DELETE_PROTECTION} removed");
    plan.update(claim, Part::Spec, label, |claim| {
        if !has_finalizer(claim) {
            return false;
        }
        if let Some(finalizers) = claim.metadata.finalizers.as_mut() {
            finalizers.retain(|f| f != FINALIZER_RESOURCE_DELETE_PROTECTION);
        }
        true
    });
}

fn consumer_name(consumer: &ResourceClaimConsumerReference) -> String {
    format!("{}/{}", consumer.resource, consumer.name)
}

#[derive(Clone, Debug)]
pub(crate) enum NewClaim {
    /// A claim the pod controls, found by the entry's annotation.
    Found(String),
    /// A claim the plan creates, whose name the server generates.
    Created {
        /// The `generateName` it is created with.
        prefix: String,
        /// The create's answer.
        answer: Answer<Arc<ResourceClaim>>,
    },
}

impl NewClaim {
    /// The claim's name; `None` for a create that has not gone through.
    fn name(&self) -> Option<String> {
        match self {
            Self::Found(name) => Some(name.clone()),
            Self::Created { answer, .. } => answer
                .answered()
                .and_then(|created| created.metadata.name.clone()),
        }
    }
}

impl fmt::Display for NewClaim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Found(name) => f.write_str(name),
            Self::Created { prefix, answer } => {
                match answer.answered().and_then(|c| c.metadata.name.as_deref()) {
                    Some(name) => f.write_str(name),
                    None => write!(f, "{prefix}*"),
                }
            }
        }
    }
}

/// The claims of a pod's entries, as the controller records them in
/// `pod.status.resourceClaimStatuses` by server-side apply as
/// `ResourceClaimController` (upstream's field manager): the entries
/// already there that name a claim, and the new ones, by entry name.
/// Applying all of them, not just the new ones, keeps an entry this
/// manager applied earlier from being dropped by the next apply.
pub(crate) struct RecordClaims {
    pod: ObjectKey,
    recorded: BTreeMap<String, String>,
    new: BTreeMap<String, NewClaim>,
}

impl RecordClaims {
    /// The statuses of `pod` with the `new` entries (entry name → claim).
    pub(crate) fn new(pod: &Pod, new: BTreeMap<String, NewClaim>) -> Self {
        let recorded = pod
            .status
            .as_ref()
            .and_then(|status| status.resource_claim_statuses.as_deref())
            .unwrap_or_default()
            .iter()
            .filter_map(|status| Some((status.name.clone(), status.resource_claim_name.clone()?)))
            .collect();
        Self {
            pod: ObjectKey::of(pod),
            recorded,
            new,
        }
    }
}

impl Applied for RecordClaims {
    fn partial(&self) -> serde_json::Value {
        let mut entries = self.recorded.clone();
        for (entry, claim) in &self.new {
            match claim.name() {
                Some(name) => {
                    entries.insert(entry.clone(), name);
                }
                // Cannot be: a create's step comes before the apply, and a
                // plan ends at its first failed write.
                None => {
                    tracing::warn!(pod = %self.pod, %entry, "the claim of an entry has no name yet, not recorded");
                }
            }
        }
        let statuses: Vec<serde_json::Value> = entries
            .into_iter()
            .map(|(entry, claim)| json!({ "name": entry, "resourceClaimName": claim }))
            .collect();
        json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": { "name": self.pod.name, "namespace": self.pod.namespace },
            "status": { "resourceClaimStatuses": statuses },
        })
    }
}

impl fmt::Display for RecordClaims {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("resourceClaimStatuses")?;
        let mut entries: BTreeMap<&str, String> = self
            .recorded
            .iter()
            .map(|(entry, claim)| (entry.as_str(), claim.clone()))
            .collect();
        for (entry, claim) in &self.new {
            entries.insert(entry, claim.to_string());
        }
        for (entry, claim) in entries {
            write!(f, " {entry}={claim}")?;
        }
        Ok(())
    }
}
