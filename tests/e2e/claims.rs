//! Claims that lost their volume, or never had the one they claim: each
//! goes Lost with upstream's Warning, and the rightful pair stays Bound.

use std::sync::Arc;

use anyhow::ensure;
use k8s_names::ANN_BIND_COMPLETED;
use kube::api::DeleteParams;
use testkit::claim;

use crate::support::Case;
use crate::support::case::strip_finalizers;

const LOST_VOLUME: &str = "Bound claim has lost its PersistentVolume. Data on the volume is lost!";
const LOST_REFERENCE: &str =
    "Bound claim has lost reference to PersistentVolume. Data on the volume is lost!";
const MISBOUND: &str = "Two claims are bound to the same volume, this one is bound incorrectly";

/// A claim whose volume vanished, one marked bound that names no volume,
/// and one marked bound to another claim's volume.
pub(crate) async fn lost_and_misbound(case: Arc<Case>) -> anyhow::Result<()> {
    let class = case.name("manual");
    for suffix in ["gone", "shared"] {
        case.create_volume(case.host_path_volume(suffix, "1Gi")?.class(&class))
            .await?;
        case.volume_phase(&case.name(suffix), "Available").await?;
    }
    for (claim_name, volume) in [("orphan", "gone"), ("owner", "shared")] {
        case.create_claim(
            claim(claim_name, "", "1Gi")
                .class(&class)
                .volume_name(&case.name(volume)),
        )
        .await?;
        case.claim_phase(claim_name, "Bound").await?;
    }

    // The volume vanishes under its claim.
    let gone = case.name("gone");
    case.volumes()
        .delete(&gone, &DeleteParams::default())
        .await?;
    strip_finalizers(&case.volumes(), &gone).await?;
    case.claim_phase("orphan", "Lost").await?;
    case.expect_events("pvc", "orphan", &[("Warning", "ClaimLost", LOST_VOLUME)])
        .await?;

    // A claim marked bound that names no volume.
    case.create_claim(
        claim("dangling", "", "1Gi")
            .class(&class)
            .annotation(ANN_BIND_COMPLETED, "yes"),
    )
    .await?;
    case.claim_phase("dangling", "Lost").await?;
    case.expect_events(
        "pvc",
        "dangling",
        &[("Warning", "ClaimLost", LOST_REFERENCE)],
    )
    .await?;

    // A second claim marked bound to a volume bound to the first.
    let shared = case.name("shared");
    case.create_claim(
        claim("intruder", "", "1Gi")
            .class(&class)
            .volume_name(&shared)
            .annotation(ANN_BIND_COMPLETED, "yes"),
    )
    .await?;
    case.claim_phase("intruder", "Lost").await?;
    case.expect_events("pvc", "intruder", &[("Warning", "ClaimMisbound", MISBOUND)])
        .await?;
    let owner = case.claim_phase("owner", "Bound").await?;
    let volume = case.volume_phase(&shared, "Bound").await?;
    let reference = volume.spec.and_then(|s| s.claim_ref).unwrap_or_default();
    ensure!(
        reference.name.as_deref() == Some("owner") && reference.uid == owner.metadata.uid,
        "the volume stays with its owner: {reference:?}"
    );
    case.expect_events("pvc", "owner", &[]).await?;
    Ok(())
}
