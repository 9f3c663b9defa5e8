//! Recycle, twice, with the first release's recycler pod lingering (its
//! node gone): the second release is never made Available on the old
//! pod's word, only after a pod of its own ran.

use std::sync::Arc;
use std::time::Duration;

use anyhow::ensure;
use k8s_names::ANN_RECYCLED_VOLUME_UID;
use k8s_names::ANN_RELEASED_CLAIM_UID;
use k8s_openapi::api::core::v1::Pod;
use testkit::claim;

use crate::support::case::{annotation, volume_phase};
use crate::support::{Case, kubelet, wait};

const STALE: &str = "Recycle failed: old recycler pod found, will retry later";

/// Binds claim `tenant` to the volume and deletes it; returns its UID.
async fn tenancy(case: &Case, tenant: &str, class: &str, volume: &str) -> anyhow::Result<String> {
    let created = case
        .create_claim(claim(tenant, "", "1Gi").class(class))
        .await?;
    case.claim_phase(tenant, "Bound").await?;
    case.volume_phase(volume, "Bound").await?;
    case.delete_claim(tenant).await?;
    Ok(created.metadata.uid.unwrap_or_default())
}

/// Checks that `pod` was made for this release of `volume`.
fn made_for(pod: &Pod, volume_uid: &str, claim_uid: &str) -> anyhow::Result<()> {
    ensure!(
        annotation(&pod.metadata, ANN_RECYCLED_VOLUME_UID) == Some(volume_uid)
            && annotation(&pod.metadata, ANN_RELEASED_CLAIM_UID) == Some(claim_uid),
        "pod made for volume {volume_uid} and claim {claim_uid}: {:?}",
        pod.metadata.annotations
    );
    Ok(())
}

/// Two releases of one volume; the first one's pod lingers through the
/// second until the test lets it go.
pub(crate) async fn twice_with_lingering_pod(case: Arc<Case>) -> anyhow::Result<()> {
    let class = case.name("manual");
    let created = case
        .create_volume(
            case.host_path_volume("recycled", "1Gi")?
                .class(&class)
                .policy("Recycle"),
        )
        .await?;
    let volume = created.metadata.name.clone().unwrap_or_default();
    let volume_uid = created.metadata.uid.clone().unwrap_or_default();
    case.volume_phase(&volume, "Available").await?;
    let first_pod = first_release(&case, &class, &volume, &volume_uid).await?;
    second_release(&case, &class, &volume, &volume_uid, &first_pod).await?;

    let rows = case
        .expect_events(
            "pv",
            &volume,
            &[
                ("Normal", "VolumeRecycled", "Volume recycled"),
                ("Warning", "VolumeFailedRecycle", STALE),
            ],
        )
        .await?;
    let recycled_row = rows.iter().find(|r| r.reason == "VolumeRecycled");
    ensure!(
        recycled_row.is_some_and(|r| r.age.contains("(x2 over")),
        "recycled twice, one event counted twice: {rows:?}"
    );
    Ok(())
}

/// The first tenant goes; its recycler pod, held by a finalizer as if its
/// node were gone, succeeds and is deleted but lingers. Returns that pod.
async fn first_release(
    case: &Case,
    class: &str,
    volume: &str,
    volume_uid: &str,
) -> anyhow::Result<Pod> {
    let first = tenancy(case, "first", class, volume).await?;
    let first_pod = kubelet::recycler_pod(case, volume, None).await?;
    made_for(&first_pod, volume_uid, &first)?;
    kubelet::hold(case, &first_pod).await?;
    kubelet::succeed(case, &first_pod).await?;
    let recycled = case.volume_phase(volume, "Available").await?;
    ensure!(
        recycled.spec.and_then(|s| s.claim_ref).is_none(),
        "the controller's claimRef is cleared"
    );
    let pod_name = first_pod.metadata.name.clone().unwrap_or_default();
    wait::until("the first pod is deleted and lingers", || async {
        Ok(match kubelet::pod(case, &pod_name).await? {
            Some(pod) if pod.metadata.deletion_timestamp.is_some() => Ok(()),
            other => Err(format!(
                "{:?}",
                other.map(|p| p.metadata.deletion_timestamp)
            )),
        })
    })
    .await?;
    Ok(first_pod)
}

/// The second tenant goes while the first pod lingers: the volume fails
/// and stays unavailable until the old pod is gone and a pod of this
/// release ran.
async fn second_release(
    case: &Case,
    class: &str,
    volume: &str,
    volume_uid: &str,
    first_pod: &Pod,
) -> anyhow::Result<()> {
    let second = tenancy(case, "second", class, volume).await?;
    let failed = case.volume_phase(volume, "Failed").await?;
    ensure!(
        failed.status.and_then(|s| s.message).as_deref() == Some(STALE),
        "the volume says why"
    );
    wait::holds(
        "never Available on the old pod's word",
        Duration::from_secs(3),
        || async {
            let phase = volume_phase(&case.volumes().get(volume).await?).to_string();
            Ok(if phase == "Available" {
                Err(phase)
            } else {
                Ok(())
            })
        },
    )
    .await?;

    let pod_name = first_pod.metadata.name.clone().unwrap_or_default();
    kubelet::release(case, &pod_name).await?;
    let second_pod = kubelet::recycler_pod(case, volume, first_pod.metadata.uid.as_deref()).await?;
    made_for(&second_pod, volume_uid, &second)?;
    let before = case.volumes().get(volume).await?;
    ensure!(
        volume_phase(&before) != "Available",
        "not Available before its own pod ran"
    );
    kubelet::succeed(case, &second_pod).await?;
    case.volume_phase(volume, "Available").await?;
    Ok(())
}
