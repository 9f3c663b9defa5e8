//! The default StorageClass given to a class-less claim after the fact.
//!
//! Whether the API server lets a claim's `storageClassName` be set once
//! the claim exists depends on its version (RetroactiveDefaultStorageClass:
//! absent before 1.25, alpha in 1.25, beta and on by default in 1.26 and
//! 1.27, GA from 1.28). The controller tries either way. From 1.28 the
//! claim gets the class and goes to its provisioner; before 1.26 the
//! server refuses the write, the claim keeps no class, the leader counts
//! the failure in `retroactive_storageclass_errors_total`, and nothing
//! crashes; on 1.26 and 1.27 (a feature gate decides) either outcome is
//! accepted and the case says which it saw.
//!
//! A default class is cluster-wide, so the case holds a lock (a Lease)
//! against other runs while its class exists, and skips on a cluster that
//! already has a default class (its claim would get that one at creation).

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, ensure};
use k8s_names::ANN_STORAGE_PROVISIONER;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::Api;
use kube::api::{DeleteParams, ListParams, PostParams};
use testkit::{claim, default_class, storage_class};

use crate::support::case::{annotation, claim_phase};
use crate::support::{Case, metrics, wait};

const LOCK: &str = "pv-controller-e2e-default-class";
/// The leader's count of failed retroactive assignments.
const ERRORS: &str = "retroactive_storageclass_errors_total";
const NO_CLASS: &str = "no persistent volumes available for this claim and no storage class is set";

/// A class-less claim, then a default class: the outcome the server's
/// version allows.
pub(crate) async fn retroactive(case: Arc<Case>) -> anyhow::Result<()> {
    if let Some(existing) = default_class_name(&case).await? {
        case.skip(format!(
            "the cluster has a default StorageClass ({existing}), so a claim cannot be made without a class"
        ));
        return Ok(());
    }
    lock(&case).await?;
    let result = with_lock(&case).await;
    // The class goes before the lock does: the next run needs a cluster
    // without a default class.
    let removed = remove_class(&case).await;
    let unlocked = leases(&case).delete(LOCK, &DeleteParams::default()).await;
    result?;
    removed?;
    unlocked.context("releasing the default-class lock")?;
    Ok(())
}

/// Deletes the case's default class and waits until it is gone.
async fn remove_class(case: &Case) -> anyhow::Result<()> {
    let name = case.name("default");
    match case.classes().delete(&name, &DeleteParams::default()).await {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.is_not_found() => return Ok(()),
        Err(error) => return Err(error).context("deleting the default class"),
    }
    wait::until("the default class is gone", || async {
        Ok(match case.classes().get_opt(&name).await? {
            None => Ok(()),
            Some(_) => Err("still there".to_string()),
        })
    })
    .await
}

/// The case proper, while no other run can have a default class.
async fn with_lock(case: &Case) -> anyhow::Result<()> {
    if let Some(existing) = default_class_name(case).await? {
        anyhow::bail!("a default StorageClass {existing} appeared under the lock");
    }
    let created = case.create_claim(claim("classless", "", "1Gi")).await?;
    ensure!(
        created.spec.and_then(|s| s.storage_class_name).is_none(),
        "the claim was created without a class"
    );
    let no_class = ("Normal", "FailedBinding", NO_CLASS);
    case.expect_events("pvc", "classless", &[no_class]).await?;
    let (leader, before) = leader_metrics(case).await?;
    let provisioner = format!("e2e.example.com/{}", case.namespace);
    let class = case.name("default");
    case.create_class(default_class(storage_class(
        &class,
        &provisioner,
        "Immediate",
    )))
    .await?;
    let outcome = outcome(case, &class, &leader, &before).await?;
    let allowed = match case.env.server_minor {
        ..26 => outcome == Outcome::Refused,
        26..28 => true,
        _ => outcome == Outcome::Assigned,
    };
    ensure!(
        allowed,
        "Kubernetes {}: the retroactive assignment was {outcome:?}",
        case.env.server_version
    );
    println!(
        "e2e: Kubernetes {}: the retroactive default class was {outcome:?}",
        case.env.server_version
    );
    match outcome {
        Outcome::Assigned => assigned(case, &class, &provisioner, &leader, &before).await,
        Outcome::Refused => {
            refused(case, &leader).await?;
            case.expect_events("pvc", "classless", &[no_class]).await?;
            Ok(())
        }
    }
}

/// What became of the controller's assignment of the default class.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Outcome {
    /// The server took it: the claim has the class.
    Assigned,
    /// The server refused it: the leader counted a failed assignment.
    Refused,
}

/// Waits until the claim has the class, or the leader counted a failed
/// assignment (over `before`, its count when the class was created; from
/// zero on a leader that took over since).
async fn outcome(
    case: &Case,
    class: &str,
    leader: &str,
    before: &metrics::Samples,
) -> anyhow::Result<Outcome> {
    let baseline = before.value(ERRORS, &[]);
    wait::until("the assignment is made or refused", || async {
        let claim = case.claims().get("classless").await?;
        if claim
            .spec
            .as_ref()
            .and_then(|s| s.storage_class_name.as_deref())
            == Some(class)
        {
            return Ok(Ok(Outcome::Assigned));
        }
        let (now, samples) = match case.env.pool.leader_metrics(&case.client()).await {
            Ok(found) => found,
            Err(error) => return Ok(Err(format!("{error:#}"))),
        };
        let errors = samples.value(ERRORS, &[]);
        let since = if now == leader { baseline } else { 0.0 };
        Ok(if errors > since {
            Ok(Outcome::Refused)
        } else {
            Err(format!("no class yet; {now}: {errors} failed assignments"))
        })
    })
    .await
}

/// The claim got the class: it goes to the class's provisioner, and the
/// leader (when it still leads) counted the assignment.
async fn assigned(
    case: &Case,
    class: &str,
    provisioner: &str,
    leader: &str,
    before: &metrics::Samples,
) -> anyhow::Result<()> {
    case.wait_claim(
        "classless",
        "handed to the default class's provisioner",
        |c| {
            c.spec
                .as_ref()
                .and_then(|s| s.storage_class_name.as_deref())
                == Some(class)
                && annotation(&c.metadata, ANN_STORAGE_PROVISIONER) == Some(provisioner)
        },
    )
    .await?;
    let (now, after) = leader_metrics(case).await?;
    if now == leader {
        let series = "retroactive_storageclass_total";
        ensure!(
            after.value(series, &[]) > before.value(series, &[]),
            "{leader} counted the assignment: {}",
            after.show(series)
        );
    }
    Ok(())
}

/// The server refused the write: the claim keeps no class and stays
/// Pending, the leader logs the failed sync, every replica lives on.
async fn refused(case: &Case, leader: &str) -> anyhow::Result<()> {
    wait::holds(
        "the claim keeps no class",
        Duration::from_secs(3),
        || async {
            let claim = case.claims().get("classless").await?;
            let class = claim
                .spec
                .as_ref()
                .and_then(|s| s.storage_class_name.clone());
            Ok(match (class, claim_phase(&claim)) {
                (None, "Pending") => Ok(()),
                (class, phase) => Err(format!("class {class:?}, phase {phase}")),
            })
        },
    )
    .await?;
    if let Some(log) = case.env.pool.log_of(leader) {
        let key = format!("{}/classless", case.namespace);
        let text = std::fs::read_to_string(&log)?;
        ensure!(
            text.lines()
                .any(|l| l.contains("sync failed, will retry") && l.contains(&key)),
            "the leader logs the failed sync of {key} ({})",
            log.display()
        );
    }
    for name in case.env.pool.names() {
        let address = case
            .env
            .pool
            .metrics_of(&name)
            .context("a replica's address")?;
        let (code, body) = metrics::get(address, "/livez").await?;
        ensure!(code == 200, "{name} is alive and well: {code} {body}");
    }
    Ok(())
}

/// The leader's name and metrics, waiting out a takeover (a killed leader
/// still named by the Lease cannot be scraped).
async fn leader_metrics(case: &Case) -> anyhow::Result<(String, metrics::Samples)> {
    wait::until("the leader's metrics", || async {
        Ok(case
            .env
            .pool
            .leader_metrics(&case.client())
            .await
            .map_err(|e| format!("{e:#}")))
    })
    .await
}

/// The name of a default StorageClass of the cluster, if it has one.
async fn default_class_name(case: &Case) -> anyhow::Result<Option<String>> {
    let classes = case.classes().list(&ListParams::default()).await?;
    let is_default = |class: &StorageClass| {
        [
            k8s_names::ANN_IS_DEFAULT_CLASS,
            k8s_names::ANN_BETA_IS_DEFAULT_CLASS,
        ]
        .iter()
        .any(|key| annotation(&class.metadata, key) == Some("true"))
    };
    Ok(classes
        .items
        .iter()
        .find(|c| is_default(c))
        .and_then(|c| c.metadata.name.clone()))
}

fn leases(case: &Case) -> Api<Lease> {
    Api::namespaced(case.client(), &case.env.service_account.0)
}

/// Takes the cluster-wide lock of this case: creates the Lease, or waits
/// while another run holds it (one left by a run that died expires after
/// five minutes).
async fn lock(case: &Case) -> anyhow::Result<()> {
    let leases = leases(case);
    let mut lease = Lease::default();
    lease.metadata.name = Some(LOCK.to_string());
    lease.spec = Some(LeaseSpec {
        holder_identity: Some(case.env.run.clone()),
        lease_duration_seconds: Some(300),
        renew_time: Some(MicroTime(k8s_openapi::jiff::Timestamp::now())),
        ..Default::default()
    });
    wait::until("the default-class lock", || async {
        match leases.create(&PostParams::default(), &lease).await {
            Ok(_) => return Ok(Ok(())),
            Err(kube::Error::Api(status)) if status.is_already_exists() => {}
            Err(error) => return Err(error.into()),
        }
        let Some(held) = leases.get_opt(LOCK).await? else {
            return Ok(Err("released just now".to_string()));
        };
        let spec = held.spec.unwrap_or_default();
        let renewed = spec.renew_time.map(|t| t.0).unwrap_or_default();
        if k8s_openapi::jiff::Timestamp::now().as_second() - renewed.as_second() > 300 {
            leases.delete(LOCK, &DeleteParams::default()).await?;
        }
        Ok(Err(format!("held by run {:?}", spec.holder_identity)))
    })
    .await
}
