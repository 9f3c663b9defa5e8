//! The delete scenarios: upstream's delete table (set 8) and multi-sync case
//! (9-1), plus HonorPVReclaimPolicy, one-operation-per-volume and backoff
//! checks. Each table row runs as one direct sync and with the whole
//! controller until it settles.

use std::sync::Arc;
use std::time::Duration;

use crate::harness::{Call, Running, direct_binder, row, run_table};
use crate::mock_plugin::{MockConfig, MockPlugin};
use k8s_names::{
    ANN_BIND_COMPLETED, ANN_BOUND_BY_CONTROLLER, ANN_DYNAMICALLY_PROVISIONED, ANN_MIGRATED_TO,
    ANN_STORAGE_DELETED, FINALIZER_EXTERNAL_PROVISIONER, FINALIZER_PV_CONTROLLER,
    FINALIZER_PV_PROTECTION,
};
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use memapi::MemApi;
use pv_controller::pv;
use pv_controller::pv::Settings;
use pv_controller::pv::VolumeName;
use pv_controller::pv::VolumePlugins;
use pv_controller::testing::Ended;
use testkit::*;

fn released(name: &str, uid: &str, claim_name: &str) -> VolumeBuilder {
    volume(name, "1Gi")
        .bound_to(uid, claim_name)
        .phase("Bound")
        .policy("Delete")
}

fn one_success() -> MockConfig {
    MockConfig::default().deletes(&[None])
}

#[tokio::test(start_paused = true)]
async fn set_8_delete() {
    run_table(vec![
        row("8-1 successful delete")
            .volumes(
                volumes([released("volume8-1", "uid8-1", "claim8-1").annotations(&[ANN_BOUND_BY_CONTROLLER])]),
                vec![],
            )
            .plugin(one_success())
            .call(Call::SyncVolume),
        row("8-2 successful delete with prebound volume")
            .volumes(volumes([released("volume8-2", "uid8-2", "claim8-2")]), vec![])
            .plugin(one_success())
            .call(Call::SyncVolume),
        row("8-3 plugin not found")
            .volumes(
                volumes([released("volume8-3", "uid8-3", "claim8-3")]),
                volumes([released("volume8-3", "uid8-3", "claim8-3").phase("Failed").message(
                    "Error getting deleter volume plugin for volume \"volume8-3\": no volume plugin matched",
                )]),
            )
            .events(&["Warning VolumeFailedDelete"])
            .call(Call::SyncVolume),
        row("8-4 newDeleter returns error")
            .volumes(
                volumes([released("volume8-4", "uid8-4", "claim8-4")]),
                volumes([released("volume8-4", "uid8-4", "claim8-4").phase("Failed").message(
                    "Failed to create deleter for volume \"volume8-4\": Mock plugin error: no deleteCalls configured",
                )]),
            )
            .plugin(MockConfig::default())
            .events(&["Warning VolumeFailedDelete"])
            .call(Call::SyncVolume),
        row("8-5 delete returns error")
            .volumes(
                volumes([released("volume8-5", "uid8-5", "claim8-5")]),
                volumes([released("volume8-5", "uid8-5", "claim8-5").phase("Failed").message("Mock delete error")]),
            )
            .plugin(MockConfig::default().deletes(&[Some("Mock delete error")]))
            .events(&["Warning VolumeFailedDelete Mock delete error"])
            .call(Call::SyncVolume),
        row("8-6 volume is deleted before deleting")
            .volumes(volumes([released("volume8-6", "uid8-6", "claim8-6")]), vec![])
            .plugin(MockConfig::default())
            .inject(|api, _| {
                api.remove::<PersistentVolume>(None, "volume8-6");
            })
            .call(Call::SyncVolume),
        row("8-7 volume is bound before deleting")
            .volumes(
                volumes([released("volume8-7", "uid8-7", "claim8-7").annotations(&[ANN_BOUND_BY_CONTROLLER])]),
                volumes([released("volume8-7", "uid8-7", "claim8-7").annotations(&[ANN_BOUND_BY_CONTROLLER])]),
            )
            .claims(
                vec![],
                claims([claim("claim8-7", "uid8-7", "10Gi").volume_name("volume8-7").phase("Bound")]),
            )
            .plugin(MockConfig::default())
            .inject(|api, controller| {
                // The claim comes back, bound to the volume (this should
                // never happen), between the decision and the operation.
                let claim: PersistentVolumeClaim =
                    claim("claim8-7", "uid8-7", "10Gi").volume_name("volume8-7").phase("Bound").build();
                let stored = api.put(&claim).expect("put claim");
                let volume: PersistentVolume = released("volume8-7", "uid8-7", "claim8-7")
                    .annotations(&[ANN_BOUND_BY_CONTROLLER])
                    .build();
                api.put(&volume).expect("put volume");
                if let Some(controller) = controller {
                    controller.store().offer_claim(Arc::new(stored)).expect("store claim");
                }
            })
            .call(Call::SyncVolume)
            .settles_with(|s| s.claim("claim8-7", |c| c.annotations(&[ANN_BIND_COMPLETED]))),
        row("8-9 prebound volume is deleted while the claim exists")
            .volumes(volumes([released("volume8-9", "uid8-9", "claim8-9")]), vec![])
            .same_claims(claims([claim("claim8-9", "uid8-9-x", "10Gi")]))
            .plugin(one_success())
            .call(Call::SyncVolume)
            .settled_events(&["Normal FailedBinding"]),
        row("8-10 external deleter")
            .volumes(
                volumes([released("volume8-10", "uid10-1", "claim10-1")
                    .annotations(&[ANN_BOUND_BY_CONTROLLER])
                    .annotation(ANN_DYNAMICALLY_PROVISIONED, "external.io/test")]),
                volumes([released("volume8-10", "uid10-1", "claim10-1")
                    .phase("Released")
                    .annotations(&[ANN_BOUND_BY_CONTROLLER])
                    .annotation(ANN_DYNAMICALLY_PROVISIONED, "external.io/test")]),
            )
            .call(Call::SyncVolume),
        row("8-10-1 external deleter of a CSI volume")
            .volumes(
                volumes([released("volume8-10-1", "uid10-1", "claim10-1")
                    .csi("external.io/test")
                    .annotation(ANN_DYNAMICALLY_PROVISIONED, "external.io/test")]),
                volumes([released("volume8-10-1", "uid10-1", "claim10-1")
                    .csi("external.io/test")
                    .phase("Released")
                    .annotation(ANN_DYNAMICALLY_PROVISIONED, "external.io/test")]),
            )
            .call(Call::SyncVolume),
        // No provisioner made it, and no plugin of this controller deletes
        // CSI volumes: Failed with a Warning, as upstream, rather than left
        // Released without a word.
        row("8-10-2 static CSI volume with policy Delete")
            .volumes(
                volumes([released("volume8-10-2", "uid10-2", "claim10-2").csi("pd.csi.storage.gke.io")]),
                volumes([released("volume8-10-2", "uid10-2", "claim10-2")
                    .csi("pd.csi.storage.gke.io")
                    .phase("Failed")
                    .message("Error getting deleter volume plugin for volume \"volume8-10-2\": no deletable volume plugin matched")]),
            )
            .events(&["Warning VolumeFailedDelete Error getting deleter volume plugin"])
            .call(Call::SyncVolume),
        row("8-10-3 migrated volume is left to the CSI driver")
            .volumes(
                volumes([released("volume8-10-3", "uid10-3", "claim10-3")
                    .annotation(ANN_DYNAMICALLY_PROVISIONED, "kubernetes.io/gce-pd")
                    .annotation(ANN_MIGRATED_TO, "pd.csi.storage.gke.io")]),
                volumes([released("volume8-10-3", "uid10-3", "claim10-3")
                    .phase("Released")
                    .annotation(ANN_DYNAMICALLY_PROVISIONED, "kubernetes.io/gce-pd")
                    .annotation(ANN_MIGRATED_TO, "pd.csi.storage.gke.io")]),
            )
            .call(Call::SyncVolume),
        // A gp2-style volume an in-tree plugin provisioned before migration:
        // it gets migrated-to, keeps the external provisioner's finalizer,
        // gets none of ours, and is never Failed.
        row("8-10-4 released aws-ebs volume is annotated and left to ebs.csi.aws.com")
            .volumes(
                volumes([released("volume8-10-4", "uid10-4", "claim10-4")
                    .annotation(ANN_DYNAMICALLY_PROVISIONED, "kubernetes.io/aws-ebs")
                    .finalizers(&[FINALIZER_EXTERNAL_PROVISIONER])]),
                volumes([released("volume8-10-4", "uid10-4", "claim10-4")
                    .phase("Released")
                    .annotation(ANN_DYNAMICALLY_PROVISIONED, "kubernetes.io/aws-ebs")
                    .annotation(ANN_MIGRATED_TO, "ebs.csi.aws.com")
                    .finalizers(&[FINALIZER_EXTERNAL_PROVISIONER])]),
            )
            .call(Call::SyncVolume),
        row("8-11 two PVs provisioned for a single claim")
            .volumes(
                volumes([
                    released("volume8-11-1", "uid8-11", "claim8-11").annotations(&[ANN_DYNAMICALLY_PROVISIONED]),
                    released("volume8-11-2", "uid8-11", "claim8-11").annotations(&[ANN_DYNAMICALLY_PROVISIONED]),
                ]),
                volumes([released("volume8-11-2", "uid8-11", "claim8-11").annotations(&[ANN_DYNAMICALLY_PROVISIONED])]),
            )
            .same_claims(claims([claim("claim8-11", "uid8-11", "10Gi").volume_name("volume8-11-2").phase("Bound")]))
            .plugin(one_success())
            .call(Call::SyncVolume)
            .settles_with(|s| {
                s.volume("volume8-11-2", |v| v.finalizers(&[FINALIZER_PV_CONTROLLER]))
                    .claim("claim8-11", |c| c.annotations(&[ANN_BIND_COMPLETED]))
            }),
        row("8-12 two PVs externally provisioned for a single claim")
            .volumes(
                volumes([
                    released("volume8-12-1", "uid8-12", "claim8-12").annotation(ANN_DYNAMICALLY_PROVISIONED, "external.io/test"),
                    released("volume8-12-2", "uid8-12", "claim8-12").annotations(&[ANN_DYNAMICALLY_PROVISIONED]),
                ]),
                volumes([
                    released("volume8-12-1", "uid8-12", "claim8-12")
                        .phase("Released")
                        .annotation(ANN_DYNAMICALLY_PROVISIONED, "external.io/test"),
                    released("volume8-12-2", "uid8-12", "claim8-12").annotations(&[ANN_DYNAMICALLY_PROVISIONED]),
                ]),
            )
            .same_claims(claims([claim("claim8-12", "uid8-12", "10Gi").volume_name("volume8-12-2").phase("Bound")]))
            .call(Call::SyncVolume)
            .settles_with(|s| {
                s.volume("volume8-12-2", |v| v.finalizers(&[FINALIZER_PV_CONTROLLER]))
                    .claim("claim8-12", |c| c.annotations(&[ANN_BIND_COMPLETED]))
            }),
        row("8-13 volume deleted by a user while bound is reclaimed once released")
            .volumes(
                volumes([released("volume8-13", "uid8-13", "claim8-13")
                    .annotations(&[ANN_DYNAMICALLY_PROVISIONED])
                    .deleting()
                    .finalizers(&[FINALIZER_PV_PROTECTION, FINALIZER_PV_CONTROLLER])]),
                // Storage deleted and recorded so, our finalizer gone;
                // pv-protection's finalizer is another controller's to remove.
                volumes([released("volume8-13", "uid8-13", "claim8-13")
                    .phase("Released")
                    .annotations(&[ANN_DYNAMICALLY_PROVISIONED, ANN_STORAGE_DELETED])
                    .deleting()]),
            )
            .plugin(one_success())
            .call(Call::SyncVolume),
        // A volume provisioned before the deletion finalizer existed, deleted
        // by a user while bound: no finalizer of ours does not mean its
        // storage is gone. It is deleted, once (the mock allows one call).
        row("8-14 volume without the finalizer deleted by a user is reclaimed once released")
            .volumes(
                volumes([released("volume8-14", "uid8-14", "claim8-14")
                    .annotations(&[ANN_DYNAMICALLY_PROVISIONED])
                    .deleting()]),
                volumes([released("volume8-14", "uid8-14", "claim8-14")
                    .phase("Released")
                    .annotations(&[ANN_DYNAMICALLY_PROVISIONED, ANN_STORAGE_DELETED])
                    .deleting()]),
            )
            .plugin(one_success())
            .call(Call::SyncVolume),
    ])
    .await;
}

#[tokio::test(start_paused = true)]
async fn set_9_delete_retried_after_error() {
    run_table(vec![
        row("9-1 delete returns error")
            .volumes(
                volumes([released("volume9-1", "uid9-1", "claim9-1")]),
                volumes([released("volume9-1", "uid9-1", "claim9-1")
                    .phase("Failed")
                    .message("Mock delete error")]),
            )
            .plugin(MockConfig::default().deletes(&[Some("Mock delete error"), None]))
            .events(&["Warning VolumeFailedDelete"])
            .call(Call::SyncVolume)
            .settles_with(|s| s.without_volume("volume9-1")),
    ])
    .await;
}

/// A server with one released Delete volume, and a controller using `mock`.
fn server_and_controller(mock: Arc<MockPlugin>, resync: Duration) -> (MemApi, pv::Config) {
    let api = MemApi::new();
    api.create(
        &released("volume-x", "uid-x", "claim-x")
            .phase("Released")
            .build(),
    )
    .expect("seed");
    let config = pv::Config {
        resync_period: resync,
        settings: Settings {
            plugins: VolumePlugins::default().with(mock),
            ..Settings::default()
        },
        ..pv::Config::default()
    };
    (api, config)
}

#[tokio::test(start_paused = true)]
async fn concurrent_syncs_of_one_volume_start_one_delete() {
    let mock = Arc::new(MockPlugin::new(
        MockConfig::default()
            .deletes(&[None])
            .delete_delay(Duration::from_secs(3)),
    ));
    let (api, config) = server_and_controller(Arc::clone(&mock), Duration::from_secs(15));
    let (_app, controller) = direct_binder(&api, config).await.expect("controller");
    let volume = controller
        .store()
        .volume(&VolumeName::new("volume-x"))
        .expect("stored");
    let (a, b, c) = tokio::join!(
        controller.sync_volume(&volume),
        controller.sync_volume(&volume),
        controller.sync_volume(&volume),
    );
    for ended in [a, b, c] {
        assert!(
            !matches!(ended, Ended::Failed(_)),
            "syncs succeed: {ended:?}"
        );
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(controller.operations().running_count(), 1);
    let ended = controller.sync_volume(&volume).await;
    assert!(
        !matches!(ended, Ended::Failed(_)),
        "sync while running: {ended:?}"
    );
    controller.operations().wait_idle().await;
    assert_eq!(
        mock.calls.lock().unwrap().deletes.len(),
        1,
        "one delete only"
    );
    assert!(api.get::<PersistentVolume>(None, "volume-x").is_none());
}

#[tokio::test(start_paused = true)]
async fn failing_deleter_is_retried_with_growing_intervals() {
    let mock = Arc::new(MockPlugin::new(MockConfig::default().deletes(&[
        Some("backend down"),
        Some("backend down"),
        Some("backend down"),
        Some("backend down"),
        None,
    ])));
    // A fast resync, so the retries are paced by the backoff, not by it.
    let (api, config) = server_and_controller(Arc::clone(&mock), Duration::from_millis(100));
    let running = Running::binder_with(&api, config).await;
    running.settle().await;
    running.stop().await;
    let calls = mock.calls.lock().unwrap().deletes.clone();
    assert_eq!(calls.len(), 5, "four failures, then success");
    let gaps: Vec<Duration> = calls.windows(2).map(|w| w[1] - w[0]).collect();
    for (gap, backoff) in gaps.iter().zip([500u64, 1000, 2000, 4000]) {
        let backoff = Duration::from_millis(backoff);
        assert!(
            *gap >= backoff && *gap < backoff + Duration::from_millis(300),
            "gaps {gaps:?} should follow the backoff"
        );
    }
    assert!(
        api.get::<PersistentVolume>(None, "volume-x").is_none(),
        "deleted in the end"
    );
}

#[tokio::test(start_paused = true)]
async fn a_volume_recreated_under_the_same_name_is_not_deleted() {
    let mock = Arc::new(MockPlugin::new(
        MockConfig::default()
            .deletes(&[None])
            .delete_delay(Duration::from_secs(3)),
    ));
    let (api, config) = server_and_controller(Arc::clone(&mock), Duration::from_secs(15));
    let (_app, controller) = direct_binder(&api, config).await.expect("controller");
    let released = controller
        .store()
        .volume(&VolumeName::new("volume-x"))
        .expect("stored");
    let ended = controller.sync_volume(&released).await;
    assert!(!matches!(ended, Ended::Failed(_)), "sync: {ended:?}");
    // While the storage is being deleted, an administrator deletes the
    // volume object and creates a new one under the same name.
    tokio::time::sleep(Duration::from_secs(1)).await;
    api.remove::<PersistentVolume>(None, "volume-x");
    let fresh = api
        .create(&volume("volume-x", "5Gi").phase("Available").build())
        .expect("re-create");
    controller.operations().wait_idle().await;
    let survivor = api
        .get::<PersistentVolume>(None, "volume-x")
        .expect("the new volume is still there");
    assert_eq!(survivor.metadata.uid, fresh.metadata.uid);
    assert!(
        survivor.metadata.deletion_timestamp.is_none(),
        "the new volume is not being deleted"
    );
}

/// A released Delete volume held by the protection finalizer every volume
/// gets on a real cluster: when its storage is deleted and recorded but
/// deleting the object fails, the next run of the operation deletes the
/// object (the record only keeps the storage from being deleted twice).
/// Before, the record alone was taken for a volume already being deleted,
/// and the volume stayed Released, its storage gone, for good.
#[tokio::test(start_paused = true)]
async fn a_volume_whose_object_delete_failed_after_its_storage_went_is_still_deleted() {
    let mock = Arc::new(MockPlugin::new(MockConfig::default().deletes(&[None])));
    let api = MemApi::new();
    api.create(
        &released("volume-x", "uid-x", "claim-x")
            .phase("Released")
            .finalizers(&[FINALIZER_PV_PROTECTION])
            .build(),
    )
    .expect("seed");
    let failed = api.add_reactor(
        memapi::Reactor::on(memapi::Verb::Delete, "persistentvolumes")
            .error(500)
            .times(1),
    );
    let config = pv::Config {
        resync_period: Duration::from_secs(15),
        settings: Settings {
            plugins: VolumePlugins::default().with(Arc::clone(&mock) as _),
            ..Settings::default()
        },
        ..pv::Config::default()
    };
    let running = Running::binder_with(&api, config).await;
    running.settle().await;
    tokio::time::sleep(Duration::from_secs(30)).await;
    running.settle().await;
    running.stop().await;
    assert_eq!(
        api.reactor_fired(failed),
        Some(1),
        "the first delete failed"
    );
    assert_eq!(
        mock.calls.lock().unwrap().deletes.len(),
        1,
        "the storage is deleted once"
    );
    let volume = api
        .get::<PersistentVolume>(None, "volume-x")
        .expect("held by its protection finalizer");
    assert!(
        volume.metadata.deletion_timestamp.is_some(),
        "the object is being deleted"
    );
    assert_eq!(
        volume.metadata.finalizers,
        Some(vec![FINALIZER_PV_PROTECTION.to_string()])
    );
    let annotations = volume.metadata.annotations.unwrap_or_default();
    assert!(annotations.contains_key(ANN_STORAGE_DELETED));
}
