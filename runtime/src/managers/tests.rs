use super::*;

#[test]
fn an_entry_keeps_its_fields_two_levels_deep() {
    let entry: FieldManager = serde_json::from_value(serde_json::json!({
        "manager": "kube-controller-manager",
        "operation": "Update",
        "apiVersion": "v1",
        "time": "2026-01-02T03:04:05Z",
        "fieldsType": "FieldsV1",
        "fieldsV1": {
            "f:spec": {"f:claimRef": {".": {}, "f:name": {}}, "f:volumeMode": {}},
            "f:status": {"f:phase": {}},
            ".": {}
        }
    }))
    .unwrap();
    assert_eq!(
        entry.fields,
        ["spec.claimRef", "spec.volumeMode", "status.phase"]
    );
    assert!(entry.owns("status.phase"));
    assert!(!entry.owns("status"));
    let bare: FieldManager = serde_json::from_str(r#"{"manager": "x"}"#).unwrap();
    assert_eq!(bare.fields, Vec::<String>::new());
}
