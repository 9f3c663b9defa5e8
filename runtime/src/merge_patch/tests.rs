use serde_json::json;
use serde_json::value::{RawValue, to_raw_value};

use json_patch::merge as apply;

use super::diff;

fn raw(value: &serde_json::Value) -> Box<RawValue> {
    to_raw_value(value).unwrap()
}

/// The patch from `before` to `after`, as a value.
fn patch(before: &serde_json::Value, after: &serde_json::Value) -> Option<serde_json::Value> {
    let (before, after) = (raw(before), raw(after));
    diff(&before, &after).map(|patch| serde_json::to_value(&patch).unwrap())
}

#[test]
fn equal_copies_need_no_patch() {
    let object = json!({"metadata": {"name": "v1"}, "spec": {"capacity": {"storage": "1Gi"}}});
    assert_eq!(patch(&object, &object.clone()), None);
}

#[test]
fn only_what_changed_is_named_and_what_went_is_null() {
    let before = json!({
        "metadata": {"name": "v1", "annotations": {"a": "1", "b": "2"}},
        "spec": {"claimRef": {"name": "c", "uid": "u"}, "capacity": {"storage": "1Gi"}},
        "status": {"phase": "Bound"},
    });
    let after = json!({
        "metadata": {"name": "v1", "annotations": {"a": "1", "c": "3"}},
        "spec": {"claimRef": {"name": "c"}, "capacity": {"storage": "1Gi"}},
        "status": {"phase": "Released", "message": "gone"},
    });
    let change = patch(&before, &after).expect("a change");
    assert_eq!(
        change,
        json!({
            "metadata": {"annotations": {"b": null, "c": "3"}},
            "spec": {"claimRef": {"uid": null}},
            "status": {"phase": "Released", "message": "gone"},
        })
    );
    let mut applied = before.clone();
    apply(&mut applied, &change);
    assert_eq!(applied, after);
}

#[test]
fn a_member_that_went_is_deleted_and_a_changed_list_is_sent_whole() {
    let before =
        json!({"metadata": {"finalizers": ["a", "b"]}, "spec": {"claimRef": {"name": "c"}}});
    let after = json!({"metadata": {"finalizers": ["b"]}, "spec": {}});
    assert_eq!(
        patch(&before, &after),
        Some(json!({"metadata": {"finalizers": ["b"]}, "spec": {"claimRef": null}}))
    );
}

#[test]
fn fields_the_patch_does_not_name_survive_on_the_server() {
    let server = json!({
        "metadata": {"name": "v1", "futureMeta": "kept"},
        "spec": {"futureSpec": {"deep": 1}, "claimRef": {"name": "c"}},
        "status": {"phase": "Bound", "futureStatus": true},
    });
    // What the compiled types decoded: the server's copy without the
    // fields they do not know.
    let known = json!({
        "metadata": {"name": "v1"},
        "spec": {"claimRef": {"name": "c"}},
        "status": {"phase": "Bound"},
    });
    let mut edited = known.clone();
    edited["status"]["phase"] = json!("Released");
    edited["spec"]["claimRef"] = json!({"name": "c", "uid": "u"});
    let change = patch(&known, &edited).expect("a change");
    let mut on_server = server.clone();
    apply(&mut on_server, &change);
    assert_eq!(on_server["metadata"]["futureMeta"], "kept");
    assert_eq!(on_server["spec"]["futureSpec"], json!({"deep": 1}));
    assert_eq!(on_server["status"]["futureStatus"], true);
    assert_eq!(on_server["status"]["phase"], "Released");
    assert_eq!(on_server["spec"]["claimRef"]["uid"], "u");
}

#[test]
fn a_new_member_is_sent_whole_and_a_new_null_not_at_all() {
    let before = json!({"spec": {}});
    let after = json!({"spec": {"claimRef": {"name": "c"}, "gone": null}});
    assert_eq!(
        patch(&before, &after),
        Some(json!({"spec": {"claimRef": {"name": "c"}}}))
    );
}

#[test]
fn keys_that_need_escaping_are_compared_and_sent_as_they_are() {
    let before = json!({"spec": {"csi": {"volumeAttributes": {"a\"b": "1", "c\\d": "2"}}}});
    let after = json!({"spec": {"csi": {"volumeAttributes": {"a\"b": "9", "c\\d": "2"}}}});
    assert_eq!(
        patch(&before, &after),
        Some(json!({"spec": {"csi": {"volumeAttributes": {"a\"b": "9"}}}}))
    );
}
