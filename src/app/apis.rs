//! Noticing, after start-up, an API an enabled controller needs appearing
//! or going: the control plane upgraded to a release that serves it (the
//! ResourceClaim controller's resource.k8s.io/v1 from Kubernetes 1.34), or
//! downgraded. Discovery is asked again every period; a change ends the
//! running process's controllers so that [`super::serve`] builds them again
//! with the controller started (or stopped), without leaving the process.

use std::time::Duration;

use kube::Client;

use super::controllers::{RequiredApi, discover};

/// Default of [`super::AppConfig::api_discovery_period`].
pub(crate) const DEFAULT_API_DISCOVERY_PERIOD: Duration = Duration::from_secs(60);

/// Resolves when discovery, asked every `period`, shows one of `apis`
/// served where it was not at build time, or not served where it was; a
/// failed discovery changes nothing. With no API to watch, never.
pub(crate) async fn changed(client: &Client, apis: &[RequiredApi], period: Duration) {
    if apis.is_empty() {
        return std::future::pending().await;
    }
    let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        for api in apis {
            let now = match discover(client, api.group_version, api.resource).await {
                Ok(now) => now,
                Err(error) => {
                    tracing::debug!(%error, api = api.group_version, "API discovery failed; asking again next period");
                    continue;
                }
            };
            if now == api.served {
                continue;
            }
            let shown = format!("{} {}", api.group_version, api.resource);
            if now {
                tracing::info!(controller = api.controller, api = %shown, "the API server now serves the controller's API; starting the controller");
            } else {
                tracing::warn!(controller = api.controller, api = %shown, "the API server no longer serves the controller's API; stopping the controller");
            }
            return;
        }
    }
}
