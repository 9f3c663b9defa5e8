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

use crate::resourceclaim::objects::{can_be_reserved, is_allocated};
use crate::runtime::keys::ObjectKey;
use crate::runtime::plan::{Answer, Applied, Change};
use crate::runtime::write::Edit;
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

/// A change of a ResourceClaim.
pub(crate) enum ClaimChange {
    /// A scheduled pod's reservation added to `status.reservedFor`.
    /// Refused when the claim is no longer allocated or has no room left.
    Reserve(ResourceClaimConsumerReference),
    /// `status.reservedFor` cut down to the consumers that may still use
    /// the claim; with `deallocate`, the allocation cleared in the same
    /// write. Refused when the reservations are no longer those decided
    /// on.
    Release {
        /// The consumers that stay.
        keep: Vec<ResourceClaimConsumerReference>,
        /// Whether the allocation is cleared too (none stay, and the
        /// scheduler allocated the claim).
        deallocate: bool,
        /// The reservations the decision saw.
        seen: Vec<ResourceClaimConsumerReference>,
    },
    /// The allocation of a claim being deleted that nothing uses, cleared.
    /// Refused when the claim was reserved since.
    Deallocate,
    /// The scheduler's finalizer removed, once the claim has no
    /// allocation. Refused when it is allocated (again).
    RemoveFinalizer,
}

impl Change<ResourceClaim> for ClaimChange {
    fn apply(&self, newest: &mut ResourceClaim) -> Edit {
        match self {
            Self::Reserve(consumer) => reserve(newest, consumer),
            Self::Release {
                keep,
                deallocate,
                seen,
            } => {
                if reserved_for(newest) != seen.as_slice() {
                    return Edit::Refused("its reservations changed since the sync read it".into());
                }
                let status = newest.status.get_or_insert_with(Default::default);
                status.reserved_for = (!keep.is_empty()).then(|| keep.clone());
                if *deallocate {
                    status.allocation = None;
                }
                Edit::Changed
            }
            Self::Deallocate => {
                if !reserved_for(newest).is_empty() {
                    return Edit::Refused("it was reserved since the sync read it".into());
                }
                match newest.status.as_mut() {
                    Some(status) if status.allocation.is_some() => {
                        status.allocation = None;
                        Edit::Changed
                    }
                    _ => Edit::Unchanged,
                }
            }
            Self::RemoveFinalizer => {
                if is_allocated(newest) {
                    return Edit::Refused("it is allocated, its finalizer stays".into());
                }
                if !has_finalizer(newest) {
                    return Edit::Unchanged;
                }
                if let Some(finalizers) = newest.metadata.finalizers.as_mut() {
                    finalizers.retain(|f| f != FINALIZER_RESOURCE_DELETE_PROTECTION);
                }
                Edit::Changed
            }
        }
    }
}

/// Adds `consumer` to the claim's reservations, unless it is there.
fn reserve(claim: &mut ResourceClaim, consumer: &ResourceClaimConsumerReference) -> Edit {
    if reserved_for(claim).iter().any(|c| c.uid == consumer.uid) {
        return Edit::Unchanged;
    }
    if !is_allocated(claim) {
        return Edit::Refused("it is no longer allocated".into());
    }
    if !can_be_reserved(claim) {
        return Edit::Refused("its reservations are full".into());
    }
    claim
        .status
        .get_or_insert_with(Default::default)
        .reserved_for
        .get_or_insert_with(Vec::new)
        .push(consumer.clone());
    Edit::Changed
}

/// `resource/name` of a consumer, as a plan's line shows it.
fn consumer_name(consumer: &ResourceClaimConsumerReference) -> String {
    format!("{}/{}", consumer.resource, consumer.name)
}

impl fmt::Display for ClaimChange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Reserve(consumer) => write!(f, "reservedFor + {}", consumer_name(consumer)),
            Self::Release {
                keep, deallocate, ..
            } => {
                let keep: Vec<String> = keep.iter().map(consumer_name).collect();
                write!(f, "reservedFor [{}]", keep.join(", "))?;
                if *deallocate {
                    f.write_str(", allocation cleared")?;
                }
                Ok(())
            }
            Self::Deallocate => f.write_str("allocation cleared"),
            Self::RemoveFinalizer => write!(
                f,
                "finalizer {FINALIZER_RESOURCE_DELETE_PROTECTION} removed"
            ),
        }
    }
}

/// The claim of an entry newly recorded in a pod's status.
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
