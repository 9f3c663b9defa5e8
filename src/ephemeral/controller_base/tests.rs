//! The watch handlers on hand-fed events: what a relist (objects gone
//! without a delete event) and a delete queue.

use std::time::Duration;

use k8s_openapi::api::core::v1::{
    EphemeralVolumeSource, PersistentVolumeClaimSpec, PersistentVolumeClaimTemplate, PodSpec,
    Volume, VolumeResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use memapi::MemApi;

use super::*;
use crate::runtime::shared::Shared;

fn pod() -> Pod {
    let template = PersistentVolumeClaimTemplate {
        metadata: None,
        spec: PersistentVolumeClaimSpec {
            access_modes: Some(vec!["ReadWriteOnce".to_string()]),
            resources: Some(VolumeResourceRequirements {
                requests: Some([("storage".to_string(), Quantity("1Gi".to_string()))].into()),
                ..VolumeResourceRequirements::default()
            }),
            ..PersistentVolumeClaimSpec::default()
        },
    };
    Pod {
        metadata: ObjectMeta {
            name: Some("p".to_string()),
            namespace: Some("ns".to_string()),
            uid: Some("uid-p".to_string()),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            volumes: Some(vec![Volume {
                name: "v".to_string(),
                ephemeral: Some(EphemeralVolumeSource {
                    volume_claim_template: Some(template),
                }),
                ..Volume::default()
            }]),
            ..PodSpec::default()
        }),
        status: None,
    }
}

/// A leading base whose listers are fed by hand (no watcher runs), the
/// pod listed.
fn base(
    api: &MemApi,
) -> (
    EphemeralBase,
    reflector::store::Writer<PersistentVolumeClaim>,
) {
    let context = StartContext {
        client: api.client(),
        shared: Shared::new().unwrap(),
        instance: "test".to_string(),
        watch_failure_limit: Duration::from_secs(60),
    };
    let mut base = EphemeralBase::new(&context).unwrap();
    let (mut pods, claims) = base.writers.take().unwrap();
    for event in [Event::Init, Event::InitApply(pod()), Event::InitDone] {
        pods.apply_watcher_event(&event);
        base.handlers.on_pod_event(&event);
    }
    base.handlers.leading.store(true, Ordering::Release);
    (base, claims)
}

fn relist(base: &EphemeralBase, writer: &mut reflector::store::Writer<PersistentVolumeClaim>) {
    for event in [Event::Init, Event::InitDone] {
        writer.apply_watcher_event(&event);
        base.handlers.on_claim_event(&event);
    }
}

#[tokio::test]
async fn a_created_claim_gone_in_a_relist_queues_its_pod_again() {
    let api = MemApi::new();
    api.create(&pod()).unwrap();
    let (base, mut claims) = base(&api);
    let key = ObjectKey::new("ns", "p");
    assert_eq!(
        base.controller.sync_pod(&key).await.unwrap(),
        super::super::controller::Synced::Done { created: 1 }
    );
    assert!(!base.controller.needs_work(&pod()), "its own create counts");
    // The claim is deleted while the watch is down: the relist lists none.
    assert!(api.remove::<PersistentVolumeClaim>(Some("ns"), "p-v"));
    relist(&base, &mut claims);
    assert_eq!(base.handlers.queue.len(), 1, "the pod is queued again");
    assert!(base.controller.needs_work(&pod()));
}

#[tokio::test]
async fn a_pod_gone_in_a_relist_leaves_the_index() {
    let api = MemApi::new();
    let (base, _claims) = base(&api);
    assert_eq!(base.handlers.index.pods(), [ObjectKey::new("ns", "p")]);
    let mut pods = reflector::store::Writer::<Pod>::default();
    // A fresh writer stands for the relisted store: the pod is not in it.
    for event in [Event::Init, Event::InitDone] {
        pods.apply_watcher_event(&event);
    }
    let relisted = Handlers {
        controller: Arc::new(EphemeralController::new(super::super::controller::Parts {
            client: api.client(),
            pods: pods.as_reader(),
            claims: base.claims.clone(),
            recorder: base.controller.recorder().clone(),
            metrics: EphemeralMetrics::new(&crate::runtime::metrics::Metrics::new().unwrap())
                .unwrap(),
        })),
        ..base.handlers.clone()
    };
    relisted.on_pod_event(&Event::InitDone);
    assert!(base.handlers.index.pods().is_empty());
}

#[tokio::test]
async fn a_deleted_claim_queues_the_pods_that_ask_for_it() {
    let api = MemApi::new();
    let (base, _claims) = base(&api);
    let mut other = PersistentVolumeClaim::default();
    other.metadata.name = Some("unrelated".to_string());
    other.metadata.namespace = Some("ns".to_string());
    base.handlers.on_claim_event(&Event::Delete(other));
    assert_eq!(base.handlers.queue.len(), 0, "no pod asks for it");
    let mut claim = PersistentVolumeClaim::default();
    claim.metadata.name = Some("p-v".to_string());
    claim.metadata.namespace = Some("ns".to_string());
    base.handlers.on_claim_event(&Event::Delete(claim));
    assert_eq!(base.handlers.queue.len(), 1);
}
