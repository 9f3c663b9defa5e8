//! Why a claim is Pending, in the binder's own terms: what it asks for as
//! the binder reads it, every volume of its class with the first rule of
//! the search it fails (the one index that binds decides, so the answer
//! cannot drift from the binding), whether it waits for a provisioner, and
//! how its last sync ended. Served as `GET /explain/{namespace}/{claim}`,
//! printed by `pv-controller explain`, and summed up in the claim's
//! FailedBinding and ProvisioningFailed events.

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde::Serialize;

use super::{Binder, PvEffect, PvPlan};
use crate::pv::index::{Candidate, MatchError, Verdict, VolumeIndex};
use crate::pv::memory::{LastSync, MadeFrom};
use crate::pv::objects::{
    annotation, claim_access_modes, claim_class, claim_request, claim_vac, claim_volume_mode,
};
use crate::runtime::events::EventType;
use crate::runtime::keys::ObjectKey;
use k8s_names::{ANN_BETA_STORAGE_PROVISIONER, ANN_SELECTED_NODE, ANN_STORAGE_PROVISIONER};

/// The answer to "why is my claim Pending?".
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Explanation {
    /// `namespace/name`.
    pub claim: String,
    /// The claim's phase (`Pending`, `Bound`, `Lost`; empty before the
    /// first sync).
    pub phase: String,
    /// What the claim asks for.
    pub requirements: Requirements,
    /// The volume the binder would bind now, if any.
    pub chosen: Option<String>,
    /// Every volume of the claim's class (and any pre-bound to it, or the
    /// one it names), with the first rule it fails or `fits`, nearest
    /// first.
    pub volumes: Vec<Candidate>,
    /// The provisioner the claim waits for, when it waits for one.
    pub provisioner: Option<String>,
    /// How the claim's last sync ended, and when (none since the process
    /// started, or the claim was bound since).
    pub last_sync: Option<LastSync>,
    /// The claim cannot be matched at all (an unreadable request, access
    /// mode or selector): why.
    pub error: Option<String>,
}

/// A claim's requirements as the binder reads them.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Requirements {
    /// StorageClass (`""`: none).
    pub storage_class: String,
    /// The request (`None`: unreadable).
    pub request: Option<String>,
    /// Access modes.
    pub access_modes: Vec<String>,
    /// `Filesystem` or `Block`.
    pub volume_mode: String,
    /// The label selector, if any.
    pub selector: Option<LabelSelector>,
    /// The VolumeAttributesClass, if any.
    pub volume_attributes_class: Option<String>,
    /// The node the scheduler selected (delayed binding), if any.
    pub selected_node: Option<String>,
    /// The volume the claim names (`spec.volumeName`), if any.
    pub volume_name: Option<String>,
    /// Whether its class binds only once a pod is scheduled.
    pub wait_for_first_consumer: bool,
}

/// The longest event message written: the API server's limit for an
/// event's note (events.k8s.io), which core events are kept to as well.
pub(crate) const EVENT_MESSAGE_LIMIT: usize = 1024;

/// `message` cut to [`EVENT_MESSAGE_LIMIT`] bytes, ending in `…` when cut.
fn bounded(mut message: String) -> String {
    if message.len() <= EVENT_MESSAGE_LIMIT {
        return message;
    }
    let mut end = EVENT_MESSAGE_LIMIT - '…'.len_utf8();
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    message.truncate(end);
    message.push('…');
    message
}

impl Binder {
    /// Why the claim `key` is as it is; `None` for a claim the store does
    /// not hold.
    pub fn explain(&self, key: &ObjectKey) -> Option<Explanation> {
        let claim = self.store.claim(key)?;
        let delay_binding = self.is_delay_binding(&claim).unwrap_or(false);
        let judged = self.store.explain(&claim, delay_binding);
        Some(explanation(
            &claim,
            judged,
            delay_binding,
            self.provisioner_waited_for(&claim),
            self.memory.last_sync(key),
        ))
    }

    /// Plans `reason` with `base` followed by the nearest misses among
    /// the volumes of the claim's class (when it has any), at most
    /// [`EVENT_MESSAGE_LIMIT`] bytes, unless the claim was told that
    /// already; returns whether it did. When neither the claim nor the
    /// index changed since its last binding event, the misses are not
    /// even looked for: a claim that stays Pending costs one index lookup
    /// per resync, not a judgement of every volume.
    pub(super) fn tell_with_nearest_misses(
        &self,
        plan: &mut PvPlan,
        claim: &PersistentVolumeClaim,
        delay: bool,
        warning: bool,
        reason: &str,
        base: &str,
    ) -> bool {
        let key = ObjectKey::of(claim);
        let made_from = MadeFrom {
            reason: reason.to_string(),
            base: base.to_string(),
            changes: self.store.index_changes(),
            version: claim.metadata.resource_version.clone(),
        };
        if self.memory.made_from(&key, &made_from) {
            tracing::debug!(
                reason,
                "nothing changed since the binding event, not told again"
            );
            return false;
        }
        let misses = self.store.nearest_misses(claim, delay).ok().flatten();
        let message = match misses {
            Some(misses) => bounded(format!("{base}; {misses}")),
            None => base.to_string(),
        };
        let told = self.tell_once(plan, claim, warning, reason, message);
        plan.local(PvEffect::MadeFrom {
            claim: key,
            made_from,
        });
        told
    }

    /// Plans a binding event for a Pending claim only when its reason or
    /// message changed since the last one; returns whether it did.
    pub(super) fn tell_once(
        &self,
        plan: &mut PvPlan,
        claim: &PersistentVolumeClaim,
        warning: bool,
        reason: &str,
        message: String,
    ) -> bool {
        let key = ObjectKey::of(claim);
        if self.memory.was_told(&key, reason, &message) {
            tracing::debug!(reason, "binding event unchanged, not told again");
            return false;
        }
        let event_type = if warning {
            EventType::Warning
        } else {
            EventType::Normal
        };
        plan.event(claim, event_type, reason, message.clone());
        plan.local(PvEffect::Told {
            claim: key,
            reason: reason.to_string(),
            message,
        });
        true
    }

    /// The provisioner a claim waits for: the one it was handed to, else
    /// its class's when the class has one and the claim has no volume.
    fn provisioner_waited_for(&self, claim: &PersistentVolumeClaim) -> Option<String> {
        provisioner_waited_for(claim, self.storage_class(claim_class(claim)).as_deref())
    }
}

/// The provisioner a claim waits for: the one it was handed to, else the
/// provisioner of its class `class` when the claim names no volume.
fn provisioner_waited_for(
    claim: &PersistentVolumeClaim,
    class: Option<&StorageClass>,
) -> Option<String> {
    let handed = annotation(&claim.metadata, ANN_STORAGE_PROVISIONER)
        .or_else(|| annotation(&claim.metadata, ANN_BETA_STORAGE_PROVISIONER));
    if let Some(handed) = handed {
        return Some(handed.to_string());
    }
    let bound = claim
        .spec
        .as_ref()
        .and_then(|s| s.volume_name.as_deref())
        .is_some_and(|v| !v.is_empty());
    class
        .filter(|_| !bound)
        .map(|class| class.provisioner.clone())
}

/// The explanation of `claim` from every volume's verdict (`judged`).
fn explanation(
    claim: &PersistentVolumeClaim,
    judged: Result<Vec<Candidate>, MatchError>,
    delay_binding: bool,
    provisioner: Option<String>,
    last_sync: Option<LastSync>,
) -> Explanation {
    let class = claim_class(claim);
    let (mut volumes, error) = match judged {
        Ok(all) => (all, None),
        Err(error) => (Vec::new(), Some(error.to_string())),
    };
    let named = claim
        .spec
        .as_ref()
        .and_then(|s| s.volume_name.as_deref())
        .unwrap_or_default();
    volumes.retain(|c| c.class == class || c.verdict.fits() || c.pre_bound || c.name == named);
    volumes.sort_by(|a, b| {
        a.verdict
            .distance()
            .cmp(&b.verdict.distance())
            .then_with(|| a.name.cmp(&b.name))
    });
    let chosen = volumes
        .iter()
        .find(|c| c.verdict == Verdict::Chosen)
        .map(|c| c.name.clone());
    Explanation {
        claim: ObjectKey::of(claim).to_string(),
        phase: claim
            .status
            .as_ref()
            .and_then(|s| s.phase.clone())
            .unwrap_or_default(),
        requirements: requirements(claim, delay_binding),
        chosen,
        volumes,
        provisioner,
        last_sync,
        error,
    }
}

/// Explains `claim` from the cluster as listed once (`volumes`, its
/// StorageClass `class` if it has one), by the binder's own rules, for
/// `pv-controller explain --kubeconfig` when no controller is at hand to
/// ask. Without a running binder there is no last sync.
pub(crate) fn explain_listed(
    claim: &PersistentVolumeClaim,
    volumes: &[PersistentVolume],
    class: Option<&StorageClass>,
) -> Explanation {
    let mut index = VolumeIndex::default();
    for volume in volumes {
        if let Err(error) = index.insert(volume) {
            tracing::warn!(%error, "volume left out of the explanation");
        }
    }
    let delay_binding = class
        .and_then(|c| c.volume_binding_mode.as_deref())
        .is_some_and(|mode| mode == "WaitForFirstConsumer");
    let provisioner = provisioner_waited_for(claim, class);
    explanation(
        claim,
        index.explain(claim, delay_binding),
        delay_binding,
        provisioner,
        None,
    )
}

fn requirements(claim: &PersistentVolumeClaim, delay_binding: bool) -> Requirements {
    let spec = claim.spec.as_ref();
    Requirements {
        storage_class: claim_class(claim).to_string(),
        request: claim_request(claim).ok().map(crate::pv::index::human),
        access_modes: claim_access_modes(claim)
            .map(|modes| modes.iter().map(|m| m.as_str().to_string()).collect())
            .unwrap_or_default(),
        volume_mode: claim_volume_mode(claim).as_str().to_string(),
        selector: spec.and_then(|s| s.selector.clone()),
        volume_attributes_class: claim_vac(claim).map(str::to_string),
        selected_node: annotation(&claim.metadata, ANN_SELECTED_NODE).map(str::to_string),
        volume_name: spec
            .and_then(|s| s.volume_name.clone())
            .filter(|v| !v.is_empty()),
        wait_for_first_consumer: delay_binding,
    }
}

#[cfg(test)]
mod tests;
