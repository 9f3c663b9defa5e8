//! Upstream's `TestResourceClaimEventHandler`,
//! `TestResourceClaimTemplateEventHandler` and
//! `TestEnqueuePodExtendedResourceClaims`, on the handlers themselves: what
//! each change queues, and the claim gauge after each step. The process
//! running on memapi covers the same in tests/it/resourceclaim.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceClaimTemplate};
use serde_json::{Value, json};

use super::Handlers;
use crate::resourceclaim::claims::ClaimStore;
use crate::resourceclaim::controller::triage::{named_claims, named_templates};
use crate::resourceclaim::controller_base::{PODS_BY_RESOURCE_CLAIM, PODS_BY_TEMPLATE};
use crate::resourceclaim::deleted::DeletedPods;
use crate::resourceclaim::metrics::ClaimMetrics;
use crate::runtime::informer::{Change, MemStore, Store};
use crate::runtime::keys::ObjectKey;
use crate::runtime::metrics::Metrics;
use crate::runtime::queue::WorkQueue;
use crate::runtime::runner::Leading;

const NAMESPACE: &str = "my-namespace";

struct Fixture {
    handlers: Handlers,
    metrics: Metrics,
}

fn fixture() -> Fixture {
    let pods = Arc::new(MemStore::<Pod>::default());
    pods.add_index(PODS_BY_RESOURCE_CLAIM, named_claims);
    pods.add_index(PODS_BY_TEMPLATE, named_templates);
    let claims = Arc::new(ClaimStore::default());
    let metrics = Metrics::new().unwrap();
    ClaimMetrics::new(&metrics, Arc::clone(&claims)).unwrap();
    let leading = Leading::default();
    leading.set(true);
    Fixture {
        handlers: Handlers {
            pods,
            claims,
            deleted: Arc::new(DeletedPods::new(10)),
            queue: WorkQueue::new(),
            leading,
        },
        metrics,
    }
}

impl Fixture {
    /// The keys queued since the last look, in order.
    async fn queued(&self) -> Vec<String> {
        let mut keys = Vec::new();
        while !self.handlers.queue.is_empty() {
            let key = self.handlers.queue.get().await.unwrap();
            self.handlers.queue.done(&key);
            keys.push(key.to_string());
        }
        keys
    }

    fn claim_seen(&self, claim: &ResourceClaim) {
        let claim = Arc::new(claim.clone());
        self.handlers.claims.watched(&claim);
        self.handlers.on_claim(&Change::Applied {
            object: &claim,
            listing: false,
        });
    }

    fn claim_gone(&self, claim: &ResourceClaim) {
        let key = ObjectKey::of(claim);
        let last = self.handlers.claims.forget(&key);
        self.handlers.on_claim(&Change::Deleted {
            key: &key,
            last: last.as_ref(),
        });
    }

    fn pod_seen(&self, pod: &Pod) {
        let pod = Arc::new(pod.clone());
        self.handlers.pods.watched(&pod);
        self.handlers.on_pod(&Change::Applied {
            object: &pod,
            listing: false,
        });
    }

    fn pod_gone(&self, pod: &Pod) {
        let key = ObjectKey::of(pod);
        let last = self.handlers.pods.forget(&key);
        self.handlers.on_pod(&Change::Deleted {
            key: &key,
            last: last.as_ref(),
        });
    }

    fn template_seen(&self, template: &ResourceClaimTemplate) {
        let template = Arc::new(template.clone());
        self.handlers.on_template(&Change::Applied {
            object: &template,
            listing: false,
        });
    }

    /// The non-zero `resource_claims` series, as "allocated/admin/source".
    fn gauge(&self) -> BTreeMap<String, i64> {
        let text = self.metrics.render().unwrap();
        text.lines()
            .filter_map(|line| line.strip_prefix("resourceclaim_controller_resource_claims{"))
            .map(|line| {
                let (labels, value) = line.split_once("} ").unwrap();
                let label = |name: &str| {
                    labels
                        .split(',')
                        .find_map(|pair| pair.strip_prefix(&format!("{name}=\"")))
                        .map(|v| v.trim_end_matches('"').to_string())
                        .unwrap()
                };
                (
                    format!(
                        "{}/{}/{}",
                        label("allocated"),
                        label("admin_access"),
                        label("source")
                    ),
                    value.parse().unwrap(),
                )
            })
            .collect()
    }
}

fn gauge(entries: &[(&str, i64)]) -> BTreeMap<String, i64> {
    entries
        .iter()
        .map(|(k, v)| ((*k).to_string(), *v))
        .collect()
}

fn claim(name: &str, annotations: &Value, spec: &Value) -> ResourceClaim {
    serde_json::from_value(json!({
        "metadata": {
            "name": name, "namespace": NAMESPACE, "uid": format!("uid-{name}"),
            "annotations": annotations,
            "ownerReferences": [ { "apiVersion": "v1", "kind": "Pod", "name": "test-pod", "uid": "uidpod1", "controller": true } ],
        },
        "spec": spec,
    }))
    .unwrap()
}

fn labelled(mut claim: ResourceClaim, value: &str) -> ResourceClaim {
    claim.metadata.labels = Some([("foo".to_string(), value.to_string())].into());
    claim
}

fn allocated(mut claim: ResourceClaim) -> ResourceClaim {
    claim.status = serde_json::from_value(json!({ "allocation": {} })).unwrap();
    claim
}

fn renamed(mut claim: ResourceClaim, name: &str) -> ResourceClaim {
    claim.metadata.name = Some(name.to_string());
    claim.metadata.uid = Some(format!("uid-{name}"));
    claim
}

fn admin_spec() -> Value {
    json!({ "devices": { "requests": [ { "name": "req-0", "exactly": { "deviceClassName": "class", "adminAccess": true } } ] } })
}

#[tokio::test]
async fn claim_changes_queue_the_claim_and_move_the_gauge() {
    let f = fixture();
    assert!(f.gauge().is_empty());
    let test_claim = claim("test-pod-acme-resource", &json!(null), &json!({}));
    let key = "claim:my-namespace/test-pod-acme-resource";

    f.claim_seen(&test_claim);
    assert_eq!(f.gauge(), gauge(&[("false/false/", 1)]));
    assert_eq!(f.queued().await, [key]);
    f.claim_seen(&labelled(test_claim.clone(), "bar"));
    assert_eq!(f.gauge(), gauge(&[("false/false/", 1)]));
    assert_eq!(f.queued().await, [key]);
    f.claim_seen(&allocated(test_claim.clone()));
    assert_eq!(f.gauge(), gauge(&[("true/false/", 1)]));
    assert_eq!(f.queued().await, [key]);
    f.claim_seen(&labelled(allocated(test_claim.clone()), "bar2"));
    assert_eq!(f.gauge(), gauge(&[("true/false/", 1)]));
    assert_eq!(f.queued().await, [key]);
    let second = allocated(renamed(test_claim.clone(), "test-pod-acme-resource2"));
    f.claim_seen(&second);
    assert_eq!(f.gauge(), gauge(&[("true/false/", 2)]));
    assert_eq!(
        f.queued().await,
        ["claim:my-namespace/test-pod-acme-resource2"]
    );
    f.claim_seen(&test_claim);
    assert_eq!(f.gauge(), gauge(&[("false/false/", 1), ("true/false/", 1)]));
    assert_eq!(f.queued().await, [key]);
    f.claim_gone(&test_claim);
    assert_eq!(f.gauge(), gauge(&[("true/false/", 1)]));
    assert!(f.queued().await.is_empty(), "a deleted claim is not queued");
    f.claim_gone(&second);
    assert!(f.gauge().is_empty());
    assert!(f.queued().await.is_empty());

    let admin = claim(
        "test-pod-acme-resource--1",
        &json!({ "resource.kubernetes.io/pod-claim-name": "acme-resource" }),
        &admin_spec(),
    );
    f.claim_seen(&admin);
    assert_eq!(
        f.gauge(),
        gauge(&[("false/true/resource_claim_template", 1)])
    );
    f.claim_seen(&labelled(admin.clone(), "bar"));
    f.claim_seen(&allocated(admin.clone()));
    assert_eq!(
        f.gauge(),
        gauge(&[("true/true/resource_claim_template", 1)])
    );
    let admin_copy = allocated(renamed(admin.clone(), "test-pod-acme-resource--12"));
    f.claim_seen(&admin_copy);
    assert_eq!(
        f.gauge(),
        gauge(&[("true/true/resource_claim_template", 2)])
    );
    f.claim_seen(&admin);
    assert_eq!(
        f.gauge(),
        gauge(&[
            ("false/true/resource_claim_template", 1),
            ("true/true/resource_claim_template", 1)
        ])
    );
    f.claim_gone(&admin);
    f.claim_gone(&admin_copy);
    assert!(f.gauge().is_empty());

    let extended = claim(
        "test-pod-extended-resources--1",
        &json!({ "resource.kubernetes.io/extended-resource-claim": "true" }),
        &json!({}),
    );
    f.claim_seen(&extended);
    assert_eq!(f.gauge(), gauge(&[("false/false/extended_resource", 1)]));
    f.claim_seen(&allocated(extended.clone()));
    assert_eq!(f.gauge(), gauge(&[("true/false/extended_resource", 1)]));
    f.claim_seen(&extended);
    assert_eq!(f.gauge(), gauge(&[("false/false/extended_resource", 1)]));
    f.claim_gone(&extended);
    assert!(f.gauge().is_empty());
}

fn pod(namespace: &str, name: &str, uid: &str, claims: &Value, status: &Value) -> Pod {
    serde_json::from_value(json!({
        "metadata": { "name": name, "namespace": namespace, "uid": uid },
        "spec": { "containers": [], "resourceClaims": claims },
        "status": status,
    }))
    .unwrap()
}

fn template(namespace: &str) -> ResourceClaimTemplate {
    serde_json::from_value(json!({
        "metadata": { "name": "my-template", "namespace": namespace },
        "spec": { "spec": {} },
    }))
    .unwrap()
}

#[tokio::test]
async fn a_template_queues_the_pods_of_its_namespace_that_name_it() {
    let f = fixture();
    let entry = json!([ { "name": "acme-resource", "resourceClaimTemplateName": "my-template" } ]);
    f.pod_seen(&pod(NAMESPACE, "test-pod", "uidpod1", &entry, &json!({})));
    f.pod_seen(&pod("tmp", "fake-1", "uidpod2", &entry, &json!({})));
    assert_eq!(
        f.queued().await,
        ["pod:my-namespace/test-pod", "pod:tmp/fake-1"],
        "each must create a claim from its template"
    );
    f.template_seen(&template(NAMESPACE));
    assert_eq!(f.queued().await, ["pod:my-namespace/test-pod"]);
    f.template_seen(&template("tmp"));
    assert_eq!(f.queued().await, ["pod:tmp/fake-1"]);
    f.template_seen(&template("elsewhere"));
    assert!(f.queued().await.is_empty());
}

#[tokio::test]
async fn a_done_or_deleted_pod_queues_its_extended_resource_claim() {
    let extended = json!({ "resourceClaimName": "test-extended-claim", "requestMappings": [] });
    let rows = [
        (
            "no resource claims",
            json!(null),
            json!({ "phase": "Succeeded" }),
            false,
            false,
        ),
        (
            "regular resource claims only",
            json!([ { "name": "regular-claim" } ]),
            json!({ "phase": "Running" }),
            false,
            false,
        ),
        (
            "extended claim, running pod",
            json!(null),
            json!({ "phase": "Running", "extendedResourceClaimStatus": extended }),
            false,
            false,
        ),
        (
            "extended claim, completed pod",
            json!(null),
            json!({ "phase": "Succeeded", "extendedResourceClaimStatus": extended }),
            false,
            true,
        ),
        (
            "extended claim, failed pod",
            json!(null),
            json!({ "phase": "Failed", "extendedResourceClaimStatus": extended }),
            false,
            true,
        ),
        (
            "deleted pod with extended resource claim",
            json!(null),
            json!({ "phase": "Succeeded", "extendedResourceClaimStatus": extended }),
            true,
            true,
        ),
        (
            "regular and extended resource claims, completed",
            json!([ { "name": "regular-claim" } ]),
            json!({ "phase": "Succeeded", "extendedResourceClaimStatus": extended }),
            false,
            true,
        ),
    ];
    for (name, claims, status, deleted, queued) in rows {
        let f = fixture();
        let pod = pod("default", "test-pod", "uid-1", &claims, &status);
        f.pod_seen(&pod);
        if deleted {
            f.pod_gone(&pod);
        }
        let keys = f.queued().await;
        let claim = "claim:default/test-extended-claim".to_string();
        assert_eq!(keys.contains(&claim), queued, "{name}: {keys:?}");
    }
}

#[tokio::test]
async fn a_follower_queues_nothing() {
    let f = fixture();
    f.handlers.leading.set(false);
    f.claim_seen(&claim("c", &json!(null), &json!({})));
    f.template_seen(&template(NAMESPACE));
    assert!(f.queued().await.is_empty());
    assert_eq!(f.gauge(), gauge(&[("false/false/", 1)]), "but counts");
}
