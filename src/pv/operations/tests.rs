//! A provisioning acts on the claim as the store knows it when the storage
//! would be made, not as it was when the provisioning was decided.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use memapi::MemApi;
use testkit::{claim, storage_class, volume};

use super::Operations;
use crate::pv::controller_base::Controller;
use crate::pv::keys;
use crate::pv::plugins::ProvisionRequest;
use crate::pv::plugins::{PluginError, VolumePlugin, VolumePlugins};
use crate::runtime::informer::Store;
use k8s_names::{ANN_BETA_STORAGE_PROVISIONER, ANN_STORAGE_PROVISIONER};

const PLUGIN: &str = "example.com/counting";

/// Provisions a 1Gi volume and counts the provisions and deletes.
#[derive(Default)]
struct Counting(AtomicUsize, AtomicUsize);

impl VolumePlugin for Counting {
    fn name(&self) -> &str {
        PLUGIN
    }

    fn can_provision(&self) -> bool {
        true
    }

    fn can_delete(&self, _volume: &PersistentVolume) -> bool {
        true
    }

    fn delete<'a>(
        &'a self,
        _volume: &'a PersistentVolume,
    ) -> BoxFuture<'a, std::result::Result<(), PluginError>> {
        self.1.fetch_add(1, Ordering::SeqCst);
        Box::pin(async { Ok(()) })
    }

    fn provision<'a>(
        &'a self,
        request: &'a ProvisionRequest,
    ) -> BoxFuture<'a, std::result::Result<PersistentVolume, PluginError>> {
        self.0.fetch_add(1, Ordering::SeqCst);
        let made = volume(&request.pv_name, "1Gi").build();
        Box::pin(async move { Ok(made) })
    }
}

/// The claim as the provisioning was decided: handed to the plugin
/// already (so no claim write checks it), naming no volume.
fn decided() -> PersistentVolumeClaim {
    let mut decided = claim("c", "uid-c", "1Gi").class("fast").build();
    decided.metadata.annotations = Some(
        [ANN_STORAGE_PROVISIONER, ANN_BETA_STORAGE_PROVISIONER]
            .into_iter()
            .map(|key| (key.to_string(), PLUGIN.to_string()))
            .collect(),
    );
    decided
}

/// A controller on `client` whose plugins are `plugin`, knowing the class
/// `fast` of `plugin`.
fn controller(client: kube::Client, plugin: &Arc<Counting>) -> Controller {
    let settings = crate::pv::controller::Settings {
        plugins: VolumePlugins::default().with(Arc::clone(plugin) as Arc<dyn VolumePlugin>),
        ..crate::pv::controller::Settings::default()
    };
    let controller =
        crate::pv::controller_base::tests::support::controller_with(client, settings).controller;
    controller
        .binder()
        .classes
        .watched(&Arc::new(storage_class("fast", PLUGIN, "Immediate")));
    controller
}

/// Runs the provisioning of the claim `c` (uid-c) as its operation would.
async fn provision(controller: &Controller, client: kube::Client) {
    let operations = Operations {
        binder: controller.binder().clone(),
        client,
    };
    let name = keys::provision("default", "c", "uid-c");
    // A provisioning that finds nothing to do ends well; one refused by
    // the write gate fails, and the test looks at what it left.
    let _ = Box::pin(operations.provision(
        &name,
        crate::pv::controller_base::tests::support::executor(controller),
    ))
    .await;
}

/// Runs the provisioning of `decided()` with the store holding `now` for
/// the claim; returns the plugin's calls and the volumes stored.
async fn provision_with_store_holding(now: Option<PersistentVolumeClaim>) -> (usize, usize) {
    let api = MemApi::new();
    let plugin = Arc::new(Counting::default());
    let controller = controller(api.client(), &plugin);
    let stored = api.create(&decided()).expect("claim");
    if let Some(mut now) = now {
        now.metadata.resource_version = stored.metadata.resource_version.clone();
        controller
            .store()
            .offer_claim(Arc::new(now))
            .expect("store claim");
    }
    provision(&controller, api.client()).await;
    (
        plugin.0.load(Ordering::SeqCst),
        api.list::<PersistentVolume>().len(),
    )
}

#[tokio::test]
async fn a_claim_still_waiting_gets_its_volume() {
    assert_eq!(
        Box::pin(provision_with_store_holding(Some(decided()))).await,
        (1, 1)
    );
}

#[tokio::test]
async fn a_claim_bound_to_another_volume_since_gets_none() {
    let mut bound = decided();
    bound.spec.get_or_insert_with(Default::default).volume_name = Some("other".to_string());
    assert_eq!(
        Box::pin(provision_with_store_holding(Some(bound))).await,
        (0, 0)
    );
}

#[tokio::test]
async fn a_claim_deleted_since_gets_none() {
    assert_eq!(Box::pin(provision_with_store_holding(None)).await, (0, 0));
}

/// A repeated provisioning (the claim handed to the plugin already, so no
/// claim write reaches the server) of a claim the store still holds but the
/// server deleted, its first volume released and deleted meanwhile: the
/// claim read from the server stops it.
#[tokio::test]
async fn a_claim_deleted_on_the_server_but_still_stored_gets_none() {
    let api = MemApi::new();
    let plugin = Arc::new(Counting::default());
    let controller = controller(api.client(), &plugin);
    let stored = api.create(&decided()).expect("claim");
    controller
        .store()
        .offer_claim(Arc::new(stored.clone()))
        .expect("store claim");
    assert!(api.remove::<PersistentVolumeClaim>(Some("default"), "c"));
    provision(&controller, api.client()).await;
    assert_eq!(plugin.0.load(Ordering::SeqCst), 0, "no storage made");
    assert!(
        api.list::<PersistentVolume>().is_empty(),
        "no volume stored"
    );
}

#[tokio::test]
async fn a_claim_re_created_since_gets_none_for_the_old_one() {
    let mut replaced = decided();
    replaced.metadata.uid = Some("uid-new".to_string());
    assert_eq!(
        Box::pin(provision_with_store_holding(Some(replaced))).await,
        (0, 0)
    );
}

/// The lease is lost while the volume object is created: every create is
/// refused by the write gate. The next leader may have found an object an
/// unanswered attempt stored, and reclaimed it already; the storage is its
/// to decide on, so this replica deletes nothing (found by the chaos suite:
/// storage deleted by a replica that had lost the lease, for a volume the
/// new leader had reclaimed).
#[tokio::test(start_paused = true)]
async fn a_replica_that_lost_the_lease_deletes_no_storage() {
    let api = MemApi::new();
    let clients = crate::runtime::client::Clients::build(
        kube::client::ClientBuilder::new(api.service(), "default"),
        kube::client::ClientBuilder::new(api.service(), "default"),
        kube::client::ClientBuilder::new(api.service(), "default"),
        crate::runtime::client::ClientOptions::default(),
    );
    let plugin = Arc::new(Counting::default());
    let controller = controller(clients.controller.clone(), &plugin);
    let stored = api.create(&decided()).expect("claim");
    controller
        .store()
        .offer_claim(Arc::new(stored.clone()))
        .expect("store claim");
    provision(&controller, clients.controller).await;
    assert_eq!(plugin.0.load(Ordering::SeqCst), 1, "storage provisioned");
    assert_eq!(plugin.1.load(Ordering::SeqCst), 0, "storage deleted");
    assert!(api.list::<PersistentVolume>().is_empty());
}
