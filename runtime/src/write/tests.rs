//! The door's promises: a write edits the newest copy, refuses when the
//! object moved on, skips what is already so, stores the trimmed answer,
//! counts every request once by controller, and two writers of one object
//! never meet in a conflict.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{PersistentVolume, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;
use memapi::{MemApi, Verb};

use super::*;
use crate::informer::{MemStore, Store};
use crate::kinds::{drop_managed_fields, metadata_and};

/// Volumes as the process keeps them: a status subresource.
static VOLUME: Shape<PersistentVolume> = Shape::new(drop_managed_fields)
    .with_status(|volume, part| metadata_and(&volume.metadata, &volume.spec, &volume.status, part));

/// Pods, encoded whole.
static POD: Shape<Pod> = Shape::new(drop_managed_fields);

fn volume(name: &str) -> PersistentVolume {
    let mut volume = PersistentVolume::default();
    volume.metadata.name = Some(name.into());
    volume
}

/// A writer of volumes for controller "test" over a fresh store, and the
/// door's registry.
fn writer(
    api: &MemApi,
) -> (
    Writer<PersistentVolume>,
    Arc<MemStore<PersistentVolume>>,
    Arc<Metrics>,
) {
    let metrics = Arc::new(Metrics::new().expect("metrics"));
    let door = Door::new(api.client(), Arc::clone(&metrics));
    let store = Arc::new(MemStore::default());
    let handle = StoreRef::new(&VOLUME);
    handle.fix(Arc::clone(&store) as Arc<dyn Store<PersistentVolume>>);
    (door.writer("test", handle), store, metrics)
}

fn label(edit_to: &'static str) -> impl FnOnce(&mut PersistentVolume) -> Edit {
    move |volume| {
        let labels = volume.metadata.labels.get_or_insert_with(Default::default);
        if labels.get("touched").map(String::as_str) == Some(edit_to) {
            return Edit::Unchanged;
        }
        labels.insert("touched".into(), edit_to.into());
        Edit::Changed
    }
}

#[tokio::test]
async fn an_update_edits_the_newest_copy_and_skips_what_is_already_so() {
    let api = MemApi::new();
    let (writer, store, metrics) = writer(&api);
    let mut sent = volume("v1");
    sent.metadata.managed_fields = Some(vec![ManagedFieldsEntry::default()]);
    let basis = writer.create(&sent).await.expect("create");
    assert_eq!(basis.metadata.managed_fields, None, "answers are trimmed");
    assert!(store.get(&ObjectKey::cluster("v1")).is_some(), "and stored");
    let first = writer
        .update(&basis, Part::Spec, label("yes"))
        .await
        .expect("first write");
    api.reset_requests();
    // The same decision from the old copy: the store's copy is newer and
    // already as wanted, so nothing is sent.
    let second = writer
        .update(&basis, Part::Spec, label("yes"))
        .await
        .expect("second write");
    assert_eq!(
        second.metadata.resource_version,
        first.metadata.resource_version
    );
    assert_eq!(
        api.requests().count(Verb::Patch, "persistentvolumes", None),
        0
    );
    let refused = writer
        .update(&basis, Part::Spec, |_| Edit::Refused("moved on".into()))
        .await;
    assert!(
        matches!(&refused, Err(error @ WriteError::Stale { .. }) if error.is_conflict()),
        "{refused:?}"
    );
    assert_eq!(
        metrics.api_writes_by("test", "persistentvolumes", "create"),
        1
    );
    assert_eq!(
        metrics.api_writes_by("test", "persistentvolumes", "patch"),
        1
    );
}

/// An update names only what its edit changed and is conditional on the
/// version it edited: a change by another client since (unseen by the
/// store) is a 409, and the retry from the server's copy keeps that
/// client's change and the fields the compiled types do not know.
#[tokio::test]
async fn an_update_is_conditional_and_keeps_what_it_did_not_change() {
    let api = MemApi::new();
    let (writer, _, _) = writer(&api);
    let basis = writer.create(&volume("v1")).await.expect("create");
    kube::Api::<PersistentVolume>::all(api.client())
        .patch(
            "v1",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({
                "metadata": {"labels": {"theirs": "yes"}},
                "spec": {"newerServerField": {"kept": true}},
            })),
        )
        .await
        .expect("another client writes");

    let stale = writer.update(&basis, Part::Spec, label("ours")).await;
    assert!(
        stale.as_ref().is_err_and(WriteError::is_conflict),
        "decided on an older version: {stale:?}"
    );
    writer
        .update(&basis, Part::Spec, label("ours"))
        .await
        .expect("the retry edits the server's copy");
    let stored = api
        .get_value("persistentvolumes", None, "v1")
        .expect("stored");
    assert_eq!(
        stored["metadata"]["labels"],
        serde_json::json!({"theirs": "yes", "touched": "ours"})
    );
    assert_eq!(
        stored["spec"]["newerServerField"],
        serde_json::json!({"kept": true})
    );
}

#[tokio::test]
async fn a_delete_answers_the_object_a_finalizer_holds() {
    let api = MemApi::new();
    let (writer, _, _) = writer(&api);
    let mut held = volume("held");
    held.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    held.metadata.managed_fields = Some(vec![ManagedFieldsEntry {
        manager: Some("someone".into()),
        ..Default::default()
    }]);
    let held = writer.create(&held).await.expect("create");
    writer.create(&volume("free")).await.expect("create");
    let answer = writer
        .delete(&ObjectKey::cluster("held"), held.metadata.uid.as_deref())
        .await
        .expect("deleted")
        .expect("still stored");
    assert!(answer.metadata.deletion_timestamp.is_some());
    assert!(answer.metadata.managed_fields.is_none(), "trimmed");
    let answer = writer
        .delete(&ObjectKey::cluster("free"), None)
        .await
        .expect("deleted");
    assert!(answer.is_none(), "gone at once: {answer:?}");
}

#[tokio::test]
async fn deletes_and_patches_are_counted_and_a_gone_object_is_deleted_already() {
    let api = MemApi::new();
    let (writer, _, metrics) = writer(&api);
    let created = writer.create(&volume("v1")).await.expect("create");
    writer
        .delete(&ObjectKey::cluster("v1"), Some("another-uid"))
        .await
        .expect_err("another incarnation is never deleted");
    writer
        .delete(&ObjectKey::cluster("v1"), created.metadata.uid.as_deref())
        .await
        .expect("deleted");
    writer
        .delete(&ObjectKey::cluster("v1"), None)
        .await
        .expect("gone already counts as deleted");
    assert_eq!(
        metrics.api_writes_by("test", "persistentvolumes", "delete"),
        3
    );

    let pods = Door::new(api.client(), Arc::clone(&metrics));
    let pod_store = Arc::new(MemStore::<Pod>::default());
    let handle = StoreRef::new(&POD);
    handle.fix(Arc::clone(&pod_store) as Arc<dyn Store<Pod>>);
    let pods = pods.writer("other", handle);
    let mut pod = Pod::default();
    pod.metadata.namespace = Some("ns".into());
    pod.metadata.name = Some("p".into());
    api.create(&pod).expect("seed pod");
    let patched = pods
        .apply_status(
            &ObjectKey::new("ns", "p"),
            "tester",
            &serde_json::json!({
                "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                "status": {"phase": "Running"},
            }),
        )
        .await
        .expect("applied");
    assert_eq!(
        patched.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Running")
    );
    assert!(pod_store.get(&ObjectKey::new("ns", "p")).is_some());
    assert_eq!(metrics.api_writes_by("other", "pods", "patch"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_writers_of_one_object_never_conflict() {
    let api = MemApi::new();
    let (writer, _, _) = writer(&api);
    for round in 0..20 {
        let basis = writer
            .create(&volume(&format!("v{round}")))
            .await
            .expect("create");
        let (a, b) = (writer.clone(), writer.clone());
        let (basis_a, basis_b) = (Arc::clone(&basis), Arc::clone(&basis));
        let one = tokio::spawn(async move { a.update(&basis_a, Part::Spec, label("one")).await });
        let two = tokio::spawn(async move {
            b.update(&basis_b, Part::Status, |volume| {
                volume.status.get_or_insert_with(Default::default).phase = Some("Available".into());
                Edit::Changed
            })
            .await
        });
        one.await.expect("join").expect("label write");
        two.await.expect("join").expect("phase write");
    }
    let stats = api.requests();
    assert_eq!(
        stats.count_code(Verb::Patch, "persistentvolumes", None, 409)
            + stats.count_code(Verb::Patch, "persistentvolumes", Some("status"), 409),
        0,
        "the door serialises writers of one object"
    );
    assert_eq!(
        writer.door.locks_in_use(),
        0,
        "locks are forgotten after use"
    );
}
