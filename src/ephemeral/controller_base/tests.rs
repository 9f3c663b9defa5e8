//! The handlers on hand-told changes: a pod is queued only when it needs
//! work and the process leads, and a deleted claim (seen as such, or gone
//! during a relist) queues the pods that use it.

use k8s_openapi::api::core::v1::{
    EphemeralVolumeSource, PersistentVolumeClaimSpec, PersistentVolumeClaimTemplate, PodSpec,
    Volume,
};
use memapi::MemApi;

use super::*;
use crate::runtime::events::EventRecorder;
use crate::runtime::informer::{Store, StoreRef};
use crate::runtime::metrics::Metrics;
use crate::runtime::workload::{Ended, turn};
use crate::runtime::write::Door;

fn pod(name: &str) -> Arc<Pod> {
    let mut pod = Pod {
        spec: Some(PodSpec {
            volumes: Some(vec![Volume {
                name: "v".to_string(),
                ephemeral: Some(EphemeralVolumeSource {
                    volume_claim_template: Some(PersistentVolumeClaimTemplate {
                        metadata: None,
                        spec: PersistentVolumeClaimSpec::default(),
                    }),
                }),
                ..Volume::default()
            }]),
            ..PodSpec::default()
        }),
        ..Pod::default()
    };
    pod.metadata.name = Some(name.to_string());
    pod.metadata.namespace = Some("ns".to_string());
    pod.metadata.uid = Some(format!("uid-{name}"));
    Arc::new(pod)
}

/// Handlers over fresh stores on `api`, with `pods` in the pod store, the
/// executor of the controller's plans, and the claim store.
fn handlers(
    api: &MemApi,
    pods: &[Arc<Pod>],
) -> (
    Handlers,
    Executor<Counted>,
    Arc<MemStore<PersistentVolumeClaim>>,
) {
    let metrics = Arc::new(Metrics::new().expect("metrics"));
    let pod_store = Arc::new(MemStore::default());
    pod_store.add_index(PODS_BY_CLAIM, claims_of_pod);
    for pod in pods {
        pod_store.watched(pod);
    }
    let claim_store = Arc::new(MemStore::default());
    let claims = StoreRef::new(&crate::kinds::PERSISTENT_VOLUME_CLAIM);
    claims.fix(Arc::clone(&claim_store) as Arc<dyn Store<PersistentVolumeClaim>>);
    let executor = Executor::new(Parts {
        controller: NAME,
        writers: WriterSet::default()
            .with(Door::new(api.client(), Arc::clone(&metrics)).writer(NAME, claims.clone())),
        recorder: EventRecorder::new(api.client(), Arc::clone(&metrics), COMPONENT, "test")
            .expect("recorder"),
        effects: Arc::new(Counter(EphemeralMetrics::new(&metrics).expect("metrics"))),
        reserver: None,
        operations: None,
        shadow: None,
    });
    let handlers = Handlers {
        known: Known {
            pods: Arc::clone(&pod_store),
            claims,
        },
        pods: pod_store,
        queue: WorkQueue::new(),
        leading: Leading::default(),
    };
    (handlers, executor, claim_store)
}

#[tokio::test]
async fn a_pod_is_queued_only_while_leading_and_only_with_work() {
    let api = MemApi::new();
    let a = pod("a");
    let (handlers, _, _) = handlers(&api, &[Arc::clone(&a)]);
    let applied = |object| Change::Applied {
        object,
        listing: false,
    };
    handlers.on_pod(&applied(&a));
    assert_eq!(handlers.queue.len(), 0, "a follower queues nothing");
    handlers.leading.set(true);
    handlers.on_pod(&applied(&a));
    assert_eq!(handlers.queue.len(), 1, "its claim is missing");
    let mut plain = Pod::clone(&pod("c"));
    plain.spec = None;
    handlers.on_pod(&applied(&Arc::new(plain)));
    assert_eq!(
        handlers.queue.len(),
        1,
        "a pod without ephemeral volumes has no work"
    );
}

#[tokio::test]
async fn a_created_claim_counts_and_its_deletion_queues_the_pod_again() {
    let api = MemApi::new();
    let a = pod("a");
    api.create(a.as_ref()).expect("seed pod");
    let (handlers, executor, claim_store) = handlers(&api, &[Arc::clone(&a), pod("b")]);
    handlers.leading.set(true);
    let key = ObjectKey::new("ns", "a");
    assert_eq!(
        turn(&executor, |_| handlers.known.decide_pod(&key)).await,
        Ended::Done
    );
    assert_eq!(api.list::<PersistentVolumeClaim>().len(), 1, "created");
    assert!(
        !handlers.known.needs_work(&a),
        "the create's answer is in the claim store at once"
    );
    // The claim is deleted (or gone during a relist): the store forgets it.
    let claim = ObjectKey::new("ns", "a-v");
    let last = claim_store.forget(&claim);
    handlers.on_claim(&Change::Deleted {
        key: &claim,
        last: last.as_ref(),
    });
    assert_eq!(handlers.queue.len(), 1, "only pod a uses it");
    assert!(handlers.known.needs_work(&a));
    handlers.on_claim(&Change::Deleted {
        key: &ObjectKey::new("ns", "unrelated"),
        last: None,
    });
    assert_eq!(handlers.queue.len(), 1, "no pod uses that one");
}
