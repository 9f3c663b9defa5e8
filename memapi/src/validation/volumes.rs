//! The update rules of Kubernetes 1.20 for volumes and claims
//! (`ValidatePersistentVolumeUpdate`, `ValidatePersistentVolumeClaimUpdate`
//! with the ExpandPersistentVolumes gate on, its 1.20 default).
//!
//! A volume's source, its volumeMode, and its nodeAffinity once set are
//! immutable; claimRef, capacity, reclaim policy and the rest may change.
//! A claim's spec is immutable except `volumeName`, which may be set once
//! while empty, `storageClassName`, which may be set once to the value of a
//! beta storage-class annotation, and `resources.requests.storage` of a
//! bound claim, which may grow but not shrink.
//!
//! One later rule is modelled too, because the controller relies on it and
//! every server it targets has it: since Kubernetes 1.28
//! (RetroactiveDefaultStorageClass, GA) a claim with no class at all (no
//! `storageClassName`, no beta annotation) may get a `storageClassName` once.
//! A 1.20 server refuses that write; the controller then counts a failed
//! retroactive assignment.
//!
//! Specs are compared as apimachinery's semantic equality does for these
//! fields: absent, null and empty values are the same, and quantities are
//! compared as numbers. The "Forbidden" details omit the Go object diff the
//! real server appends.

use super::super::object::{str_at, value_at};
use super::FieldError;
use k8s_names::ANN_BETA_STORAGE_CLASS;
use quantity::Amount;
use serde_json::{Map, Value};

/// The fields of `PersistentVolumeSource`, inlined in a volume's spec.
const VOLUME_SOURCES: [&str; 22] = [
    "gcePersistentDisk",
    "awsElasticBlockStore",
    "hostPath",
    "glusterfs",
    "nfs",
    "rbd",
    "iscsi",
    "cinder",
    "cephfs",
    "fc",
    "flocker",
    "flexVolume",
    "azureFile",
    "vsphereVolume",
    "quobyte",
    "azureDisk",
    "photonPersistentDisk",
    "portworxVolume",
    "scaleIO",
    "local",
    "storageos",
    "csi",
];

const IMMUTABLE: &str = "field is immutable";

/// A value with nulls and empty lists and maps removed, and quantity
/// strings under `requests`/`limits`/`capacity` replaced by their exact
/// amount, so that two semantically equal values compare equal.
fn normalized(v: &Value) -> Value {
    normalize_in(v, "")
}

fn normalize_in(v: &Value, parent_key: &str) -> Value {
    match v {
        Value::Object(map) => {
            let quantities = matches!(parent_key, "requests" | "limits" | "capacity");
            let out: Map<String, Value> = map
                .iter()
                .map(|(k, v)| {
                    let n = match (quantities, v) {
                        (true, Value::String(q)) => Amount::parse(q)
                            .map(|a| Value::String(a.nanos().to_string()))
                            .unwrap_or_else(|_| v.clone()),
                        _ => normalize_in(v, k),
                    };
                    (k.clone(), n)
                })
                .filter(|(_, v)| !is_empty(v))
                .collect();
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(|i| normalize_in(i, "")).collect()),
        other => other.clone(),
    }
}

fn is_empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Array(a) => a.is_empty(),
        Value::Object(m) => m.is_empty(),
        _ => false,
    }
}

/// The normalized value at `path`, `Null` when absent.
fn norm_at(obj: &Value, path: &str) -> Value {
    value_at(obj, path).map_or(Value::Null, normalized)
}

/// `ValidateImmutableField` on a dotted path of both objects, reported
/// under `field` (1.20 reports `volumeMode`, not `spec.volumeMode`).
fn immutable(new: &Value, old: &Value, path: &str, field: &str) -> Option<FieldError> {
    let new_val = norm_at(new, path);
    (new_val != norm_at(old, path)).then(|| FieldError::invalid(field, new_val, IMMUTABLE))
}

/// The rules of `ValidatePersistentVolumeUpdate` about changes.
pub(crate) fn validate_pv_update(new: &Value, old: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut new_source = Map::new();
    let mut old_source = Map::new();
    for key in VOLUME_SOURCES {
        let path = format!("spec.{key}");
        new_source.insert(key.to_string(), norm_at(new, &path));
        old_source.insert(key.to_string(), norm_at(old, &path));
    }
    // A CSI volume without a controllerExpandSecretRef may be given one.
    let secret = "controllerExpandSecretRef";
    let old_csi_lacks = value_at(old, "spec.csi").is_some_and(|c| c.get(secret).is_none());
    if old_csi_lacks && let Some(Value::Object(csi)) = new_source.get_mut("csi") {
        csi.remove(secret);
    }
    if new_source != old_source {
        errs.push(FieldError::forbidden(
            "spec.persistentvolumesource",
            "spec.persistentvolumesource is immutable after creation",
        ));
    }
    errs.extend(immutable(new, old, "spec.volumeMode", "volumeMode"));
    if value_at(old, "spec.nodeAffinity").is_some_and(|a| !a.is_null()) {
        errs.extend(immutable(new, old, "spec.nodeAffinity", "nodeAffinity"));
    }
    errs
}

/// `validateStorageClassUpgrade`: a claim with the beta storage-class
/// annotation and no `storageClassName` may get the annotation's class.
fn storage_class_upgrade(new: &Value, old: &Value) -> bool {
    let ann = |o: &Value| {
        value_at(o, "metadata.annotations")
            .and_then(|a| a.get(ANN_BETA_STORAGE_CLASS))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    let (Some(old_sc), new_ann) = (ann(old), ann(new)) else {
        return false;
    };
    str_at(old, "spec.storageClassName").is_none()
        && str_at(new, "spec.storageClassName") == Some(old_sc.as_str())
        && new_ann.is_none_or(|n| n == old_sc)
}

/// RetroactiveDefaultStorageClass (GA in 1.28): a claim without any class
/// (no `storageClassName`, no beta annotation on either side) may get one.
fn retroactive_default_class(new: &Value, old: &Value) -> bool {
    let has_beta = |o: &Value| {
        value_at(o, "metadata.annotations")
            .and_then(|a| a.get(ANN_BETA_STORAGE_CLASS))
            .is_some()
    };
    str_at(old, "spec.storageClassName").is_none()
        && str_at(new, "spec.storageClassName").is_some()
        && !has_beta(old)
        && !has_beta(new)
}

/// The storage request of a claim, if it parses.
fn requested(obj: &Value) -> Option<Amount> {
    str_at(obj, "spec.resources.requests.storage").and_then(|q| Amount::parse(q).ok())
}

/// The rules of `ValidatePersistentVolumeClaimUpdate` about changes.
/// `new` carries the stored status (the update strategy keeps it).
pub(crate) fn validate_pvc_update(new: &Value, old: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut new_spec = norm_at(new, "spec");
    let mut old_spec = norm_at(old, "spec");
    if str_at(old, "spec.volumeName")
        .unwrap_or_default()
        .is_empty()
    {
        set_or_remove(
            &mut old_spec,
            "volumeName",
            new_spec.get("volumeName").cloned(),
        );
    }
    if storage_class_upgrade(new, old) || retroactive_default_class(new, old) {
        set_or_remove(&mut new_spec, "storageClassName", None);
    } else {
        let ann = |o: &Value| {
            value_at(o, "metadata.annotations")
                .and_then(|a| a.get(ANN_BETA_STORAGE_CLASS))
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        let (new_ann, old_ann) = (ann(new), ann(old));
        if new_ann != old_ann {
            errs.push(FieldError::invalid(
                &format!("metadata.annotations[{ANN_BETA_STORAGE_CLASS}]"),
                new_ann,
                IMMUTABLE,
            ));
        }
    }
    let bound = str_at(new, "status.phase") == Some("Bound");
    if bound && let Some(Value::Object(requests)) = new_spec.pointer_mut("/resources/requests") {
        match old_spec.pointer("/resources/requests/storage").cloned() {
            Some(q) => requests.insert("storage".to_string(), q),
            None => requests.remove("storage"),
        };
    }
    if normalized(&new_spec) != normalized(&old_spec) {
        errs.push(FieldError::forbidden(
            "spec",
            "spec is immutable after creation except resources.requests for bound claims",
        ));
    }
    if requested(new).unwrap_or(Amount::ZERO) < requested(old).unwrap_or(Amount::ZERO) {
        errs.push(FieldError::forbidden(
            "spec.resources.requests.storage",
            "field can not be less than previous value",
        ));
    }
    errs.extend(immutable(new, old, "spec.volumeMode", "volumeMode"));
    errs
}

/// Sets (or, with `None`, removes) a top-level key of an object value.
fn set_or_remove(obj: &mut Value, key: &str, value: Option<Value>) {
    if !obj.is_object() {
        *obj = Value::Object(Map::new());
    }
    if let Some(map) = obj.as_object_mut() {
        match value {
            Some(v) => map.insert(key.to_string(), v),
            None => map.remove(key),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn claim(volume: &str, size: &str, phase: &str) -> Value {
        json!({
            "metadata": {"name": "c1", "namespace": "ns1"},
            "spec": {"accessModes": ["ReadWriteOnce"], "volumeName": volume,
                     "resources": {"requests": {"storage": size}}, "volumeMode": "Filesystem"},
            "status": {"phase": phase},
        })
    }

    fn rendered(errs: &[FieldError]) -> Vec<String> {
        errs.iter()
            .map(|e| format!("{}: {}", e.field, e.body()))
            .collect()
    }

    #[test]
    fn claim_volume_name_is_set_once() {
        assert!(
            validate_pvc_update(
                &claim("pv1", "1Gi", "Pending"),
                &claim("", "1Gi", "Pending")
            )
            .is_empty()
        );
        assert_eq!(
            rendered(&validate_pvc_update(
                &claim("pv2", "1Gi", "Bound"),
                &claim("pv1", "1Gi", "Bound")
            )),
            vec![
                "spec: Forbidden: spec is immutable after creation except resources.requests for bound claims"
            ]
        );
        assert_eq!(
            validate_pvc_update(&claim("", "1Gi", "Bound"), &claim("pv1", "1Gi", "Bound")).len(),
            1
        );
    }

    #[test]
    fn claim_requests_grow_only_when_bound() {
        assert!(
            validate_pvc_update(&claim("pv1", "2Gi", "Bound"), &claim("pv1", "1Gi", "Bound"))
                .is_empty()
        );
        assert!(
            validate_pvc_update(
                &claim("pv1", "1024Mi", "Bound"),
                &claim("pv1", "1Gi", "Bound")
            )
            .is_empty()
        );
        assert_eq!(
            validate_pvc_update(&claim("", "2Gi", "Pending"), &claim("", "1Gi", "Pending")).len(),
            1
        );
        assert_eq!(
            rendered(&validate_pvc_update(
                &claim("pv1", "1Mi", "Bound"),
                &claim("pv1", "1Gi", "Bound")
            )),
            vec![
                "spec.resources.requests.storage: Forbidden: field can not be less than previous value"
            ]
        );
    }

    #[test]
    fn claim_storage_class_upgrade_and_annotation() {
        let mut old = claim("", "1Gi", "Pending");
        old["metadata"]["annotations"] = json!({ANN_BETA_STORAGE_CLASS: "gold"});
        let mut new = old.clone();
        new["spec"]["storageClassName"] = json!("gold");
        assert!(validate_pvc_update(&new, &old).is_empty());
        new["spec"]["storageClassName"] = json!("silver");
        assert_eq!(
            rendered(&validate_pvc_update(&new, &old)),
            vec![
                "spec: Forbidden: spec is immutable after creation except resources.requests for bound claims"
            ]
        );
        let mut relabelled = old.clone();
        relabelled["metadata"]["annotations"][ANN_BETA_STORAGE_CLASS] = json!("silver");
        assert_eq!(
            rendered(&validate_pvc_update(&relabelled, &old)),
            vec![
                "metadata.annotations[volume.beta.kubernetes.io/storage-class]: Invalid value: \"silver\": field is immutable"
            ]
        );
        let mut block = old.clone();
        block["spec"]["volumeMode"] = json!("Block");
        assert_eq!(
            rendered(&validate_pvc_update(&block, &old)),
            vec![
                "spec: Forbidden: spec is immutable after creation except resources.requests for bound claims",
                "volumeMode: Invalid value: \"Block\": field is immutable",
            ]
        );
    }

    #[test]
    fn a_claim_without_class_may_get_one_once() {
        let old = claim("", "1Gi", "Pending");
        let mut new = old.clone();
        new["spec"]["storageClassName"] = json!("standard");
        assert!(validate_pvc_update(&new, &old).is_empty());
        let mut changed = new.clone();
        changed["spec"]["storageClassName"] = json!("gold");
        assert_eq!(
            validate_pvc_update(&changed, &new).len(),
            1,
            "a class once set is immutable"
        );
    }

    #[test]
    fn volume_source_is_immutable_claim_ref_is_not() {
        let old = json!({"spec": {"nfs": {"server": "a", "path": "/x"}, "capacity": {"storage": "1Gi"},
                                   "volumeMode": "Filesystem"}});
        let mut new = old.clone();
        new["spec"]["claimRef"] = json!({"namespace": "ns1", "name": "c1"});
        new["spec"]["capacity"] = json!({"storage": "2Gi"});
        new["spec"]["persistentVolumeReclaimPolicy"] = json!("Delete");
        new["spec"]["nodeAffinity"] = json!({"required": {}});
        assert!(validate_pv_update(&new, &old).is_empty());
        new["spec"]["nfs"]["path"] = json!("/y");
        assert_eq!(
            rendered(&validate_pv_update(&new, &old)),
            vec![
                "spec.persistentvolumesource: Forbidden: spec.persistentvolumesource is immutable after creation"
            ]
        );
        let pinned = json!({"spec": {"local": {"path": "/d"}, "nodeAffinity": {"required": {"nodeSelectorTerms": [{}]}}}});
        let mut moved = pinned.clone();
        moved["spec"]["nodeAffinity"] =
            json!({"required": {"nodeSelectorTerms": [{"matchFields": []}, {}]}});
        assert_eq!(validate_pv_update(&moved, &pinned).len(), 1);
    }

    #[test]
    fn csi_may_get_an_expand_secret() {
        let old = json!({"spec": {"csi": {"driver": "d", "volumeHandle": "h"}}});
        let mut new = old.clone();
        new["spec"]["csi"]["controllerExpandSecretRef"] = json!({"name": "s", "namespace": "n"});
        assert!(validate_pv_update(&new, &old).is_empty());
        let mut changed = new.clone();
        changed["spec"]["csi"]["volumeHandle"] = json!("other");
        assert_eq!(validate_pv_update(&changed, &old).len(), 1);
    }
}
