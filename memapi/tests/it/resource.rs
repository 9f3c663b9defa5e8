//! resource.k8s.io/v1: ResourceClaim (with its status subresource),
//! ResourceClaimTemplate and DeviceClass, names generated as the API
//! server makes them, and pod status writes of `resourceClaimStatuses`.

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceClaimTemplate};
use kube::api::{Api, PostParams};
use memapi::MemApi;
use serde_json::json;

/// The alphabet of the API server's random name suffixes.
const SUFFIX_ALPHABET: &str = "bcdfghjklmnpqrstvwxz2456789";

fn claim(generate_name: &str) -> ResourceClaim {
    serde_json::from_value(json!({
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": { "generateName": generate_name, "namespace": "default" },
        "spec": { "devices": { "requests": [
            { "name": "gpu", "exactly": { "deviceClassName": "gpu.example.com" } }
        ] } },
        "status": { "reservedFor": [ { "resource": "pods", "name": "p", "uid": "u" } ] },
    }))
    .unwrap()
}

#[tokio::test]
async fn generated_claim_names_get_five_characters_of_the_apiserver_alphabet() {
    let mem = MemApi::new();
    let claims: Api<ResourceClaim> = Api::namespaced(mem.client(), "default");
    let mut names = Vec::new();
    for _ in 0..20 {
        let created = claims
            .create(&PostParams::default(), &claim("my-pod-resource-1a-"))
            .await
            .unwrap();
        let name = created.metadata.name.unwrap();
        let suffix = name.strip_prefix("my-pod-resource-1a-").unwrap();
        assert_eq!(suffix.len(), 5, "{name}");
        assert!(
            suffix.chars().all(|c| SUFFIX_ALPHABET.contains(c)),
            "{name}"
        );
        names.push(name);
    }
    names.sort();
    names.dedup();
    assert_eq!(names.len(), 20);
}

#[tokio::test]
async fn a_long_generate_name_is_cut_to_58_characters() {
    let mem = MemApi::new();
    let claims: Api<ResourceClaim> = Api::namespaced(mem.client(), "default");
    let prefix = "a".repeat(70);
    let created = claims
        .create(&PostParams::default(), &claim(&prefix))
        .await
        .unwrap();
    let name = created.metadata.name.unwrap();
    assert_eq!(name.len(), 63);
    assert!(name.starts_with(&"a".repeat(58)));
}

#[tokio::test]
async fn claim_status_is_written_only_through_the_subresource() {
    let mem = MemApi::new();
    let claims: Api<ResourceClaim> = Api::namespaced(mem.client(), "default");
    let created = claims
        .create(&PostParams::default(), &claim("c-"))
        .await
        .unwrap();
    assert_eq!(created.status, None, "a create drops the status");
    let name = created.metadata.name.clone().unwrap();

    let mut with_status = created.clone();
    with_status.status = Some(
        serde_json::from_value(
            json!({ "reservedFor": [ { "resource": "pods", "name": "p", "uid": "u" } ] }),
        )
        .unwrap(),
    );
    with_status.metadata.labels = Some([("a".to_string(), "b".to_string())].into());
    let updated = claims
        .replace(&name, &PostParams::default(), &with_status)
        .await
        .unwrap();
    assert_eq!(
        updated.status, None,
        "a main update keeps the stored status"
    );
    assert!(updated.metadata.labels.is_some());

    let mut status_write = updated.clone();
    status_write.status = with_status.status.clone();
    status_write.metadata.labels = None;
    let written = claims
        .replace_status(&name, &PostParams::default(), &status_write)
        .await
        .unwrap();
    let reserved = written.status.unwrap().reserved_for.unwrap();
    assert_eq!(reserved[0].uid, "u");
    assert!(
        written.metadata.labels.is_some(),
        "a status write changes no metadata"
    );
}

#[tokio::test]
async fn templates_and_device_classes_are_served() {
    let mem = MemApi::new();
    let templates: Api<ResourceClaimTemplate> = Api::namespaced(mem.client(), "default");
    let template: ResourceClaimTemplate = serde_json::from_value(json!({
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": { "name": "gpu" },
        "spec": { "metadata": { "labels": { "app": "demo" } }, "spec": {} },
    }))
    .unwrap();
    templates
        .create(&PostParams::default(), &template)
        .await
        .unwrap();
    assert_eq!(
        templates
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .len(),
        1
    );

    let classes: Api<DeviceClass> = Api::all(mem.client());
    let class: DeviceClass = serde_json::from_value(json!({
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": { "name": "gpu.example.com" },
        "spec": {},
    }))
    .unwrap();
    classes
        .create(&PostParams::default(), &class)
        .await
        .unwrap();
    assert!(classes.get("gpu.example.com").await.is_ok());
}

#[tokio::test]
async fn pod_status_write_records_resource_claim_statuses_and_keeps_the_spec() {
    let mem = MemApi::new();
    let pods: Api<Pod> = Api::namespaced(mem.client(), "default");
    let pod: Pod = serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": { "name": "p" },
        "spec": {
            "containers": [ { "name": "c", "image": "busybox" } ],
            "resourceClaims": [ { "name": "gpu", "resourceClaimTemplateName": "gpu" } ],
        },
    }))
    .unwrap();
    let created = pods.create(&PostParams::default(), &pod).await.unwrap();
    let mut write = created.clone();
    write.spec.as_mut().unwrap().node_name = Some("elsewhere".to_string());
    write.status.as_mut().unwrap().resource_claim_statuses = Some(vec![
        serde_json::from_value(json!({ "name": "gpu", "resourceClaimName": "p-gpu-x6zgt" }))
            .unwrap(),
    ]);
    let written = pods
        .replace_status("p", &PostParams::default(), &write)
        .await
        .unwrap();
    let statuses = written.status.unwrap().resource_claim_statuses.unwrap();
    assert_eq!(
        statuses[0].resource_claim_name.as_deref(),
        Some("p-gpu-x6zgt")
    );
    assert_eq!(
        written.spec.unwrap().node_name,
        None,
        "status writes keep the spec"
    );
}
