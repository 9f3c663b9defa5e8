//! What the journal reads of an object: the few fields a decision is made
//! of and judged on (identity, deletion, finalizers, the annotations
//! decisions name, the owning pod, a claim's volume and class, a volume's
//! claimRef, phases, a ResourceClaim's reservations and allocation, a
//! pod's recorded claims), built straight from the typed object. Shadow
//! mode reads every object it writes or waits for, so a whole object's
//! JSON would cost it many times the allocations of the work itself.

use std::any::Any;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::resource::v1::ResourceClaim;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::{Map, Value};

use super::decisions::JUDGED_ANNOTATIONS;

/// The view of `object`; `null` for a kind no decision is judged on.
pub(crate) fn of<K: Any>(object: &K) -> Value {
    let object: &dyn Any = object;
    if let Some(v) = object.downcast_ref::<PersistentVolumeClaim>() {
        claim(v)
    } else if let Some(v) = object.downcast_ref::<PersistentVolume>() {
        volume(v)
    } else if let Some(v) = object.downcast_ref::<Pod>() {
        pod(v)
    } else if let Some(v) = object.downcast_ref::<ResourceClaim>() {
        resource_claim(v)
    } else {
        Value::Null
    }
}

fn text(value: Option<&String>) -> Value {
    value.map_or(Value::Null, |v| Value::from(v.as_str()))
}

/// The metadata decisions read: name, namespace, UID, deletion,
/// finalizers, the annotations decisions name and a controlling owner.
fn metadata(meta: &ObjectMeta) -> Value {
    let mut out = Map::new();
    out.insert("name".into(), text(meta.name.as_ref()));
    out.insert("namespace".into(), text(meta.namespace.as_ref()));
    out.insert("uid".into(), text(meta.uid.as_ref()));
    if meta.deletion_timestamp.is_some() {
        out.insert("deletionTimestamp".into(), Value::Bool(true));
    }
    if let Some(finalizers) = &meta.finalizers {
        out.insert(
            "finalizers".into(),
            finalizers.iter().map(|f| Value::from(f.as_str())).collect(),
        );
    }
    if let Some(annotations) = &meta.annotations {
        let judged: Map<String, Value> = JUDGED_ANNOTATIONS
            .iter()
            .filter_map(|key| {
                Some((
                    key.to_string(),
                    Value::from(annotations.get(*key)?.as_str()),
                ))
            })
            .collect();
        if !judged.is_empty() {
            out.insert("annotations".into(), Value::Object(judged));
        }
    }
    if let Some(owner) = meta
        .owner_references
        .iter()
        .flatten()
        .find(|r| r.controller == Some(true))
    {
        out.insert(
            "ownerReferences".into(),
            Value::Array(vec![serde_json::json!({
                "kind": owner.kind, "uid": owner.uid, "controller": true,
            })]),
        );
    }
    Value::Object(out)
}

fn object(metadata: Value, spec: Value, status: Value) -> Value {
    let mut out = Map::new();
    out.insert("metadata".into(), metadata);
    out.insert("spec".into(), spec);
    out.insert("status".into(), status);
    Value::Object(out)
}

fn phase(phase: Option<&String>) -> Value {
    serde_json::json!({ "phase": text(phase) })
}

/// A claim: its volume, class and phase.
fn claim(claim: &PersistentVolumeClaim) -> Value {
    let spec = claim.spec.as_ref();
    object(
        metadata(&claim.metadata),
        serde_json::json!({
            "volumeName": text(spec.and_then(|s| s.volume_name.as_ref())),
            "storageClassName": text(spec.and_then(|s| s.storage_class_name.as_ref())),
        }),
        phase(claim.status.as_ref().and_then(|s| s.phase.as_ref())),
    )
}

/// A volume: the claim it is bound to and its phase.
fn volume(volume: &PersistentVolume) -> Value {
    let claim_ref = volume
        .spec
        .as_ref()
        .and_then(|s| s.claim_ref.as_ref())
        .map_or(Value::Null, |r| {
            serde_json::json!({
                "namespace": text(r.namespace.as_ref()),
                "name": text(r.name.as_ref()),
                "uid": text(r.uid.as_ref()),
            })
        });
    object(
        metadata(&volume.metadata),
        serde_json::json!({ "claimRef": claim_ref }),
        phase(volume.status.as_ref().and_then(|s| s.phase.as_ref())),
    )
}

/// A pod: the claims recorded for its entries.
fn pod(pod: &Pod) -> Value {
    let recorded: Vec<Value> = pod
        .status
        .iter()
        .flat_map(|s| s.resource_claim_statuses.iter().flatten())
        .map(|s| {
            serde_json::json!({
                "name": s.name, "resourceClaimName": text(s.resource_claim_name.as_ref()),
            })
        })
        .collect();
    object(
        metadata(&pod.metadata),
        Value::Null,
        serde_json::json!({ "resourceClaimStatuses": recorded }),
    )
}

/// A ResourceClaim: whom it is reserved for and whether it is allocated.
fn resource_claim(claim: &ResourceClaim) -> Value {
    let status = claim.status.as_ref();
    let reserved: Vec<Value> = status
        .and_then(|s| s.reserved_for.as_ref())
        .into_iter()
        .flatten()
        .map(|r| serde_json::json!({ "uid": r.uid }))
        .collect();
    let allocated = status.is_some_and(|s| s.allocation.is_some());
    object(
        metadata(&claim.metadata),
        Value::Null,
        serde_json::json!({
            "reservedFor": reserved,
            "allocation": if allocated { Value::Bool(true) } else { Value::Null },
        }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::shadow_mode::decisions::of_write;
    use testkit::{claim as test_claim, volume as test_volume};

    /// The decisions read from views are those read from whole objects.
    #[test]
    fn views_decide_as_whole_objects_do() {
        let before = test_volume("v1", "1Gi").phase("Available").build();
        let after = test_volume("v1", "1Gi")
            .bound_to("c-uid", "c")
            .phase("Bound")
            .build();
        let whole = |v: &PersistentVolume| serde_json::to_value(v).unwrap();
        assert_eq!(
            of_write(
                "persistentvolumes",
                "update",
                Some(&volume(&before)),
                Some(&volume(&after))
            ),
            of_write(
                "persistentvolumes",
                "update",
                Some(&whole(&before)),
                Some(&whole(&after))
            ),
        );
        let pending = test_claim("c", "c-uid", "1Gi").build();
        let bound = test_claim("c", "c-uid", "1Gi")
            .volume_name("v1")
            .annotation("volume.kubernetes.io/storage-provisioner", "p")
            .annotation("pv.kubernetes.io/bind-completed", "yes")
            .build();
        let whole = |c: &PersistentVolumeClaim| serde_json::to_value(c).unwrap();
        let decisions = of_write(
            "persistentvolumeclaims",
            "update",
            Some(&claim(&pending)),
            Some(&claim(&bound)),
        );
        assert_eq!(decisions.len(), 2, "{decisions:?}");
        assert_eq!(
            decisions,
            of_write(
                "persistentvolumeclaims",
                "update",
                Some(&whole(&pending)),
                Some(&whole(&bound))
            ),
        );
    }
}
