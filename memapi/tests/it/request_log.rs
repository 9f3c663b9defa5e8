//! What the request log keeps of each write: the preconditions it named
//! and the resourceVersions it committed, so a test can tie every change
//! to its request and prove a client's writes conditional.

use crate::support::{code, pv};
use k8s_openapi::api::core::v1::PersistentVolume;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use memapi::{MemApi, Preconditions as Named, RequestLogEntry, Verb};
use serde_json::json;
use tower::ServiceExt;

fn named(rv: Option<&str>, uid: Option<&str>) -> Named {
    Named {
        resource_version: rv.map(str::to_owned),
        uid: uid.map(str::to_owned),
    }
}

fn last(mem: &MemApi) -> RequestLogEntry {
    mem.requests().log().last().cloned().unwrap()
}

#[tokio::test]
async fn a_write_is_logged_with_its_preconditions_and_its_commits() {
    let mem = MemApi::new();
    let pvs: Api<PersistentVolume> = Api::all(mem.client());
    let created = pvs
        .create(&PostParams::default(), &pv("pv1", "1Gi"))
        .await
        .unwrap();
    let entry = last(&mem);
    assert_eq!(
        (entry.preconditions, entry.apply),
        (Named::default(), false)
    );
    assert_eq!(
        entry.commits,
        mem.resource_version()..mem.resource_version() + 1
    );
    let (rv, uid) = (
        created.metadata.resource_version.clone().unwrap(),
        created.metadata.uid.clone().unwrap(),
    );

    // An update names the version and UID of its body.
    let mut labelled = created.clone();
    labelled.metadata.labels = Some([("z".to_string(), "1".to_string())].into());
    pvs.replace("pv1", &PostParams::default(), &labelled)
        .await
        .unwrap();
    assert_eq!(last(&mem).preconditions, named(Some(&rv), Some(&uid)));

    // A merge patch names what its metadata carries, or nothing; one the
    // server refuses commits nothing.
    let stale =
        json!({ "metadata": { "resourceVersion": rv, "uid": uid, "labels": { "a": "1" } } });
    let err = pvs
        .patch("pv1", &PatchParams::default(), &Patch::Merge(&stale))
        .await
        .unwrap_err();
    assert_eq!(code(err), 409);
    let entry = last(&mem);
    assert_eq!(entry.preconditions, named(Some(&rv), Some(&uid)));
    assert!(entry.commits.is_empty(), "{entry:?}");
    let blind = json!({ "metadata": { "labels": { "a": "1" } } });
    pvs.patch("pv1", &PatchParams::default(), &Patch::Merge(&blind))
        .await
        .unwrap();
    let entry = last(&mem);
    assert_eq!(entry.preconditions, Named::default());
    assert_eq!(
        entry.commits,
        mem.resource_version()..mem.resource_version() + 1
    );

    // A JSON patch names the version it tests.
    let now = mem.resource_version().to_string();
    let tested = json!([
        { "op": "test", "path": "/metadata/resourceVersion", "value": now },
        { "op": "add", "path": "/metadata/labels/b", "value": "2" },
    ]);
    let req = http::Request::patch("/api/v1/persistentvolumes/pv1")
        .header("content-type", "application/json-patch+json")
        .body(kube::client::Body::from(tested.to_string().into_bytes()))
        .unwrap();
    let resp = mem.service().oneshot(req).await.unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(last(&mem).preconditions, named(Some(&now), None));

    // A server-side apply is told apart.
    let applied = json!({ "apiVersion": "v1", "kind": "PersistentVolume", "metadata": { "name": "pv1", "labels": { "c": "3" } } });
    pvs.patch(
        "pv1",
        &PatchParams::apply("tester"),
        &Patch::Apply(&applied),
    )
    .await
    .unwrap();
    let entry = last(&mem);
    assert_eq!((entry.verb, entry.apply), (Verb::Patch, true));

    // A delete names its options' preconditions.
    let params = DeleteParams {
        preconditions: Some(Preconditions {
            uid: Some(uid.clone()),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    pvs.delete("pv1", &params).await.unwrap();
    let entry = last(&mem);
    assert_eq!(entry.preconditions, named(None, Some(&uid)));
    assert_eq!(
        entry.commits,
        mem.resource_version()..mem.resource_version() + 1
    );
}
