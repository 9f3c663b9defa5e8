//! Rows of the scenario table (tests/it/ephemeral.rs, upstream's
//! `TestSyncHandler` and ours) decided from stores filled by hand, without
//! a server: each row's plan, as its lines (the writes and events in
//! order), and what the sync comes to once the plan went through.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, PersistentVolumeClaimTemplate, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use testkit::{claim, pod, with_ephemeral_volume};

use super::Known;
use crate::ephemeral::claims::claim_for;
use crate::runtime::informer::{MemStore, Store, StoreRef};
use crate::runtime::keys::ObjectKey;
use crate::runtime::plan::Then;

const POD: &str = "test-pod";

/// `test-pod` (in `default`) with an ephemeral volume for each of
/// `volumes`.
fn test_pod(volumes: &[&str]) -> Pod {
    volumes
        .iter()
        .fold(pod(POD, &[], "Pending", None), |pod, volume| {
            with_ephemeral_volume(pod, volume, claim("template", "", "1Gi").build())
        })
}

/// The claim the controller makes for `pod`'s `volume`.
fn owned(pod: &Pod, volume: &str) -> PersistentVolumeClaim {
    claim_for(pod, volume, &PersistentVolumeClaimTemplate::default())
}

/// A claim of `name` in `namespace` that no pod controls.
fn foreign(name: &str, namespace: &str) -> PersistentVolumeClaim {
    let mut claim = claim(name, "", "1Gi").build();
    claim.metadata.namespace = Some(namespace.to_string());
    claim
}

/// What the decisions read, holding `pods` and `claims`.
fn known(pods: &[Pod], claims: &[PersistentVolumeClaim]) -> Known {
    let pod_store = Arc::new(MemStore::default());
    for pod in pods {
        pod_store.watched(&Arc::new(pod.clone()));
    }
    let claim_store = Arc::new(MemStore::default());
    for claim in claims {
        claim_store.watched(&Arc::new(claim.clone()));
    }
    let claim_ref = StoreRef::new(&crate::kinds::PERSISTENT_VOLUME_CLAIM);
    claim_ref.fix(claim_store as Arc<dyn Store<PersistentVolumeClaim>>);
    Known {
        pods: pod_store,
        claims: claim_ref,
    }
}

struct Row {
    name: &'static str,
    pods: Vec<Pod>,
    claims: Vec<PersistentVolumeClaim>,
    lines: Vec<String>,
    /// Whether the pod's turn fails once the plan went through.
    fails: bool,
}

const NOT_OWNER: &str = "event Warning FailedBinding on Pod default/test-pod: ephemeral volume ephemeral-volume: PVC default/test-pod-ephemeral-volume was not created for pod default/test-pod (pod is not owner)";

fn rows() -> Vec<Row> {
    let one = test_pod(&["ephemeral-volume"]);
    let three = test_pod(&["a", "b", "c"]);
    let two = test_pod(&["a", "b"]);
    let mut deleting = one.clone();
    deleting.metadata.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
    let create = |name: &str| format!("create PersistentVolumeClaim default/{name}");
    vec![
        Row {
            name: "create",
            pods: vec![one.clone()],
            claims: vec![],
            lines: vec![create("test-pod-ephemeral-volume")],
            fails: false,
        },
        Row {
            name: "no-such-pod",
            pods: vec![],
            claims: vec![],
            lines: vec![],
            fails: false,
        },
        Row {
            name: "pod-deleted",
            pods: vec![deleting],
            claims: vec![],
            lines: vec![],
            fails: false,
        },
        Row {
            name: "no-volumes",
            pods: vec![test_pod(&[])],
            claims: vec![],
            lines: vec![],
            fails: false,
        },
        Row {
            name: "create-with-other-PVC",
            pods: vec![one.clone()],
            claims: vec![foreign("test-pod-ephemeral-volume", "not-my-namespace")],
            lines: vec![create("test-pod-ephemeral-volume")],
            fails: false,
        },
        Row {
            name: "wrong-PVC-owner",
            pods: vec![one.clone()],
            claims: vec![foreign("test-pod-ephemeral-volume", "default")],
            lines: vec![NOT_OWNER.to_string()],
            fails: true,
        },
        Row {
            name: "the pod's claim exists: nothing to create",
            pods: vec![one.clone()],
            claims: vec![owned(&one, "ephemeral-volume")],
            lines: vec![],
            fails: false,
        },
        Row {
            name: "every ephemeral volume gets its claim, in the pod's order",
            pods: vec![three],
            claims: vec![],
            lines: vec![
                create("test-pod-a"),
                create("test-pod-b"),
                create("test-pod-c"),
            ],
            fails: false,
        },
        Row {
            name: "a missing claim beside an existing one is created",
            pods: vec![two.clone()],
            claims: vec![owned(&two, "a")],
            lines: vec![create("test-pod-b")],
            fails: false,
        },
        Row {
            name: "the claims before a foreign one are created, then the Warning",
            pods: vec![two.clone()],
            claims: vec![foreign("test-pod-b", "default")],
            lines: vec![
                create("test-pod-a"),
                "event Warning FailedBinding on Pod default/test-pod: ephemeral volume b: PVC default/test-pod-b was not created for pod default/test-pod (pod is not owner)".to_string(),
            ],
            fails: true,
        },
    ]
}

#[test]
fn scenario_rows_decide_the_plans_of_the_table() {
    for row in rows() {
        let known = known(&row.pods, &row.claims);
        let plan = known.decide_pod(&ObjectKey::new("default", POD));
        assert_eq!(plan.lines(), row.lines, "{}: lines", row.name);
        assert_eq!(
            matches!(plan.what_then(), Then::Fail(_)),
            row.fails,
            "{}: fails",
            row.name
        );
    }
}
