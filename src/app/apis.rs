//! Noticing, after start-up, an API an enabled controller needs appearing
//! or going: the control plane upgraded to a release that serves it (the
//! ResourceClaim controller's resource.k8s.io/v1 from Kubernetes 1.34), or
//! downgraded. Discovery is asked again every period; a change ends the
//! running process's controllers so that [`super::serve`] builds them again
//! with the controller started (or stopped), without leaving the process.
//!
//! During the upgrade of a control plane of several API servers, each
//! answers as its own release does: one serves the API, the next does not.
//! One answer is therefore not a change: discovery must say the same new
//! thing [`CONFIRMATIONS`] periods in a row, or the controllers would be
//! stopped, the Lease released and every kind listed again at each flip.

use std::time::Duration;

use kube::Client;

use super::controllers::{RequiredApi, discover};

/// Default of [`super::AppConfig::api_discovery_period`].
pub(crate) const DEFAULT_API_DISCOVERY_PERIOD: Duration = Duration::from_secs(60);

/// How many periods in a row discovery must show an API served where it
/// was not (or gone where it was served) before that counts as a change.
pub(crate) const CONFIRMATIONS: u32 = 3;

/// Discovery's period was zero: it would be asked without pause.
#[derive(Debug, thiserror::Error)]
#[error("the API discovery period must be more than zero")]
pub(crate) struct ZeroPeriod;

/// Resolves when discovery, asked every `period`, has shown one of `apis`
/// served where it was not at build time, or not served where it was,
/// [`CONFIRMATIONS`] times in a row; a failed discovery neither confirms
/// nor interrupts a change. With no API to watch, never. A zero `period`
/// is refused at once.
pub(crate) async fn changed(
    client: &Client,
    apis: &[RequiredApi],
    period: Duration,
) -> Result<(), ZeroPeriod> {
    if period.is_zero() {
        return Err(ZeroPeriod);
    }
    if apis.is_empty() {
        return std::future::pending().await;
    }
    let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // For each API, how many answers in a row said otherwise than at
    // build time.
    let mut streaks = vec![0u32; apis.len()];
    loop {
        ticks.tick().await;
        for (api, streak) in apis.iter().zip(streaks.iter_mut()) {
            let now = match discover(client, api.group_version, api.resource).await {
                Ok(now) => now,
                Err(error) => {
                    tracing::debug!(%error, api = api.group_version, "API discovery failed; asking again next period");
                    continue;
                }
            };
            let shown = format!("{} {}", api.group_version, api.resource);
            if now == api.served {
                if *streak > 0 {
                    tracing::info!(controller = api.controller, api = %shown, "discovery agrees with the running controllers again; nothing changes");
                }
                *streak = 0;
                continue;
            }
            *streak += 1;
            if *streak < CONFIRMATIONS {
                tracing::info!(controller = api.controller, api = %shown, served = now, answers = *streak, needed = CONFIRMATIONS, "discovery answers otherwise; waiting for it to say so again");
                continue;
            }
            if now {
                tracing::info!(controller = api.controller, api = %shown, "the API server now serves the controller's API; starting the controller");
            } else {
                tracing::warn!(controller = api.controller, api = %shown, "the API server no longer serves the controller's API; stopping the controller");
            }
            return Ok(());
        }
    }
}
