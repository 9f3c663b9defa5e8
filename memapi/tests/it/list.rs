//! memapi lists: label and field selectors, namespaces, limit/continue,
//! and YAML seeding.

use crate::support::{code, pv, pvc, reason};
use k8s_openapi::api::core::v1::{Event, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, ListParams};
use memapi::MemApi;
use std::collections::BTreeMap;

fn names<K: kube::Resource>(items: &[K]) -> Vec<String> {
    items.iter().map(kube::ResourceExt::name_any).collect()
}

fn labelled(name: &str, labels: &[(&str, &str)]) -> PersistentVolume {
    let mut v = pv(name, "1Gi");
    v.metadata.labels = Some(
        labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<BTreeMap<_, _>>(),
    );
    v
}

#[tokio::test]
async fn label_selectors() {
    let mem = MemApi::new();
    mem.create(&labelled("a", &[("tier", "gold"), ("env", "prod")]))
        .unwrap();
    mem.create(&labelled("b", &[("tier", "silver")])).unwrap();
    mem.create(&labelled("c", &[])).unwrap();
    let pvs: Api<PersistentVolume> = Api::all(mem.client());
    let sel = |s: &str| {
        let pvs = pvs.clone();
        let s = s.to_string();
        async move {
            names(
                &pvs.list(&ListParams::default().labels(&s))
                    .await
                    .unwrap()
                    .items,
            )
        }
    };
    assert_eq!(sel("tier=gold").await, ["a"]);
    assert_eq!(sel("tier==silver").await, ["b"]);
    assert_eq!(sel("tier!=gold").await, ["b", "c"]);
    assert_eq!(sel("tier in (gold,silver)").await, ["a", "b"]);
    assert_eq!(sel("tier notin (gold)").await, ["b", "c"]);
    assert_eq!(sel("tier").await, ["a", "b"]);
    assert_eq!(sel("!tier").await, ["c"]);
    assert_eq!(sel("tier,env=prod").await, ["a"]);
    let err = pvs
        .list(&ListParams::default().labels("tier in gold"))
        .await
        .unwrap_err();
    assert_eq!(code(err), 400);
}

#[tokio::test]
async fn field_selectors_and_namespaces() {
    let mem = MemApi::new();
    mem.load_yaml(
        r#"
apiVersion: v1
kind: Pod
metadata: {name: p1, namespace: ns1}
spec: {nodeName: node-a, containers: [{name: c, image: i}]}
status: {phase: Running}
---
apiVersion: v1
kind: Pod
metadata: {name: p2, namespace: ns2}
spec: {nodeName: node-b, containers: [{name: c, image: i}]}
---
apiVersion: v1
kind: Event
metadata: {name: e1, namespace: ns1}
involvedObject: {kind: PersistentVolumeClaim, name: claim1, namespace: ns1}
reason: ProvisioningFailed
"#,
    )
    .unwrap();
    let all: Api<Pod> = Api::all(mem.client());
    let lp = |f: &str| ListParams::default().fields(f);
    assert_eq!(
        names(&all.list(&lp("spec.nodeName=node-b")).await.unwrap().items),
        ["p2"]
    );
    assert_eq!(
        names(&all.list(&lp("status.phase=Pending")).await.unwrap().items),
        ["p2"]
    );
    assert_eq!(
        names(&all.list(&lp("metadata.namespace=ns1")).await.unwrap().items),
        ["p1"]
    );
    assert_eq!(
        names(&all.list(&lp("metadata.name!=p1")).await.unwrap().items),
        ["p2"]
    );
    assert_eq!(code(all.list(&lp("spec.bogus=x")).await.unwrap_err()), 400);
    let ns1: Api<Pod> = Api::namespaced(mem.client(), "ns1");
    assert_eq!(
        names(&ns1.list(&ListParams::default()).await.unwrap().items),
        ["p1"]
    );
    let events: Api<Event> = Api::namespaced(mem.client(), "ns1");
    let found = events
        .list(&lp("involvedObject.name=claim1"))
        .await
        .unwrap();
    assert_eq!(names(&found.items), ["e1"]);
}

#[tokio::test]
async fn pagination_with_limit_and_continue() {
    let mem = MemApi::new();
    for i in 0..7 {
        mem.create(&pvc(&format!("ns{}", i % 2), &format!("c{i}"), "1Gi"))
            .unwrap();
    }
    let claims: Api<PersistentVolumeClaim> = Api::all(mem.client());
    let mut lp = ListParams::default().limit(3);
    let mut pages = Vec::new();
    let page = claims.list(&lp).await.unwrap();
    let first_rv = page.metadata.resource_version.clone();
    pages.push(names(&page.items));
    let mut token = page.metadata.continue_;
    mem.create(&pvc("ns9", "late", "1Gi")).unwrap();
    while let Some(t) = token.filter(|t| !t.is_empty()) {
        lp = lp.continue_token(&t);
        let page = claims.list(&lp).await.unwrap();
        assert_eq!(page.metadata.resource_version, first_rv);
        pages.push(names(&page.items));
        token = page.metadata.continue_;
    }
    // Continued pages come from the first page's snapshot: the claim
    // created after it is not listed.
    assert_eq!(
        pages,
        vec![vec!["c0", "c2", "c4"], vec!["c6", "c1", "c3"], vec!["c5"],]
    );
    let bad = ListParams::default().continue_token("zz");
    assert_eq!(code(claims.list(&bad).await.unwrap_err()), 400);
    // The typed listing helper sorts by namespace/name.
    assert_eq!(mem.list::<PersistentVolumeClaim>().len(), 8);
}

/// The rest of a list whose first page was served before the changes: a
/// changed object as it was, a deleted one still there, a new one absent.
#[tokio::test]
async fn continued_pages_are_a_snapshot_at_the_first_pages_version() {
    let mem = MemApi::new();
    for name in ["a", "b", "c", "d"] {
        mem.create(&pv(name, "1Gi")).unwrap();
    }
    let volumes: Api<PersistentVolume> = Api::all(mem.client());
    let first = volumes.list(&ListParams::default().limit(1)).await.unwrap();
    assert_eq!(names(&first.items), ["a"]);
    let token = first.metadata.continue_.clone().unwrap();
    let mut bigger = mem.get::<PersistentVolume>(None, "b").unwrap();
    bigger.spec.as_mut().unwrap().capacity = Some(BTreeMap::from([(
        "storage".to_string(),
        k8s_openapi::apimachinery::pkg::api::resource::Quantity("5Gi".into()),
    )]));
    volumes
        .replace("b", &Default::default(), &bigger)
        .await
        .unwrap();
    volumes.delete("c", &Default::default()).await.unwrap();
    volumes
        .create(&Default::default(), &pv("bb", "1Gi"))
        .await
        .unwrap();
    let rest = volumes
        .list(&ListParams::default().limit(10).continue_token(&token))
        .await
        .unwrap();
    assert_eq!(names(&rest.items), ["b", "c", "d"], "as at the first page");
    let size = |v: &PersistentVolume| {
        v.spec.as_ref().unwrap().capacity.as_ref().unwrap()["storage"]
            .0
            .clone()
    };
    assert_eq!(size(&rest.items[0]), "1Gi", "b as it was");
    assert_eq!(
        rest.metadata.resource_version,
        first.metadata.resource_version
    );
    assert_eq!(rest.metadata.continue_, None);
    // A new list sees the changes.
    let now = volumes.list(&ListParams::default()).await.unwrap();
    assert_eq!(names(&now.items), ["a", "b", "bb", "d"]);
}

/// A continue token whose version the history no longer reaches is 410
/// Expired, in the API server's words; a new list works.
#[tokio::test]
async fn a_continue_token_expires_with_the_history() {
    let mem = MemApi::new();
    for name in ["a", "b", "c"] {
        mem.create(&pv(name, "1Gi")).unwrap();
    }
    let volumes: Api<PersistentVolume> = Api::all(mem.client());
    let first = volumes.list(&ListParams::default().limit(1)).await.unwrap();
    let token = first.metadata.continue_.clone().unwrap();
    // Unchanged since, the token still reads the current state.
    mem.compact();
    let second = volumes
        .list(&ListParams::default().limit(1).continue_token(&token))
        .await
        .unwrap();
    assert_eq!(names(&second.items), ["b"]);
    // A change after the compaction: the snapshot can no longer be made.
    mem.create(&pv("d", "1Gi")).unwrap();
    mem.compact();
    let err = volumes
        .list(&ListParams::default().limit(1).continue_token(&token))
        .await
        .unwrap_err();
    assert_eq!(reason(&err), "Expired");
    assert!(
        err.to_string().contains(
            "The provided continue parameter is too old to display a consistent list result"
        ),
        "{err}"
    );
    assert_eq!(code(err), 410);
    let again = volumes.list(&ListParams::default()).await.unwrap();
    assert_eq!(names(&again.items), ["a", "b", "c", "d"]);
}

#[tokio::test]
async fn yaml_seeding_lists_and_empty_documents() {
    let mem = MemApi::new();
    let n = mem
        .load_yaml(
            r#"
---
apiVersion: v1
kind: List
items:
- apiVersion: storage.k8s.io/v1
  kind: StorageClass
  metadata: {name: gold}
  provisioner: example.com/nfs
- apiVersion: v1
  kind: PersistentVolume
  metadata: {name: pv1}
  spec:
    capacity: {storage: 1Gi}
    accessModes: [ReadWriteOnce]
    hostPath: {path: /tmp}
    claimRef: {namespace: ns, name: c, uid: "123"}
  status: {phase: Bound}
---
---
apiVersion: v1
kind: Namespace
metadata: {name: ns}
"#,
        )
        .unwrap();
    assert_eq!(n, 3);
    let sc = mem.get::<StorageClass>(None, "gold").unwrap();
    assert_eq!(sc.reclaim_policy.as_deref(), Some("Delete"));
    let v = mem.get::<PersistentVolume>(None, "pv1").unwrap();
    assert_eq!(v.status.unwrap().phase.as_deref(), Some("Bound"));
    assert!(
        mem.load_yaml("apiVersion: v1\nkind: Gadget\nmetadata: {name: x}\n")
            .is_err()
    );
    assert!(mem.load_yaml("a: [unclosed").is_err());
}
