//! Leader election between processes: the leader is killed with SIGKILL
//! (it cannot release the Lease), another replica takes the Lease once it
//! expires, and binds a pair created after the kill.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, ensure};
use testkit::claim;

use crate::support::replicas::Ended;
use crate::support::{Case, metrics, wait};

/// How long the case waits for the Lease to come to this run: other runs
/// sharing the cluster hold it until they end or kill their leader.
const SHARED_LEASE: Duration = Duration::from_secs(240);

/// The leader of this run is killed with SIGKILL; a replacement joins after.
pub(crate) async fn kill_9(case: Arc<Case>) -> anyhow::Result<()> {
    let env = &case.env;
    let client = case.client();
    // Another run's replica may hold the Lease; this run kills only its
    // own, so it waits (as long as other runs keep theirs leading, up to
    // SHARED_LEASE) until one of its own leads.
    let leader = wait::until_within("a replica of this run leads", SHARED_LEASE, || async {
        let names = env.pool.names();
        Ok(match env.pool.leader(&client).await? {
            Some(leader) if names.contains(&leader) => Ok(leader),
            other => Err(format!("leader {other:?}, this run's replicas {names:?}")),
        })
    })
    .await?;
    let address = env
        .pool
        .metrics_of(&leader)
        .context("the leader's address")?;
    let before = metrics::scrape(address).await?;
    ensure!(
        before.value("pv_controller_leader", &[]) == 1.0,
        "{leader} says it leads"
    );
    ensure!(
        before.value("pv_controller_api_requests_total", &[("code", "403")]) == 0.0,
        "{leader} was refused nothing: {}",
        before.show("pv_controller_api_requests_total")
    );

    let killed = Instant::now();
    let ended = env.pool.kill_9(&leader).await?;
    let result = take_over(&case, &leader, &ended, killed).await;
    // A fresh replica replaces the killed one, whatever happened.
    env.pool.spawn().await?;
    result
}

/// After the kill: another replica takes the Lease and binds a new pair.
async fn take_over(
    case: &Case,
    leader: &str,
    ended: &Ended,
    killed: Instant,
) -> anyhow::Result<()> {
    let env = &case.env;
    let client = case.client();
    // Its shell reports a death by signal 9 as 128 + 9.
    ensure!(
        matches!(ended.code, None | Some(137)),
        "{leader} died of SIGKILL: {ended:?}"
    );
    let successor = wait::until("another replica takes the Lease", || async {
        Ok(match env.pool.leader(&client).await? {
            Some(name) if name != leader => Ok(name),
            other => Err(format!("{other:?}")),
        })
    })
    .await?;
    println!(
        "e2e: {leader} killed, {successor} leads {:.1} s later",
        killed.elapsed().as_secs_f64()
    );

    let class = case.name("manual");
    let volume = case
        .create_volume(case.host_path_volume("after-kill", "1Gi")?.class(&class))
        .await?
        .metadata
        .name
        .unwrap_or_default();
    case.volume_phase(&volume, "Available").await?;
    case.create_claim(claim("after-kill", "", "1Gi").class(&class))
        .await?;
    case.claim_phase("after-kill", "Bound").await?;
    case.volume_phase(&volume, "Bound").await?;
    case.expect_events("pvc", "after-kill", &[]).await?;
    if let Some(address) = env.pool.metrics_of(&successor) {
        let after = metrics::scrape(address).await?;
        ensure!(
            after.value("pv_controller_leader", &[]) == 1.0,
            "{successor} says it leads"
        );
        ensure!(
            after.value(
                "pv_controller_api_writes_total",
                &[("resource", "persistentvolumeclaims"), ("result", "ok")]
            ) > 0.0,
            "{successor} wrote claims: {}",
            after.show("pv_controller_api_writes_total")
        );
    }
    Ok(())
}
