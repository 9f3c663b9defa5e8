//! What the comparison reads of an object: the few fields a decision is made
//! of and judged on (identity, deletion, finalizers, annotations, the
//! owning pod, a claim's volume and class, a volume's claimRef, phases, a
//! ResourceClaim's reservations and allocation, a pod's recorded claims),
//! borrowed from the typed object. Shadow mode reads every object it
//! writes or waits for, so converting whole objects would cost it more
//! than the work itself.

use std::any::Any;
use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{
    ObjectReference, PersistentVolume, PersistentVolumeClaim, Pod, PodResourceClaimStatus,
};
use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceClaimConsumerReference};
use kube::Resource;

use crate::runtime::keys::ObjectKey;

/// The fields of an object decisions read.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct View<'a> {
    /// Its namespace (empty: cluster-scoped).
    pub(crate) namespace: &'a str,
    /// Its name (empty for a name still to be generated).
    pub(crate) name: &'a str,
    /// Its UID, once it has one.
    pub(crate) uid: Option<&'a str>,
    /// Whether it is marked for deletion.
    pub(crate) deleting: bool,
    finalizers: &'a [String],
    annotations: Option<&'a BTreeMap<String, String>>,
    /// The UID of the pod that controls it.
    pub(crate) owner_pod: Option<&'a str>,
    volume_name: Option<&'a str>,
    class: Option<&'a str>,
    claim_ref: Option<&'a ObjectReference>,
    phase: Option<&'a str>,
    reserved_for: &'a [ResourceClaimConsumerReference],
    recorded: &'a [PodResourceClaimStatus],
    allocated: bool,
}

/// A field a decision may set, read from a view.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Field {
    /// `status.phase`.
    Phase,
    /// `spec.storageClassName` of a claim.
    StorageClass,
    /// `spec.claimRef.uid` of a volume.
    ClaimRefUid,
    /// Whether a ResourceClaim has `status.allocation`.
    Allocation,
}

impl Field {
    /// The field's path, for people.
    pub(crate) fn path(self) -> &'static str {
        match self {
            Self::Phase => "status.phase",
            Self::StorageClass => "spec.storageClassName",
            Self::ClaimRefUid => "spec.claimRef.uid",
            Self::Allocation => "status.allocation",
        }
    }
}

fn non_empty(value: Option<&String>) -> Option<&str> {
    value.map(String::as_str).filter(|v| !v.is_empty())
}

impl<'a> View<'a> {
    /// The view of `object`; identity and metadata only for a kind no
    /// decision reads more of.
    pub(crate) fn of<K: Resource + Any>(object: &'a K) -> Self {
        let meta = object.meta();
        let mut view = Self {
            namespace: meta.namespace.as_deref().unwrap_or_default(),
            name: meta.name.as_deref().unwrap_or_default(),
            uid: non_empty(meta.uid.as_ref()),
            deleting: meta.deletion_timestamp.is_some(),
            finalizers: meta.finalizers.as_deref().unwrap_or_default(),
            annotations: meta.annotations.as_ref(),
            owner_pod: meta
                .owner_references
                .iter()
                .flatten()
                .find(|r| r.controller == Some(true) && r.kind == "Pod")
                .map(|r| r.uid.as_str()),
            ..Self::default()
        };
        let any: &dyn Any = object;
        if let Some(claim) = any.downcast_ref::<PersistentVolumeClaim>() {
            let spec = claim.spec.as_ref();
            view.volume_name = non_empty(spec.and_then(|s| s.volume_name.as_ref()));
            view.class = non_empty(spec.and_then(|s| s.storage_class_name.as_ref()));
            view.phase = non_empty(claim.status.as_ref().and_then(|s| s.phase.as_ref()));
        } else if let Some(volume) = any.downcast_ref::<PersistentVolume>() {
            view.claim_ref = volume.spec.as_ref().and_then(|s| s.claim_ref.as_ref());
            view.phase = non_empty(volume.status.as_ref().and_then(|s| s.phase.as_ref()));
        } else if let Some(pod) = any.downcast_ref::<Pod>() {
            view.recorded = pod
                .status
                .as_ref()
                .and_then(|s| s.resource_claim_statuses.as_deref())
                .unwrap_or_default();
        } else if let Some(claim) = any.downcast_ref::<ResourceClaim>() {
            let status = claim.status.as_ref();
            view.reserved_for = status
                .and_then(|s| s.reserved_for.as_deref())
                .unwrap_or_default();
            view.allocated = status.is_some_and(|s| s.allocation.is_some());
        }
        view
    }

    /// The view of an object of a kind decisions are judged on (claims,
    /// volumes, pods, ResourceClaims); `None` for any other kind.
    pub(crate) fn of_any(object: &'a (dyn Any + Send + Sync)) -> Option<Self> {
        if let Some(claim) = object.downcast_ref::<PersistentVolumeClaim>() {
            Some(Self::of(claim))
        } else if let Some(volume) = object.downcast_ref::<PersistentVolume>() {
            Some(Self::of(volume))
        } else if let Some(pod) = object.downcast_ref::<Pod>() {
            Some(Self::of(pod))
        } else {
            object.downcast_ref::<ResourceClaim>().map(Self::of)
        }
    }

    /// An object known only by its key (and UID): gone from the store.
    pub(crate) fn named(key: &'a ObjectKey, uid: Option<&'a str>) -> Self {
        Self {
            namespace: &key.namespace,
            name: &key.name,
            uid,
            ..Self::default()
        }
    }

    /// The annotation `key`.
    pub(crate) fn annotation(&self, key: &str) -> Option<&'a str> {
        self.annotations?.get(key).map(String::as_str)
    }

    /// The finalizers.
    pub(crate) fn finalizers(&self) -> BTreeSet<String> {
        self.finalizers.iter().cloned().collect()
    }

    /// Whether the finalizer `name` is there.
    pub(crate) fn has_finalizer(&self, name: &str) -> bool {
        self.finalizers.iter().any(|f| f == name)
    }

    /// The value of `field`.
    pub(crate) fn field(&self, field: Field) -> Option<&'a str> {
        match field {
            Field::Phase => self.phase,
            Field::StorageClass => self.class,
            Field::ClaimRefUid => self.claim_ref.and_then(|r| non_empty(r.uid.as_ref())),
            Field::Allocation => self.allocated.then_some("allocated"),
        }
    }

    /// A claim's volume.
    pub(crate) fn volume_name(&self) -> Option<&'a str> {
        self.volume_name
    }

    /// The claim a volume's claimRef names: namespace and name.
    pub(crate) fn claim_ref(&self) -> Option<(&'a str, &'a str)> {
        let r = self.claim_ref?;
        Some((
            r.namespace.as_deref().unwrap_or_default(),
            r.name.as_deref().unwrap_or_default(),
        ))
    }

    /// The UIDs of `status.reservedFor`.
    pub(crate) fn reserved_for(&self) -> BTreeSet<String> {
        self.reserved_for.iter().map(|r| r.uid.clone()).collect()
    }

    /// The entries of `status.resourceClaimStatuses` that name a claim.
    pub(crate) fn recorded(&self) -> BTreeSet<String> {
        self.recorded
            .iter()
            .filter(|s| s.resource_claim_name.is_some())
            .map(|s| s.name.clone())
            .collect()
    }
}

#[cfg(test)]
mod tests;
