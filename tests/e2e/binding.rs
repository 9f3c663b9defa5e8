//! Static binding: the smallest volume that fits wins, and what a user
//! pre-binds (a volume's claimRef, a claim's volumeName, or both) is kept.

use std::sync::Arc;
use std::time::Duration;

use anyhow::ensure;
use k8s_names::{ANN_BIND_COMPLETED, ANN_BOUND_BY_CONTROLLER};
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use testkit::claim;

use crate::support::case::{annotation, volume_phase};
use crate::support::{Case, wait};

/// Three volumes of 1, 5 and 10 GiB; a claim of 3 GiB gets the 5 GiB one,
/// and both objects say so the way upstream writes them.
pub(crate) async fn best_fit(case: Arc<Case>) -> anyhow::Result<()> {
    let class = case.name("manual");
    let sizes = [("small", "1Gi"), ("fit", "5Gi"), ("large", "10Gi")];
    for (suffix, size) in sizes {
        case.create_volume(case.host_path_volume(suffix, size)?.class(&class))
            .await?;
    }
    for (suffix, _) in sizes {
        case.volume_phase(&case.name(suffix), "Available").await?;
    }
    case.create_claim(claim("data", "", "3Gi").class(&class))
        .await?;

    let bound = case.claim_phase("data", "Bound").await?;
    let fit = case.name("fit");
    check_pair(&case, &bound, &fit, (true, true)).await?;
    let status = bound.status.clone().unwrap_or_default();
    ensure!(
        status
            .capacity
            .as_ref()
            .and_then(|c| c.get("storage"))
            .map(|q| q.0.as_str())
            == Some("5Gi"),
        "the claim reports the volume's capacity: {status:?}"
    );
    let others = [case.name("small"), case.name("large")];
    wait::holds(
        "the other volumes stay Available",
        Duration::from_secs(3),
        || async {
            for name in &others {
                let volume = case.volumes().get(name).await?;
                if volume_phase(&volume) != "Available" {
                    return Ok(Err(format!("{name} is {}", volume_phase(&volume))));
                }
            }
            Ok(Ok(()))
        },
    )
    .await?;
    case.expect_events("pvc", "data", &[]).await?;
    case.expect_events("pv", &fit, &[]).await?;
    Ok(())
}

/// A volume pre-bound to a claim by name wins over a better fit; a claim
/// naming a volume gets it; a pair naming each other binds. Only what the
/// controller itself filled in is marked bound-by-controller.
pub(crate) async fn pre_bound(case: Arc<Case>) -> anyhow::Result<()> {
    let class = case.name("manual");
    let namespace = case.namespace.clone();
    case.create_volume(case.host_path_volume("small", "1Gi")?.class(&class))
        .await?;
    case.create_volume(
        case.host_path_volume("reserved", "10Gi")?
            .class(&class)
            .claim_ref(&namespace, "chosen", ""),
    )
    .await?;
    case.create_volume(case.host_path_volume("named", "2Gi")?.class(&class))
        .await?;
    case.create_volume(
        case.host_path_volume("mutual", "1Gi")?
            .class(&class)
            .claim_ref(&namespace, "mutual", ""),
    )
    .await?;
    for suffix in ["small", "reserved", "named", "mutual"] {
        case.volume_phase(&case.name(suffix), "Available").await?;
    }
    case.create_claim(claim("chosen", "", "1Gi").class(&class))
        .await?;
    case.create_claim(
        claim("named", "", "1Gi")
            .class(&class)
            .volume_name(&case.name("named")),
    )
    .await?;
    case.create_claim(
        claim("mutual", "", "1Gi")
            .class(&class)
            .volume_name(&case.name("mutual")),
    )
    .await?;

    // (volume marked bound-by-controller, claim marked bound-by-controller)
    let expected = [
        ("chosen", "reserved", (false, true)),
        ("named", "named", (true, false)),
        ("mutual", "mutual", (false, false)),
    ];
    for (claim_name, volume_suffix, marks) in expected {
        let bound = case.claim_phase(claim_name, "Bound").await?;
        check_pair(&case, &bound, &case.name(volume_suffix), marks).await?;
        case.expect_events("pvc", claim_name, &[]).await?;
    }
    let small = case.volumes().get(&case.name("small")).await?;
    ensure!(
        volume_phase(&small) == "Available",
        "the better fit stays Available"
    );
    Ok(())
}

/// Checks that `claim` and the volume `volume` are bound to each other,
/// with bind-completed on the claim and bound-by-controller where `marks`
/// (volume, claim) says the controller filled the reference in.
async fn check_pair(
    case: &Case,
    claim: &PersistentVolumeClaim,
    volume: &str,
    (volume_marked, claim_marked): (bool, bool),
) -> anyhow::Result<()> {
    let name = claim.metadata.name.clone().unwrap_or_default();
    let spec = claim.spec.clone().unwrap_or_default();
    ensure!(
        spec.volume_name.as_deref() == Some(volume),
        "{name} names {:?}, not {volume}",
        spec.volume_name
    );
    ensure!(
        annotation(&claim.metadata, ANN_BIND_COMPLETED) == Some("yes"),
        "{name}: bind-completed"
    );
    ensure!(
        annotation(&claim.metadata, ANN_BOUND_BY_CONTROLLER).is_some() == claim_marked,
        "{name}: bound-by-controller should be {claim_marked}: {:?}",
        claim.metadata.annotations
    );
    let pv: PersistentVolume = case.volume_phase(volume, "Bound").await?;
    let reference = pv
        .spec
        .clone()
        .unwrap_or_default()
        .claim_ref
        .unwrap_or_default();
    ensure!(
        reference.namespace.as_deref() == Some(case.namespace.as_str())
            && reference.name.as_deref() == Some(name.as_str())
            && reference.uid == claim.metadata.uid,
        "{volume}'s claimRef {reference:?} is not {name} ({:?})",
        claim.metadata.uid
    );
    ensure!(
        annotation(&pv.metadata, ANN_BOUND_BY_CONTROLLER).is_some() == volume_marked,
        "{volume}: bound-by-controller should be {volume_marked}: {:?}",
        pv.metadata.annotations
    );
    Ok(())
}
