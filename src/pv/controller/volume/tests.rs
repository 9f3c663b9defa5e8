//! A volume sync against a store that still holds a claim the
//! server has deleted.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use memapi::MemApi;
use testkit::{claim, volume};

#[tokio::test]
async fn a_released_volume_is_not_bound_again_to_a_claim_only_the_cache_holds() {
    let api = MemApi::new();
    let controller = crate::pv::controller_base::testing::controller(&api);
    let gone = api
        .create(&claim("c", "uid-c", "1Gi").volume_name("v").build())
        .expect("claim");
    controller
        .store()
        .offer_claim(Arc::new(gone))
        .expect("cache claim");
    assert!(api.remove::<PersistentVolumeClaim>(Some("default"), "c"));
    let released = api
        .put(
            &volume("v", "1Gi")
                .bound_to("uid-c", "c")
                .phase("Released")
                .build(),
        )
        .expect("volume");
    let released = Arc::new(released);
    controller
        .store()
        .offer_volume(Arc::clone(&released))
        .expect("cache volume");

    let ended = Box::pin(controller.sync_volume(&released)).await;
    assert_eq!(ended, crate::runtime::workload::Ended::Done);

    let now = api.get::<PersistentVolume>(None, "v").expect("volume");
    assert_eq!(
        now.status.and_then(|status| status.phase).as_deref(),
        Some("Released"),
        "the volume stays released"
    );
}
