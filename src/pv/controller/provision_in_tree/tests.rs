//! A provisioning acts on the claim as the shadow cache knows it when the
//! storage would be made, not as it was when the provisioning was decided.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use memapi::MemApi;
use testkit::{claim, storage_class, volume};

use super::*;
use crate::pv::constants::{ANN_BETA_STORAGE_PROVISIONER, ANN_STORAGE_PROVISIONER};
use crate::pv::plugins::ProvisionRequest;

const PLUGIN: &str = "example.com/counting";

/// Provisions a 1Gi volume and counts the calls.
#[derive(Default)]
struct Counting(AtomicUsize);

impl VolumePlugin for Counting {
    fn name(&self) -> &str {
        PLUGIN
    }

    fn can_provision(&self) -> bool {
        true
    }

    fn provision<'a>(
        &'a self,
        request: &'a ProvisionRequest,
    ) -> futures::future::BoxFuture<'a, std::result::Result<PersistentVolume, PluginError>> {
        self.0.fetch_add(1, Ordering::SeqCst);
        let made = volume(&request.pv_name, "1Gi").build();
        let answer: BoxFuture<'a, _> = Box::pin(async move { Ok(made) });
        answer
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

/// Runs the provisioning of `decided()` with the shadow cache holding
/// `now` for the claim; returns the plugin's calls and the volumes stored.
async fn provision_with_cache_holding(now: Option<PersistentVolumeClaim>) -> (usize, usize) {
    let api = MemApi::new();
    let controller = crate::pv::controller::testing::controller(&api);
    let stored = api.create(&decided()).expect("claim");
    if let Some(mut now) = now {
        now.metadata.resource_version = stored.metadata.resource_version.clone();
        controller
            .cache()
            .offer_claim(Arc::new(now))
            .expect("cache claim");
    }
    let plugin = Arc::new(Counting::default());
    let class = Arc::new(storage_class("fast", PLUGIN, "Immediate"));
    controller
        .provision_in_tree(Arc::new(stored), plugin.clone(), class)
        .await
        .expect("provisioning");
    (
        plugin.0.load(Ordering::SeqCst),
        api.list::<PersistentVolume>().len(),
    )
}

#[tokio::test]
async fn a_claim_still_waiting_gets_its_volume() {
    assert_eq!(provision_with_cache_holding(Some(decided())).await, (1, 1));
}

#[tokio::test]
async fn a_claim_bound_to_another_volume_since_gets_none() {
    let mut bound = decided();
    bound.spec.get_or_insert_with(Default::default).volume_name = Some("other".to_string());
    assert_eq!(provision_with_cache_holding(Some(bound)).await, (0, 0));
}

#[tokio::test]
async fn a_claim_deleted_since_gets_none() {
    assert_eq!(provision_with_cache_holding(None).await, (0, 0));
}

#[tokio::test]
async fn a_claim_re_created_since_gets_none_for_the_old_one() {
    let mut replaced = decided();
    replaced.metadata.uid = Some("uid-new".to_string());
    assert_eq!(provision_with_cache_holding(Some(replaced)).await, (0, 0));
}
