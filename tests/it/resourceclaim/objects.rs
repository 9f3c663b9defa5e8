//! The objects of the ResourceClaim controller's tables, with upstream's
//! test names (`test-pod` in `my-namespace`, entry `acme-resource` from
//! template `my-template`), built as JSON so a row fits on a few lines.

use k8s_names::{ANN_POD_CLAIM_NAME, FINALIZER_RESOURCE_DELETE_PROTECTION};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceClaimTemplate};
use serde_json::{Value, json};

pub(crate) const NAMESPACE: &str = "my-namespace";
pub(crate) const POD: &str = "test-pod";
pub(crate) const POD_UID: &str = "uidpod1";
pub(crate) const ENTRY: &str = "acme-resource";
pub(crate) const TEMPLATE: &str = "my-template";
/// The name a seeded generated claim has (the server makes others).
pub(crate) const GENERATED: &str = "test-pod-acme-resource-x6zgt";
/// How a claim the controller generated during the run is named in
/// expectations: its generateName and `*` for the random suffix.
pub(crate) const FRESH: &str = "test-pod-acme-resource-*";
/// The deterministic name of Kubernetes 1.27 and earlier.
pub(crate) const LEGACY: &str = "test-pod-acme-resource";

fn from(value: Value) -> Pod {
    serde_json::from_value(value).expect("pod")
}

/// A pod of `my-namespace` without claims.
pub(crate) fn pod(name: &str, uid: &str) -> Pod {
    from(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": { "name": name, "namespace": NAMESPACE, "uid": uid },
        "spec": { "containers": [ { "name": "c", "image": "busybox" } ] },
        "status": { "phase": "Pending" },
    }))
}

/// `test-pod` without claims.
pub(crate) fn test_pod() -> Pod {
    pod(POD, POD_UID)
}

/// `test-pod-II`, another pod.
pub(crate) fn other_pod() -> Pod {
    pod("test-pod-II", "uidpod1-II")
}

/// Builder-style changes of a pod.
pub(crate) trait PodExt: Sized {
    /// Adds an entry `entry` from template `template`.
    fn template_claim(self, entry: &str, template: &str) -> Self;
    /// Adds an entry `entry` naming the claim `claim`.
    fn named_claim(self, entry: &str, claim: &str) -> Self;
    /// Records `claim` (or no claim needed) for `entry` in the status.
    fn recorded(self, entry: &str, claim: Option<&str>) -> Self;
    /// Sets the phase.
    fn phase(self, phase: &str) -> Self;
    /// Schedules the pod to `worker`.
    fn scheduled(self) -> Self;
    /// Marks the pod as being deleted.
    fn deleting(self) -> Self;
}

impl PodExt for Pod {
    fn template_claim(mut self, entry: &str, template: &str) -> Self {
        let spec = self.spec.get_or_insert_with(Default::default);
        spec.resource_claims.get_or_insert_with(Vec::new).push(
            serde_json::from_value(json!({ "name": entry, "resourceClaimTemplateName": template }))
                .expect("entry"),
        );
        self
    }

    fn named_claim(mut self, entry: &str, claim: &str) -> Self {
        let spec = self.spec.get_or_insert_with(Default::default);
        spec.resource_claims.get_or_insert_with(Vec::new).push(
            serde_json::from_value(json!({ "name": entry, "resourceClaimName": claim }))
                .expect("entry"),
        );
        self
    }

    fn recorded(mut self, entry: &str, claim: Option<&str>) -> Self {
        let status = self.status.get_or_insert_with(Default::default);
        status
            .resource_claim_statuses
            .get_or_insert_with(Vec::new)
            .push(
                serde_json::from_value(json!({ "name": entry, "resourceClaimName": claim }))
                    .expect("status"),
            );
        self
    }

    fn phase(mut self, phase: &str) -> Self {
        self.status.get_or_insert_with(Default::default).phase = Some(phase.to_string());
        self
    }

    fn scheduled(mut self) -> Self {
        self.spec.get_or_insert_with(Default::default).node_name = Some("worker".to_string());
        self
    }

    fn deleting(mut self) -> Self {
        self.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
            ));
        self.metadata.finalizers = Some(vec!["test/keep".to_string()]);
        self
    }
}

/// `test-pod` with the entry `acme-resource` from `my-template`.
pub(crate) fn pod_with_resource() -> Pod {
    test_pod().template_claim(ENTRY, TEMPLATE)
}

fn owner(pod: &Pod) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "name": pod.metadata.name, "uid": pod.metadata.uid,
        "controller": true,
    })
}

/// A claim `name` of `namespace`, controlled by `owner` when given.
pub(crate) fn claim(name: &str, namespace: &str, owner_pod: Option<&Pod>) -> ResourceClaim {
    serde_json::from_value(json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {
            "name": name, "namespace": namespace,
            "ownerReferences": owner_pod.map(|p| vec![owner(p)]),
        },
        "spec": {},
    }))
    .expect("claim")
}

/// `test-pod-acme-resource`, owned by `test-pod` (upstream's `testClaim`).
pub(crate) fn test_claim() -> ResourceClaim {
    claim(LEGACY, NAMESPACE, Some(&pod_with_resource()))
}

/// A claim generated for `test-pod`'s entry, named `name`.
pub(crate) fn generated_named(name: &str) -> ResourceClaim {
    let mut claim = claim(name, NAMESPACE, Some(&pod_with_resource()));
    claim.metadata.generate_name = Some("test-pod-acme-resource-".to_string());
    claim.metadata.annotations = Some([(ANN_POD_CLAIM_NAME.to_string(), ENTRY.to_string())].into());
    claim
}

/// A claim generated for `test-pod`'s entry `entry`, named
/// `test-pod-<entry>-<suffix>` (`*` for one the server names during a run).
pub(crate) fn generated_for(entry: &str, suffix: &str) -> ResourceClaim {
    let prefix = format!("{POD}-{entry}-");
    let mut claim = claim(
        &format!("{prefix}{suffix}"),
        NAMESPACE,
        Some(&pod_with_resource()),
    );
    claim.metadata.generate_name = Some(prefix);
    claim.metadata.annotations = Some([(ANN_POD_CLAIM_NAME.to_string(), entry.to_string())].into());
    claim
}

/// The claim generated for `test-pod`'s entry (upstream's
/// `generatedTestClaim`), seeded under [`GENERATED`].
pub(crate) fn generated_claim() -> ResourceClaim {
    generated_named(GENERATED)
}

/// The claim the controller generates during a run, named [`FRESH`].
pub(crate) fn fresh_claim() -> ResourceClaim {
    generated_named(FRESH)
}

/// Builder-style changes of a claim.
pub(crate) trait ClaimExt: Sized {
    /// Gives the claim an (empty) allocation.
    fn allocated(self) -> Self;
    /// Reserves the claim for `pod`.
    fn reserved_for(self, pod: &Pod) -> Self;
    /// Adds the scheduler's finalizer (upstream's `structuredParameters`).
    fn structured(self) -> Self;
    /// Marks it as being deleted.
    fn deleting(self) -> Self;
    /// Removes its owner references.
    fn without_owner(self) -> Self;
    /// Reserves the claim for a consumer that is not a pod.
    fn reserved_for_thing(self) -> Self;
}

impl ClaimExt for ResourceClaim {
    fn allocated(mut self) -> Self {
        self.status.get_or_insert_with(Default::default).allocation = Some(Default::default());
        self
    }

    fn reserved_for(mut self, pod: &Pod) -> Self {
        let status = self.status.get_or_insert_with(Default::default);
        status.reserved_for.get_or_insert_with(Vec::new).push(
            serde_json::from_value(json!({
                "resource": "pods", "name": pod.metadata.name, "uid": pod.metadata.uid,
            }))
            .expect("consumer"),
        );
        self
    }

    fn structured(mut self) -> Self {
        self.metadata
            .finalizers
            .get_or_insert_with(Vec::new)
            .push(FINALIZER_RESOURCE_DELETE_PROTECTION.to_string());
        self
    }

    fn deleting(mut self) -> Self {
        self.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
            ));
        self
    }

    fn without_owner(mut self) -> Self {
        self.metadata.owner_references = None;
        self
    }

    fn reserved_for_thing(mut self) -> Self {
        let status = self.status.get_or_insert_with(Default::default);
        status.reserved_for.get_or_insert_with(Vec::new).push(
            serde_json::from_value(json!({
                "apiGroup": "example.com", "resource": "things", "name": "thing", "uid": "thing-uid",
            }))
            .expect("consumer"),
        );
        self
    }
}

/// `my-template` of `my-namespace`.
pub(crate) fn template() -> ResourceClaimTemplate {
    template_with(TEMPLATE, &json!({}))
}

/// A template `name` of `my-namespace` whose claims have `spec`.
pub(crate) fn template_with(name: &str, spec: &Value) -> ResourceClaimTemplate {
    serde_json::from_value(json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
        "metadata": { "name": name, "namespace": NAMESPACE },
        "spec": { "spec": spec },
    }))
    .expect("template")
}

/// A claim spec whose one request asks for admin access.
fn admin_access_spec() -> Value {
    json!({ "devices": { "requests": [
        { "name": "req-0", "exactly": { "deviceClassName": "class", "adminAccess": true } },
    ] } })
}

/// `my-template` asking for admin access (upstream's
/// `templateWithAdminAccess`).
pub(crate) fn template_with_admin_access() -> ResourceClaimTemplate {
    template_with(TEMPLATE, &admin_access_spec())
}

/// `my-template` with a prioritized list of subrequests.
pub(crate) fn template_with_prioritized_list() -> ResourceClaimTemplate {
    template_with(
        TEMPLATE,
        &json!({ "devices": { "requests": [
            { "name": "req-0", "firstAvailable": [ { "name": "sub-0", "deviceClassName": "class" } ] },
        ] } }),
    )
}

/// The claim with the spec of [`template_with_admin_access`].
pub(crate) fn with_admin_access(mut claim: ResourceClaim) -> ResourceClaim {
    claim.spec = serde_json::from_value(admin_access_spec()).expect("spec");
    claim
}
