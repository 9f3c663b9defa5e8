//! Reclaim policies Retain and Delete, on hostPath volumes whose storage is
//! a directory on this machine (where the controller runs).

use std::sync::Arc;
use std::time::Duration;

use anyhow::ensure;
use testkit::claim;

use crate::support::case::volume_phase;
use crate::support::{Case, wait};

/// Binds a hostPath volume of `policy` to claim `data` and deletes the
/// claim; returns the volume's name and directory.
async fn bind_and_release(
    case: &Case,
    policy: &str,
) -> anyhow::Result<(String, std::path::PathBuf)> {
    let class = case.name("manual");
    let volume = case
        .create_volume(
            case.host_path_volume("storage", "1Gi")?
                .class(&class)
                .policy(policy),
        )
        .await?;
    let name = volume.metadata.name.clone().unwrap_or_default();
    let path = volume
        .spec
        .and_then(|s| s.host_path)
        .map(|h| std::path::PathBuf::from(h.path))
        .unwrap_or_default();
    case.volume_phase(&name, "Available").await?;
    case.create_claim(claim("data", "", "1Gi").class(&class))
        .await?;
    case.claim_phase("data", "Bound").await?;
    case.volume_phase(&name, "Bound").await?;
    case.delete_claim("data").await?;
    Ok((name, path))
}

/// Retain: the released volume keeps its claimRef and its data, for good.
pub(crate) async fn retain(case: Arc<Case>) -> anyhow::Result<()> {
    let (name, path) = bind_and_release(&case, "Retain").await?;
    case.volume_phase(&name, "Released").await?;
    wait::holds(
        "Released, kept, data untouched",
        Duration::from_secs(4),
        || async {
            let volume = case.volumes().get(&name).await?;
            let reference = volume
                .spec
                .clone()
                .and_then(|s| s.claim_ref)
                .and_then(|r| r.name);
            Ok(
                match (
                    volume_phase(&volume),
                    reference.as_deref(),
                    path.join("data").exists(),
                ) {
                    ("Released", Some("data"), true)
                        if volume.metadata.deletion_timestamp.is_none() =>
                    {
                        Ok(())
                    }
                    (phase, reference, data) => {
                        Err(format!("{phase}, claimRef {reference:?}, data {data}"))
                    }
                },
            )
        },
    )
    .await?;
    case.expect_events("pv", &name, &[]).await?;
    Ok(())
}

/// Delete: the released volume's directory is deleted, then the volume
/// object (which lingers, being deleted, on its protection finalizer where
/// no pv-protection controller runs; it must not fail meanwhile).
pub(crate) async fn delete(case: Arc<Case>) -> anyhow::Result<()> {
    let (name, path) = bind_and_release(&case, "Delete").await?;
    wait::until(&format!("volume {name} deleted"), || async {
        Ok(match case.volumes().get_opt(&name).await? {
            None => Ok(()),
            Some(v) if v.metadata.deletion_timestamp.is_some() => Ok(()),
            Some(v) => Err(format!("phase {}", volume_phase(&v))),
        })
    })
    .await?;
    ensure!(
        !path.exists(),
        "the volume's directory {} is gone",
        path.display()
    );
    if case.volumes().get_opt(&name).await?.is_some() {
        wait::holds(
            "the lingering volume does not fail",
            Duration::from_secs(3),
            || async {
                Ok(match case.volumes().get_opt(&name).await? {
                    Some(v) if volume_phase(&v) == "Failed" => Err(format!("{:?}", v.status)),
                    _ => Ok(()),
                })
            },
        )
        .await?;
        case.expect_events("pv", &name, &[]).await?;
    }
    Ok(())
}
