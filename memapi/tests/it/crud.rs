//! memapi write semantics: conflicts, status subresource, defaults,
//! finalizers and preconditions, bad requests.

use crate::support::{code, pv, pvc, reason, status};
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use memapi::MemApi;
use serde_json::json;

#[tokio::test]
async fn stale_update_is_a_conflict_and_changes_nothing() {
    let mem = MemApi::new();
    let pvs: Api<PersistentVolume> = Api::all(mem.client());
    let created = pvs
        .create(&PostParams::default(), &pv("pv1", "1Gi"))
        .await
        .unwrap();
    let mut fresh = created.clone();
    fresh.metadata.labels = Some([("a".to_string(), "1".to_string())].into());
    let updated = pvs
        .replace("pv1", &PostParams::default(), &fresh)
        .await
        .unwrap();
    assert_ne!(
        updated.metadata.resource_version,
        created.metadata.resource_version
    );

    let mut stale = created.clone();
    stale.metadata.labels = Some([("a".to_string(), "2".to_string())].into());
    let err = pvs
        .replace("pv1", &PostParams::default(), &stale)
        .await
        .unwrap_err();
    let kube::Error::Api(status) = &err else {
        panic!("{err:?}")
    };
    assert_eq!(status.code, 409);
    assert_eq!(status.reason, "Conflict");
    assert!(
        status.message.contains("the object has been modified"),
        "{}",
        status.message
    );
    let stored = mem.get::<PersistentVolume>(None, "pv1").unwrap();
    assert_eq!(stored, updated);
}

#[tokio::test]
async fn already_exists_and_not_found() {
    let mem = MemApi::new();
    let pvs: Api<PersistentVolume> = Api::all(mem.client());
    pvs.create(&PostParams::default(), &pv("pv1", "1Gi"))
        .await
        .unwrap();
    let err = pvs
        .create(&PostParams::default(), &pv("pv1", "1Gi"))
        .await
        .unwrap_err();
    assert_eq!(reason(&err), "AlreadyExists");
    assert_eq!(code(err), 409);
    let err = pvs.get("nope").await.unwrap_err();
    assert_eq!(reason(&err), "NotFound");
    let err = pvs
        .replace("nope", &PostParams::default(), &pv("nope", "1Gi"))
        .await
        .unwrap_err();
    assert_eq!(code(err), 404);
    let err = pvs
        .patch(
            "nope",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"a": "b"}}})),
        )
        .await
        .unwrap_err();
    assert_eq!(code(err), 404);
    let err = pvs
        .delete("nope", &DeleteParams::default())
        .await
        .unwrap_err();
    assert_eq!(code(err), 404);
}

#[tokio::test]
async fn create_sets_identity_defaults_and_resets_status() {
    let mem = MemApi::new();
    let pvs: Api<PersistentVolume> = Api::all(mem.client());
    let mut v = pv("", "1Gi");
    v.metadata.name = None;
    v.metadata.generate_name = Some("pv-".into());
    v.status = Some(serde_json::from_value(json!({"phase": "Bound"})).unwrap());
    let created = pvs.create(&PostParams::default(), &v).await.unwrap();
    let name = created.metadata.name.clone().unwrap();
    assert!(name.starts_with("pv-") && name.len() == 8, "{name}");
    assert_eq!(created.metadata.uid.as_ref().unwrap().len(), 36);
    assert!(created.metadata.creation_timestamp.is_some());
    let spec = created.spec.unwrap();
    assert_eq!(
        spec.persistent_volume_reclaim_policy.as_deref(),
        Some("Retain")
    );
    assert_eq!(spec.volume_mode.as_deref(), Some("Filesystem"));
    let status = created.status.unwrap();
    assert_eq!(status.phase.as_deref(), Some("Pending"));
    assert!(status.last_phase_transition_time.is_some());

    let claims: Api<PersistentVolumeClaim> = Api::namespaced(mem.client(), "ns1");
    let c = claims
        .create(&PostParams::default(), &pvc("ns1", "c1", "1Gi"))
        .await
        .unwrap();
    assert_eq!(c.spec.unwrap().volume_mode.as_deref(), Some("Filesystem"));
    assert_eq!(c.status.unwrap().phase.as_deref(), Some("Pending"));

    // Seeding keeps the status.
    let mut bound = pv("seeded", "1Gi");
    bound.status = Some(serde_json::from_value(json!({"phase": "Bound"})).unwrap());
    let seeded = mem.create(&bound).unwrap();
    assert_eq!(seeded.status.unwrap().phase.as_deref(), Some("Bound"));
}

#[tokio::test]
async fn status_subresource_semantics() {
    let mem = MemApi::new();
    let pvs: Api<PersistentVolume> = Api::all(mem.client());
    let created = pvs
        .create(&PostParams::default(), &pv("pv1", "1Gi"))
        .await
        .unwrap();
    let first_stamp = created
        .status
        .as_ref()
        .unwrap()
        .last_phase_transition_time
        .clone();

    // A main-resource update ignores status.
    let mut v = created.clone();
    v.status.as_mut().unwrap().phase = Some("Available".into());
    v.spec.as_mut().unwrap().storage_class_name = Some("gold".into());
    let v = pvs
        .replace("pv1", &PostParams::default(), &v)
        .await
        .unwrap();
    assert_eq!(v.status.as_ref().unwrap().phase.as_deref(), Some("Pending"));
    assert_eq!(
        v.spec.as_ref().unwrap().storage_class_name.as_deref(),
        Some("gold")
    );

    // A status update ignores spec but takes metadata, as 1.20's status
    // strategy does, and sets the phase transition time.
    let mut s = v.clone();
    s.status.as_mut().unwrap().phase = Some("Available".into());
    s.status.as_mut().unwrap().last_phase_transition_time = first_stamp.clone();
    s.spec.as_mut().unwrap().storage_class_name = Some("silver".into());
    s.metadata.labels = Some([("kept".to_string(), "yes".to_string())].into());
    let s = pvs
        .replace_status("pv1", &PostParams::default(), &s)
        .await
        .unwrap();
    assert_eq!(
        s.status.as_ref().unwrap().phase.as_deref(),
        Some("Available")
    );
    assert_eq!(
        s.spec.as_ref().unwrap().storage_class_name.as_deref(),
        Some("gold")
    );
    assert_eq!(
        s.metadata
            .labels
            .as_ref()
            .unwrap()
            .get("kept")
            .map(String::as_str),
        Some("yes")
    );
    assert!(
        s.status
            .as_ref()
            .unwrap()
            .last_phase_transition_time
            .is_some()
    );

    // Status patch changes only status.
    let p = json!({"spec": {"storageClassName": "x"}, "status": {"phase": "Released"}});
    let s = pvs
        .patch_status("pv1", &PatchParams::default(), &Patch::Merge(p))
        .await
        .unwrap();
    assert_eq!(
        s.status.as_ref().unwrap().phase.as_deref(),
        Some("Released")
    );
    assert_eq!(
        s.spec.as_ref().unwrap().storage_class_name.as_deref(),
        Some("gold")
    );

    // A no-op update does not bump the resourceVersion.
    let same = pvs
        .replace("pv1", &PostParams::default(), &s)
        .await
        .unwrap();
    assert_eq!(same.metadata.resource_version, s.metadata.resource_version);
}

#[tokio::test]
async fn phase_change_sets_last_phase_transition_time() {
    let mem = MemApi::new();
    let mut seeded = pv("pv1", "1Gi");
    seeded.status = Some(serde_json::from_value(json!({"phase": "Available"})).unwrap());
    mem.create(&seeded).unwrap();
    let pvs: Api<PersistentVolume> = Api::all(mem.client());
    let p = json!({"status": {"phase": "Bound"}});
    let v = pvs
        .patch_status("pv1", &PatchParams::default(), &Patch::Merge(p))
        .await
        .unwrap();
    assert!(v.status.unwrap().last_phase_transition_time.is_some());
    // A client-set stamp is kept.
    let p =
        json!({"status": {"phase": "Released", "lastPhaseTransitionTime": "2020-01-01T00:00:00Z"}});
    let v = pvs
        .patch_status("pv1", &PatchParams::default(), &Patch::Merge(p))
        .await
        .unwrap();
    let stamp = v.status.unwrap().last_phase_transition_time.unwrap();
    assert_eq!(stamp.0.to_string(), "2020-01-01T00:00:00Z");
}

#[tokio::test]
async fn finalizers_delay_removal_until_the_last_is_gone() {
    let mem = MemApi::new();
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(mem.client(), "ns1");
    let mut c = pvc("ns1", "c1", "1Gi");
    c.metadata.finalizers = Some(vec!["kubernetes.io/pvc-protection".into()]);
    claims.create(&PostParams::default(), &c).await.unwrap();
    let deleted = claims.delete("c1", &DeleteParams::default()).await.unwrap();
    let obj = deleted.left().unwrap();
    assert!(obj.metadata.deletion_timestamp.is_some());
    let stored = claims.get("c1").await.unwrap();
    assert!(stored.metadata.deletion_timestamp.is_some());

    let p = json!({"metadata": {"finalizers": null}});
    claims
        .patch("c1", &PatchParams::default(), &Patch::Merge(p))
        .await
        .unwrap();
    assert_eq!(code(claims.get("c1").await.unwrap_err()), 404);
    assert!(
        mem.get::<PersistentVolumeClaim>(Some("ns1"), "c1")
            .is_none()
    );
}

#[tokio::test]
async fn delete_preconditions() {
    let mem = MemApi::new();
    let pvs: Api<PersistentVolume> = Api::all(mem.client());
    let v = pvs
        .create(&PostParams::default(), &pv("pv1", "1Gi"))
        .await
        .unwrap();
    let wrong = DeleteParams {
        preconditions: Some(Preconditions {
            uid: Some("other".into()),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    let uid = v.metadata.uid.clone().unwrap();
    let rv = v.metadata.resource_version.clone().unwrap();
    // kube-apiserver 1.20.2's words (`rest.BeforeDelete`), naming the kind.
    let refused = status(pvs.delete("pv1", &wrong).await.unwrap_err());
    assert_eq!((refused.code, refused.reason.as_str()), (409, "Conflict"));
    assert_eq!(
        refused.message,
        format!(
            "Operation cannot be fulfilled on PersistentVolume \"pv1\": the UID in the precondition (other) does not match the UID in record ({uid}). The object might have been deleted and then recreated"
        )
    );
    let details = refused.details.unwrap();
    assert_eq!(
        (details.kind.as_str(), details.name.as_str()),
        ("PersistentVolume", "pv1")
    );
    let stale = DeleteParams {
        preconditions: Some(Preconditions {
            uid: None,
            resource_version: Some("1".into()),
        }),
        ..DeleteParams::default()
    };
    let refused = status(pvs.delete("pv1", &stale).await.unwrap_err());
    assert_eq!(refused.code, 409);
    assert_eq!(
        refused.message,
        format!(
            "Operation cannot be fulfilled on PersistentVolume \"pv1\": the ResourceVersion in the precondition (1) does not match the ResourceVersion in record ({rv}). The object might have been modified"
        )
    );
    let right = DeleteParams {
        preconditions: Some(Preconditions {
            uid: v.metadata.uid.clone(),
            resource_version: v.metadata.resource_version.clone(),
        }),
        ..DeleteParams::default()
    };
    let gone = pvs.delete("pv1", &right).await.unwrap().left().unwrap();
    assert_ne!(gone.metadata.resource_version, v.metadata.resource_version);
    assert!(mem.get::<PersistentVolume>(None, "pv1").is_none());
}

/// An update's body UID is a precondition (kube-apiserver 1.20.2 checks it
/// in its storage layer before the resourceVersion: 409); a patch that
/// changes the UID changes an immutable field (422, after a stale
/// resourceVersion's 409). Nothing is stored either way.
#[tokio::test]
async fn an_update_or_patch_naming_another_uid_is_refused() {
    let mem = MemApi::new();
    let pvs: Api<PersistentVolume> = Api::all(mem.client());
    let v = pvs
        .create(&PostParams::default(), &pv("pv1", "1Gi"))
        .await
        .unwrap();
    let uid = v.metadata.uid.clone().unwrap();
    let other = "11111111-2222-3333-4444-555555555555";
    let mut body = v.clone();
    body.metadata.uid = Some(other.into());
    body.metadata.labels = Some([("a".to_string(), "1".to_string())].into());
    let precondition = format!(
        "Operation cannot be fulfilled on persistentvolumes \"pv1\": StorageError: invalid object, Code: 4, Key: /registry/persistentvolumes/pv1, ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: UID in precondition: {other}, UID in object meta: {uid}"
    );
    for (what, resource_version) in [
        (
            "the stored resourceVersion",
            v.metadata.resource_version.clone(),
        ),
        ("no resourceVersion", None),
        ("a stale resourceVersion", Some("1".to_string())),
    ] {
        body.metadata.resource_version = resource_version;
        let refused = status(
            pvs.replace("pv1", &PostParams::default(), &body)
                .await
                .unwrap_err(),
        );
        assert_eq!(
            (refused.code, refused.reason.as_str()),
            (409, "Conflict"),
            "{what}"
        );
        assert_eq!(refused.message, precondition, "{what}");
        let refused = status(
            pvs.replace_status("pv1", &PostParams::default(), &body)
                .await
                .unwrap_err(),
        );
        assert_eq!(refused.message, precondition, "status, {what}");
    }

    let claims: Api<PersistentVolumeClaim> = Api::namespaced(mem.client(), "ns1");
    let c = claims
        .create(&PostParams::default(), &pvc("ns1", "c1", "1Gi"))
        .await
        .unwrap();
    let mut claim_body = c.clone();
    claim_body.metadata.uid = Some(other.into());
    let refused = status(
        claims
            .replace("c1", &PostParams::default(), &claim_body)
            .await
            .unwrap_err(),
    );
    assert_eq!(
        refused.message,
        format!(
            "Operation cannot be fulfilled on persistentvolumeclaims \"c1\": StorageError: invalid object, Code: 4, Key: /registry/persistentvolumeclaims/ns1/c1, ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: UID in precondition: {other}, UID in object meta: {}",
            c.metadata.uid.clone().unwrap()
        )
    );

    let immutable = format!(
        "PersistentVolume \"pv1\" is invalid: metadata.uid: Invalid value: \"{other}\": field is immutable"
    );
    let rv = v.metadata.resource_version.clone().unwrap();
    let patches = [
        (
            "merge, the stored resourceVersion",
            Patch::Merge(
                json!({"metadata": {"uid": other, "resourceVersion": rv, "labels": {"a": "1"}}}),
            ),
        ),
        (
            "merge, no resourceVersion",
            Patch::Merge(json!({"metadata": {"uid": other, "labels": {"a": "1"}}})),
        ),
        (
            "strategic",
            Patch::Strategic(json!({"metadata": {"uid": other}})),
        ),
        (
            "json",
            Patch::Json(
                serde_json::from_value(
                    json!([{"op": "replace", "path": "/metadata/uid", "value": other}]),
                )
                .unwrap(),
            ),
        ),
    ];
    for (what, patch) in &patches {
        let refused = status(
            pvs.patch("pv1", &PatchParams::default(), patch)
                .await
                .unwrap_err(),
        );
        assert_eq!(
            (refused.code, refused.reason.as_str()),
            (422, "Invalid"),
            "{what}"
        );
        assert_eq!(refused.message, immutable, "{what}");
        let causes = refused.details.unwrap().causes;
        assert_eq!(causes.len(), 1, "{what}");
        assert_eq!(causes[0].field, "metadata.uid");
        assert_eq!(causes[0].reason, "FieldValueInvalid");
    }
    // The status strategy validates the metadata a second time: two causes.
    let refused = status(
        pvs.patch_status(
            "pv1",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"uid": other}, "status": {"phase": "Available"}})),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(refused.message, immutable);
    assert_eq!(refused.details.unwrap().causes.len(), 2);
    // A stale resourceVersion is refused first.
    let refused = status(
        pvs.patch(
            "pv1",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"uid": other, "resourceVersion": "1"}})),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(refused.code, 409);
    assert!(refused.message.ends_with("the object has been modified; please apply your changes to the latest version and try again"), "{}", refused.message);
    assert_eq!(mem.get::<PersistentVolume>(None, "pv1").unwrap(), v);

    // The stored UID, or none, is taken.
    let patched = pvs
        .patch(
            "pv1",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"metadata": {"uid": uid, "resourceVersion": rv, "labels": {"a": "1"}}}),
            ),
        )
        .await
        .unwrap();
    let mut same = patched.clone();
    same.metadata.labels = None;
    let mut unnamed = pvs
        .replace("pv1", &PostParams::default(), &same)
        .await
        .unwrap();
    unnamed.metadata.uid = None;
    unnamed.metadata.labels = Some([("b".to_string(), "2".to_string())].into());
    let replaced = pvs
        .replace("pv1", &PostParams::default(), &unnamed)
        .await
        .unwrap();
    assert_eq!(replaced.metadata.uid.as_deref(), Some(uid.as_str()));
}

#[tokio::test]
async fn patches_merge_json_strategic_and_invalid() {
    let mem = MemApi::new();
    mem.create(&pv("pv1", "1Gi")).unwrap();
    let pvs: Api<PersistentVolume> = Api::all(mem.client());
    let p = json!({"metadata": {"annotations": {"a": "1"}}});
    pvs.patch("pv1", &PatchParams::default(), &Patch::Merge(p))
        .await
        .unwrap();
    let ops = serde_json::from_value(json!([
        {"op": "add", "path": "/metadata/labels", "value": {"l": "x"}}
    ]))
    .unwrap();
    pvs.patch("pv1", &PatchParams::default(), &Patch::<()>::Json(ops))
        .await
        .unwrap();
    let p = json!({"metadata": {"annotations": {"b": "2"}}, "$setElementOrder/x": []});
    let v = pvs
        .patch("pv1", &PatchParams::default(), &Patch::Strategic(p))
        .await
        .unwrap();
    let ann = v.metadata.annotations.unwrap();
    assert_eq!(ann.get("a").map(String::as_str), Some("1"));
    assert_eq!(ann.get("b").map(String::as_str), Some("2"));
    assert_eq!(
        v.metadata.labels.unwrap().get("l").map(String::as_str),
        Some("x")
    );

    let before = mem.get::<PersistentVolume>(None, "pv1").unwrap();
    let bad = serde_json::from_value(json!([
        {"op": "remove", "path": "/metadata/nothere"}
    ]))
    .unwrap();
    let err = pvs
        .patch("pv1", &PatchParams::default(), &Patch::<()>::Json(bad))
        .await
        .unwrap_err();
    assert!((400..500).contains(&code(err)));
    // A stale resourceVersion in a patch is a conflict.
    let p = json!({"metadata": {"resourceVersion": "1", "labels": {"z": "z"}}});
    let err = pvs
        .patch("pv1", &PatchParams::default(), &Patch::Merge(p))
        .await
        .unwrap_err();
    assert_eq!(code(err), 409);
    assert_eq!(mem.get::<PersistentVolume>(None, "pv1").unwrap(), before);

    // Server-side apply creates a missing object.
    let applied = json!({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv2"},
        "spec": {"capacity": {"storage": "2Gi"}, "accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/x"}}});
    let v = pvs
        .patch("pv2", &PatchParams::apply("test"), &Patch::Apply(applied))
        .await
        .unwrap();
    assert_eq!(v.metadata.name.as_deref(), Some("pv2"));
}

/// Server-side apply of a pod's status, as the ResourceClaim controller
/// records claims: the manager's entries are merged by name, an entry it
/// applied before and leaves out is removed, another manager's entry
/// stays, and an apply without fieldManager is refused.
#[tokio::test]
async fn apply_of_pod_status_owns_the_entries_it_applies() {
    let mem = MemApi::new();
    let pod: Pod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
        "status": {"phase": "Running"}
    }))
    .unwrap();
    mem.create(&pod).unwrap();
    let pods: Api<Pod> = Api::namespaced(mem.client(), "default");
    let status = |entries: &[(&str, &str)]| {
        let list: Vec<serde_json::Value> = entries
            .iter()
            .map(|(n, c)| json!({"name": n, "resourceClaimName": c}))
            .collect();
        Patch::Apply(
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "status": {"resourceClaimStatuses": list}}),
        )
    };
    let apply = |manager: &'static str| PatchParams::apply(manager).force();
    let names = |pod: Pod| -> Vec<String> {
        pod.status
            .and_then(|s| s.resource_claim_statuses)
            .unwrap_or_default()
            .into_iter()
            .map(|s| s.name)
            .collect()
    };
    pods.patch_status("p", &apply("other"), &status(&[("x", "cx")]))
        .await
        .unwrap();
    pods.patch_status("p", &apply("me"), &status(&[("a", "ca"), ("b", "cb")]))
        .await
        .unwrap();
    let pod = pods
        .patch_status("p", &apply("me"), &status(&[("b", "cb")]))
        .await
        .unwrap();
    assert_eq!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Running")
    );
    let managers: Vec<String> = pod
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .filter_map(|m| m.manager.clone())
        .collect();
    assert_eq!(managers, ["other", "me"]);
    assert_eq!(names(pod), ["x", "b"], "a was left out by its applier");
    let refused = pods
        .patch_status("p", &PatchParams::default(), &status(&[("c", "cc")]))
        .await
        .unwrap_err();
    assert_eq!(code(refused), 400);
}

#[tokio::test]
async fn pod_status_is_reset_on_create() {
    let mem = MemApi::new();
    let pods: Api<Pod> = Api::namespaced(mem.client(), "default");
    let pod: Pod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
        "status": {"phase": "Running"}
    }))
    .unwrap();
    let p = pods.create(&PostParams::default(), &pod).await.unwrap();
    assert_eq!(p.status.unwrap().phase.as_deref(), Some("Pending"));
}

#[tokio::test]
async fn pod_status_updates_take_the_status_only_and_check_the_version() {
    let mem = MemApi::new();
    let pods: Api<Pod> = Api::namespaced(mem.client(), "default");
    let pod: Pod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "busybox"}],
                 "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "t"}]}
    }))
    .unwrap();
    let created = pods.create(&PostParams::default(), &pod).await.unwrap();

    // PUT /status records the generated claim names; the spec stays.
    let mut recorded = created.clone();
    recorded.status = Some(
        serde_json::from_value(json!({"phase": "Pending", "resourceClaimStatuses": [
            {"name": "gpu", "resourceClaimName": "p-gpu-x6zgt"}]}))
        .unwrap(),
    );
    recorded.spec.as_mut().unwrap().node_name = Some("ignored".into());
    let stored = pods
        .replace_status("p", &PostParams::default(), &recorded)
        .await
        .unwrap();
    assert_eq!(stored.spec.as_ref().unwrap().node_name, None);
    let statuses = stored
        .status
        .as_ref()
        .and_then(|s| s.resource_claim_statuses.clone())
        .unwrap();
    assert_eq!(
        statuses[0].resource_claim_name.as_deref(),
        Some("p-gpu-x6zgt")
    );
    assert_ne!(
        stored.metadata.resource_version,
        created.metadata.resource_version
    );

    // A status written from a stale copy is a conflict and changes nothing.
    let err = pods
        .replace_status("p", &PostParams::default(), &created)
        .await
        .unwrap_err();
    assert_eq!(code(err), 409);

    // A main-resource update keeps the stored status.
    let mut relabelled = stored.clone();
    relabelled.metadata.labels = Some([("a".to_string(), "b".to_string())].into());
    relabelled.status = None;
    let relabelled = pods
        .replace("p", &PostParams::default(), &relabelled)
        .await
        .unwrap();
    assert_eq!(
        relabelled.status.and_then(|s| s.resource_claim_statuses),
        Some(statuses)
    );
    assert_eq!(
        mem.requests()
            .count(memapi::Verb::Update, "pods", Some("status")),
        2
    );
}

#[tokio::test]
async fn an_api_the_server_does_not_serve_is_a_plain_404() {
    let api = MemApi::new();
    let client = api.client();
    // As a real apiserver's mux answers a group version it has no handler
    // for: a plain-text body, no `Status`.
    let request = http::Request::get("/apis/resource.k8s.io/v9")
        .body(Vec::new())
        .unwrap();
    let error = client.request_text(request).await.unwrap_err();
    match error {
        kube::Error::Api(status) => {
            assert_eq!(status.code, 404);
            assert!(status.message.contains("404 page not found"), "{status:?}");
        }
        other => panic!("expected a 404, got {other:?}"),
    }
    let served = client
        .list_api_group_resources("resource.k8s.io/v1")
        .await
        .unwrap();
    assert!(served.resources.iter().any(|r| r.name == "resourceclaims"));
}

/// TokenReview and SubjectAccessReview answer from the test's table and
/// store nothing.
#[tokio::test]
async fn reviews_answer_from_the_tokens_and_grants_a_test_sets() {
    use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
    use k8s_openapi::api::authorization::v1::{
        NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
    };
    let mem = MemApi::new();
    mem.add_token("secret", "prometheus", &["monitoring"]);
    mem.grant("monitoring", "/metrics", "get");
    let reviews: Api<TokenReview> = Api::all(mem.client());
    let review = |token: &str| TokenReview {
        spec: TokenReviewSpec {
            token: Some(token.to_string()),
            ..Default::default()
        },
        ..Default::default()
    };
    let answer = reviews
        .create(&PostParams::default(), &review("secret"))
        .await
        .unwrap()
        .status
        .unwrap();
    assert_eq!(answer.authenticated, Some(true));
    let user = answer.user.unwrap();
    assert_eq!(user.username.as_deref(), Some("prometheus"));
    let forged = reviews
        .create(&PostParams::default(), &review("forged"))
        .await
        .unwrap();
    assert_eq!(forged.status.unwrap().authenticated, Some(false));

    let access: Api<SubjectAccessReview> = Api::all(mem.client());
    let allowed = |path: &str| {
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: user.username.clone(),
                groups: user.groups.clone(),
                non_resource_attributes: Some(NonResourceAttributes {
                    path: Some(path.to_string()),
                    verb: Some("get".to_string()),
                }),
                ..Default::default()
            },
            ..Default::default()
        };
        let access = access.clone();
        async move {
            access
                .create(&PostParams::default(), &review)
                .await
                .unwrap()
                .status
                .unwrap()
                .allowed
        }
    };
    assert!(allowed("/metrics").await);
    assert!(!allowed("/explain/ns/claim").await);
    assert_eq!(
        mem.requests()
            .count(memapi::Verb::Create, "tokenreviews", None),
        2
    );
    assert!(
        reviews.list(&Default::default()).await.is_err(),
        "a review is answered, not stored"
    );
}

/// `metadata.generation` as kube-apiserver keeps it: PVs (as every core
/// kind of 1.20) have none and no write gives them one; a DeviceClass
/// starts at 1 and counts each change of its spec; no request sets it.
#[tokio::test]
async fn generation_is_counted_only_where_the_kinds_strategy_counts_it() {
    use k8s_openapi::api::resource::v1::DeviceClass;
    let mem = MemApi::new();
    let volumes: Api<PersistentVolume> = Api::all(mem.client());
    let created = volumes
        .create(&PostParams::default(), &pv("a", "1Gi"))
        .await
        .unwrap();
    assert_eq!(created.metadata.generation, None);
    let mut changed = created.clone();
    changed.spec.as_mut().unwrap().storage_class_name = Some("gold".into());
    changed.metadata.generation = Some(7);
    let updated = volumes
        .replace("a", &PostParams::default(), &changed)
        .await
        .unwrap();
    assert_eq!(
        updated.metadata.generation, None,
        "a spec change counts nothing"
    );
    let patched = volumes
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"storageClassName": "silver"}})),
        )
        .await
        .unwrap();
    assert_eq!(patched.metadata.generation, None);

    let classes: Api<DeviceClass> = Api::all(mem.client());
    let class: DeviceClass = serde_json::from_value(json!({
        "metadata": {"name": "gpu", "generation": 5},
        "spec": {},
    }))
    .unwrap();
    let created = classes
        .create(&PostParams::default(), &class)
        .await
        .unwrap();
    assert_eq!(created.metadata.generation, Some(1), "set on create");
    let relabelled = classes
        .patch(
            "gpu",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"a": "b"}, "generation": 9}})),
        )
        .await
        .unwrap();
    assert_eq!(
        relabelled.metadata.generation,
        Some(1),
        "metadata is not the spec"
    );
    let respecified = classes
        .patch(
            "gpu",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"selectors": [{"cel": {"expression": "true"}}]}})),
        )
        .await
        .unwrap();
    assert_eq!(
        respecified.metadata.generation,
        Some(2),
        "a spec change counts"
    );
}
