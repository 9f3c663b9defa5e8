use k8s_openapi::api::core::v1::PersistentVolume;
use serde_json::json;

use super::*;

fn volume_json() -> serde_json::Value {
    json!({
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {
            "name": "pv-1",
            "resourceVersion": "12",
            "annotations": {"managedFields": "an annotation, kept"},
            "managedFields": [{
                "manager": "kubectl",
                "operation": "Update",
                "fieldsType": "FieldsV1",
                "fieldsV1": {"f:spec": {"f:capacity": {".": {}, "f:storage": {}}}}
            }],
            "labels": {"tier": "gold"}
        },
        "spec": {
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"],
            "csi": {"driver": "d", "volumeHandle": "h", "volumeAttributes": {"managedFields": "x"}}
        },
        "status": {"phase": "Available"}
    })
}

#[test]
fn decodes_everything_but_the_managed_fields() {
    let text = volume_json().to_string();
    let Lean(lean) = serde_json::from_str::<Lean<PersistentVolume>>(&text).unwrap();
    let mut full: PersistentVolume = serde_json::from_str(&text).unwrap();
    assert!(full.metadata.managed_fields.is_some());
    assert!(lean.metadata.managed_fields.is_none());
    full.metadata.managed_fields = None;
    assert_eq!(lean, full);
    assert_eq!(
        lean.metadata.annotations.unwrap()["managedFields"],
        "an annotation, kept"
    );
}

#[test]
fn decodes_from_a_value_and_from_escaped_keys() {
    let Lean(from_value) = serde_json::from_value::<Lean<PersistentVolume>>(volume_json()).unwrap();
    assert!(from_value.metadata.managed_fields.is_none());
    assert_eq!(from_value.metadata.name.as_deref(), Some("pv-1"));
    let escaped = r#"{"metadata":{"na\u006de":"pv-2","managedFields":[]},"spec":{}}"#;
    let Lean(volume) = serde_json::from_str::<Lean<PersistentVolume>>(escaped).unwrap();
    assert_eq!(volume.metadata.name.as_deref(), Some("pv-2"));
}

#[test]
fn keeps_who_wrote_the_object_two_levels_deep() {
    let mut json = volume_json();
    json["metadata"]["managedFields"]
            .as_array_mut()
            .unwrap()
            .push(json!({
                "manager": "kube-controller-manager",
                "operation": "Update",
                "subresource": "status",
                "time": "2026-01-02T03:04:05Z",
                "fieldsType": "FieldsV1",
                "fieldsV1": {"f:status": {"f:phase": {}}, "f:metadata": {"f:annotations": {".": {}, "f:pv.kubernetes.io/bound-by-controller": {}}}}
            }));
    let WithManagers(volume, managers) =
        serde_json::from_str::<WithManagers<PersistentVolume>>(&json.to_string()).unwrap();
    let Lean(lean) = serde_json::from_value::<Lean<PersistentVolume>>(json).unwrap();
    assert_eq!(volume, lean, "the object decodes as Lean decodes it");
    assert_eq!(managers.len(), 2);
    assert_eq!(managers[0].manager, "kubectl");
    assert_eq!(managers[0].fields, ["spec.capacity"]);
    assert_eq!(managers[0].time, None);
    let binder = &managers[1];
    assert_eq!(binder.manager, "kube-controller-manager");
    assert_eq!(binder.operation, "Update");
    assert_eq!(binder.subresource, "status");
    assert_eq!(binder.time.as_deref(), Some("2026-01-02T03:04:05Z"));
    assert_eq!(binder.fields, ["metadata.annotations", "status.phase"]);
    assert!(binder.owns("status.phase"));
    let none = r#"{"metadata":{"name":"pv-3","managedFields":null},"spec":{}}"#;
    let WithManagers(_, managers) =
        serde_json::from_str::<WithManagers<PersistentVolume>>(none).unwrap();
    assert!(managers.is_empty());
}

#[test]
fn rejects_what_the_full_decoder_rejects() {
    let bad = r#"{"metadata":{"name":7},"spec":{}}"#;
    assert!(serde_json::from_str::<PersistentVolume>(bad).is_err());
    assert!(serde_json::from_str::<Lean<PersistentVolume>>(bad).is_err());
    assert!(serde_json::from_str::<Lean<PersistentVolume>>("[1]").is_err());
}
