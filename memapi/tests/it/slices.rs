//! resource.k8s.io/v1 ResourceSlices: field selectors (the empty node
//! name included), DeleteCollection, validation, optimistic concurrency,
//! delete preconditions, and the fields a server with feature gates off
//! drops.

use super::support::code;
use k8s_openapi::api::resource::v1::ResourceSlice;
use kube::api::{Api, DeleteParams, ListParams, PostParams, Preconditions};
use memapi::{MemApi, Verb};
use serde_json::{Value, json};

fn slice(name: &str, driver: &str, node: Option<&str>, pool: &str) -> ResourceSlice {
    let mut spec = json!({
        "driver": driver,
        "pool": { "name": pool, "generation": 1, "resourceSliceCount": 1 },
        "devices": [{ "name": "gpu-0", "attributes": { "model": { "string": "a100" } } }],
    });
    match node {
        Some(n) => spec["nodeName"] = json!(n),
        None => spec["allNodes"] = json!(true),
    }
    serde_json::from_value(json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
        "metadata": { "name": name }, "spec": spec,
    }))
    .unwrap()
}

fn names(slices: &[ResourceSlice]) -> Vec<String> {
    let mut out: Vec<String> = slices
        .iter()
        .map(|s| s.metadata.name.clone().unwrap())
        .collect();
    out.sort();
    out
}

async fn seeded() -> (MemApi, Api<ResourceSlice>) {
    let mem = MemApi::new();
    let api: Api<ResourceSlice> = Api::all(mem.client());
    for s in [
        slice("a1", "a.example.com", Some("node-1"), "node-1"),
        slice("a2", "a.example.com", Some("node-2"), "node-2"),
        slice("b1", "b.example.com", Some("node-1"), "node-1"),
        slice("an", "a.example.com", None, "net"),
    ] {
        api.create(&PostParams::default(), &s).await.unwrap();
    }
    (mem, api)
}

#[tokio::test]
async fn field_selectors_match_driver_node_pool_and_the_empty_node() {
    let (_mem, api) = seeded().await;
    let list = |sel: &'static str| {
        let api = api.clone();
        async move {
            names(
                &api.list(&ListParams::default().fields(sel))
                    .await
                    .unwrap()
                    .items,
            )
        }
    };
    assert_eq!(
        list("spec.driver=a.example.com,spec.nodeName=node-1").await,
        ["a1"]
    );
    assert_eq!(
        list("spec.driver=a.example.com,spec.nodeName=").await,
        ["an"]
    );
    assert_eq!(list("spec.pool.name=node-1").await, ["a1", "b1"]);
    assert_eq!(list("spec.nodeName!=node-1").await, ["a2", "an"]);
}

#[tokio::test]
async fn delete_collection_removes_only_the_selected_slices() {
    let (mem, api) = seeded().await;
    let delete_where = |fields: &'static str| {
        let api = api.clone();
        async move {
            api.delete_collection(
                &DeleteParams::default(),
                &ListParams::default().fields(fields),
            )
            .await
            .unwrap()
            .left()
            .unwrap()
            .items
        }
    };
    assert_eq!(
        names(&delete_where("spec.nodeName=node-1").await),
        ["a1", "b1"]
    );
    assert_eq!(names(&mem.list::<ResourceSlice>()), ["a2", "an"]);
    assert_eq!(
        mem.requests()
            .count(Verb::DeleteCollection, "resourceslices", None),
        1
    );
    assert!(delete_where("spec.nodeName=node-9").await.is_empty());
}

#[tokio::test]
async fn generate_name_updates_and_delete_preconditions() {
    let mem = MemApi::new();
    let api: Api<ResourceSlice> = Api::all(mem.client());
    let mut s = slice("", "a.example.com", Some("node-1"), "node-1");
    s.metadata.name = None;
    s.metadata.generate_name = Some("00000-a.example.com-node-1-".into());
    let created = api.create(&PostParams::default(), &s).await.unwrap();
    let name = created.metadata.name.clone().unwrap();
    assert_eq!(name.len(), "00000-a.example.com-node-1-".len() + 5);

    let mut stale = created.clone();
    let mut changed = created.clone();
    changed.spec.pool.generation = 2;
    let updated = api
        .replace(&name, &PostParams::default(), &changed)
        .await
        .unwrap();
    stale.spec.pool.generation = 3;
    let err = api
        .replace(&name, &PostParams::default(), &stale)
        .await
        .unwrap_err();
    assert_eq!(code(err), 409);

    let mut moved = updated.clone();
    moved.spec.node_name = Some("node-2".into());
    moved.spec.pool.name = "node-2".into();
    let err = api
        .replace(&name, &PostParams::default(), &moved)
        .await
        .unwrap_err();
    assert_eq!(code(err), 422, "nodeName and pool name are immutable");

    let wrong = DeleteParams {
        preconditions: Some(Preconditions {
            uid: created.metadata.uid.clone(),
            resource_version: created.metadata.resource_version.clone(),
        }),
        ..DeleteParams::default()
    };
    assert_eq!(code(api.delete(&name, &wrong).await.unwrap_err()), 409);
    let right = DeleteParams {
        preconditions: Some(Preconditions {
            uid: updated.metadata.uid.clone(),
            resource_version: updated.metadata.resource_version.clone(),
        }),
        ..DeleteParams::default()
    };
    api.delete(&name, &right).await.unwrap();
    assert!(mem.list::<ResourceSlice>().is_empty());
}

#[tokio::test]
async fn invalid_slices_are_refused_with_422() {
    let mem = MemApi::new();
    let api: Api<ResourceSlice> = Api::all(mem.client());
    let mut no_node = slice("s1", "a.example.com", Some("node-1"), "node-1");
    no_node.spec.node_name = None;
    assert_eq!(
        code(
            api.create(&PostParams::default(), &no_node)
                .await
                .unwrap_err()
        ),
        422
    );
    let mut many = slice("s2", "a.example.com", Some("node-1"), "node-1");
    let device = many.spec.devices.as_ref().unwrap()[0].clone();
    many.spec.devices = Some(
        (0..129)
            .map(|i| {
                let mut d = device.clone();
                d.name = format!("gpu-{i}");
                d
            })
            .collect(),
    );
    assert_eq!(
        code(api.create(&PostParams::default(), &many).await.unwrap_err()),
        422
    );
    assert!(mem.list::<ResourceSlice>().is_empty());
}

#[tokio::test]
async fn dropped_fields_are_not_stored() {
    let mem = MemApi::new();
    mem.drop_fields(
        "resourceslices",
        &["spec.devices[].taints", "spec.perDeviceNodeSelection"],
    )
    .unwrap();
    let api: Api<ResourceSlice> = Api::all(mem.client());
    let mut s: Value =
        serde_json::to_value(slice("s1", "a.example.com", Some("node-1"), "p")).unwrap();
    s["spec"]["devices"][0]["taints"] = json!([{ "key": "k", "effect": "NoSchedule" }]);
    let s: ResourceSlice = serde_json::from_value(s).unwrap();
    let stored = api.create(&PostParams::default(), &s).await.unwrap();
    assert_eq!(stored.spec.devices.as_ref().unwrap()[0].taints, None);
    let mut again = s.clone();
    again.metadata.resource_version = stored.metadata.resource_version.clone();
    let again = api
        .replace("s1", &PostParams::default(), &again)
        .await
        .unwrap();
    assert_eq!(again.spec.devices.unwrap()[0].taints, None);
    assert!(mem.drop_fields("nosuchthings", &[]).is_err());
}
