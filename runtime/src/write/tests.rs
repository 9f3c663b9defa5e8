//! The door's promises: an update is conditional on the copy it was
//! decided on (refused without a request when the store is ahead of it, by
//! the server when anyone changed or re-created the object), names only
//! what it changed, stores the trimmed answer, counts every request once by
//! controller, and two writers of one object never write it at once.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{PersistentVolume, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;
use memapi::{MemApi, Verb};

use super::*;
use crate::informer::{MemStore, Store};
use crate::kinds::{Shape, drop_managed_fields, metadata_and};
use crate::metrics::tests::writes_by;

impl<K: Kind> Writer<K> {
    /// Sends what `changed` changes of `part` of `basis`, conditional on
    /// `version` (the basis's own when `None`) and the basis's UID, as the
    /// executor sends an update; returns the answer, or `changed` when
    /// nothing was sent.
    async fn update(
        &self,
        basis: &K,
        changed: &K,
        version: Option<&str>,
        part: Part,
    ) -> Result<Arc<K>, WriteError> {
        let change = self.change(basis, changed, part)?;
        let condition = Condition {
            version: version.or(basis.meta().resource_version.as_deref()),
            uid: basis.meta().uid.as_deref(),
        };
        let answer = self
            .send_change(&ObjectKey::of(basis), condition, part, change.as_ref())
            .await?;
        Ok(answer.unwrap_or_else(|| Arc::new(changed.clone())))
    }
}

impl Door {
    /// How many objects have a write lock right now (held or waited for).
    fn locks_in_use(&self) -> usize {
        self.locks.len()
    }
}

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

/// `basis` with the label `touched` set to `value`.
fn labelled(basis: &PersistentVolume, value: &str) -> PersistentVolume {
    let mut changed = basis.clone();
    changed
        .metadata
        .labels
        .get_or_insert_with(Default::default)
        .insert("touched".into(), value.into());
    changed
}

#[tokio::test]
async fn an_update_is_refused_without_a_request_when_the_store_is_ahead_of_its_basis() {
    let api = MemApi::new();
    let (writer, store, metrics) = writer(&api);
    let mut sent = volume("v1");
    sent.metadata.managed_fields = Some(vec![ManagedFieldsEntry::default()]);
    let basis = writer.create(&sent).await.expect("create");
    assert_eq!(basis.metadata.managed_fields, None, "answers are trimmed");
    assert!(store.get(&ObjectKey::cluster("v1")).is_some(), "and stored");
    let first = writer
        .update(&basis, &labelled(&basis, "yes"), None, Part::Spec)
        .await
        .expect("first write");
    assert_eq!(
        store
            .get(&ObjectKey::cluster("v1"))
            .and_then(|v| v.metadata.resource_version.clone()),
        first.metadata.resource_version,
        "the answer is stored"
    );
    api.reset_requests();
    // A decision made on the old copy: the store holds a newer one, so the
    // decision does not hold and nothing is sent.
    let refused = writer
        .update(&basis, &labelled(&basis, "other"), None, Part::Spec)
        .await;
    assert!(
        matches!(&refused, Err(error @ WriteError::Stale { .. }) if error.is_conflict()),
        "{refused:?}"
    );
    assert_eq!(api.requests().log().len(), 0, "nothing was sent");
    // Conditional on the first write's answer, it goes.
    writer
        .update(&first, &labelled(&first, "second"), None, Part::Spec)
        .await
        .expect("decided on the newest copy");
    assert_eq!(
        writes_by(&metrics, "test", "persistentvolumes", "create"),
        1
    );
    assert_eq!(writes_by(&metrics, "test", "persistentvolumes", "patch"), 2);
}

/// An update names only what its decision changed and is conditional on
/// the copy the decision read: a change by another client since (unseen by
/// the store) is a 409, the copy the 409 brings back is stored, and a
/// decision made on it keeps that client's change and the fields the
/// compiled types do not know.
#[tokio::test]
async fn an_update_is_conditional_and_keeps_what_it_did_not_change() {
    let api = MemApi::new();
    let (writer, store, _) = writer(&api);
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

    let stale = writer
        .update(&basis, &labelled(&basis, "ours"), None, Part::Spec)
        .await;
    assert!(
        stale.as_ref().is_err_and(WriteError::is_conflict),
        "decided on an older version: {stale:?}"
    );
    let reread = store
        .get(&ObjectKey::cluster("v1"))
        .expect("the server's copy is stored after the 409");
    writer
        .update(&reread, &labelled(&reread, "ours"), None, Part::Spec)
        .await
        .expect("decided again on the server's copy");
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

/// A volume deleted and created again under its name, unseen by the store:
/// an update decided on the first is refused by the server.
#[tokio::test]
async fn an_update_of_an_object_re_created_since_its_decision_is_refused() {
    let api = MemApi::new();
    let (writer, _, _) = writer(&api);
    let basis = writer.create(&volume("v1")).await.expect("create");
    assert!(api.remove::<PersistentVolume>(None, "v1"));
    api.create(&volume("v1")).expect("re-created");
    let refused = writer
        .update(&basis, &labelled(&basis, "ours"), None, Part::Spec)
        .await;
    assert!(
        refused.as_ref().is_err_and(WriteError::is_conflict),
        "{refused:?}"
    );
    let stored = api
        .get_value("persistentvolumes", None, "v1")
        .expect("stored");
    assert_eq!(stored["metadata"]["labels"], serde_json::Value::Null);
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
        writes_by(&metrics, "test", "persistentvolumes", "delete"),
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
    assert_eq!(writes_by(&metrics, "other", "pods", "patch"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_writers_of_one_object_never_write_it_at_once() {
    let api = MemApi::new();
    let (writer, _, _) = writer(&api);
    for round in 0..20 {
        let basis = writer
            .create(&volume(&format!("v{round}")))
            .await
            .expect("create");
        let (a, b) = (writer.clone(), writer.clone());
        let (basis_a, basis_b) = (Arc::clone(&basis), Arc::clone(&basis));
        let one = tokio::spawn(async move {
            a.update(&basis_a, &labelled(&basis_a, "one"), None, Part::Spec)
                .await
        });
        let two = tokio::spawn(async move {
            let mut available = PersistentVolume::clone(&basis_b);
            available.status.get_or_insert_with(Default::default).phase = Some("Available".into());
            b.update(&basis_b, &available, None, Part::Status).await
        });
        let results = [one.await.expect("join"), two.await.expect("join")];
        assert_eq!(
            results.iter().filter(|result| result.is_ok()).count(),
            1,
            "one write goes, the other finds the store ahead of its basis: {results:?}"
        );
    }
    let stats = api.requests();
    assert_eq!(
        stats.count_code(Verb::Patch, "persistentvolumes", None, 409)
            + stats.count_code(Verb::Patch, "persistentvolumes", Some("status"), 409),
        0,
        "the second writer waits for the first's answer and sends nothing"
    );
    assert_eq!(
        writer.door.locks_in_use(),
        0,
        "locks are forgotten after use"
    );
}

/// The answer to a write may come after the watch's event of the object's
/// deletion; stored then, it would bring the object back for good.
#[tokio::test]
async fn an_answer_about_an_object_the_watch_showed_deleted_is_not_stored() {
    let api = MemApi::new();
    let (writer, store, _) = writer(&api);
    let basis = writer.create(&volume("v1")).await.expect("create");
    let key = ObjectKey::cluster("v1");
    // The watch shows v1 deleted (as the informer takes it in) while the
    // update below is on its way.
    let uid = basis.metadata.uid.clone().expect("a UID");
    writer.store.incarnations().deleted(&uid);
    store.forget(&key);
    let answer = writer
        .update(&basis, &labelled(&basis, "late"), None, Part::Spec)
        .await
        .expect("the server still had it");
    assert!(answer.metadata.resource_version.is_some(), "answered");
    assert!(store.get(&key).is_none(), "not brought back");
    // Another incarnation under the same name is stored as usual.
    api.delete::<PersistentVolume>(None, "v1").expect("deleted");
    writer.create(&volume("v1")).await.expect("re-created");
    assert!(store.get(&key).is_some(), "the new incarnation is stored");
}

/// Writes of every verb are counted in flight from when they are sent to
/// their answer, by controller.
#[tokio::test(start_paused = true)]
async fn writes_are_counted_in_flight_until_answered() {
    let api = MemApi::new();
    let (writer, _, metrics) = writer(&api);
    let in_flight = || {
        crate::metrics::tests::summed(
            &metrics,
            "pv_controller_api_writes_in_flight",
            &[("controller", "test")],
        )
    };
    let basis = writer.create(&volume("v1")).await.expect("create");
    assert_eq!(in_flight(), 0, "a create answered is no longer in flight");
    api.add_reactor(
        memapi::Reactor::on(Verb::Patch, "persistentvolumes")
            .delay(std::time::Duration::from_secs(10))
            .times(1),
    );
    let changed = labelled(&basis, "slow");
    let slow = writer.update(&basis, &changed, None, Part::Spec);
    let quick = async {
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
        let sent = in_flight();
        writer
            .delete(&ObjectKey::cluster("other"), None)
            .await
            .expect("an object already gone is deleted");
        sent
    };
    let (updated, during) = tokio::join!(slow, quick);
    updated.expect("the update is answered");
    assert_eq!(
        during, 1,
        "the update is in flight while the server holds it"
    );
    assert_eq!(in_flight(), 0, "and no longer once answered");
}
