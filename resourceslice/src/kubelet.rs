//! The kubelet's side of DRA slices (upstream's `DRAPluginManager`):
//!
//! - [`wipe_node`]: at start, the kubelet deletes every ResourceSlice of
//!   its node, whatever the driver, so that slices of a driver removed
//!   while the kubelet was down do not linger; drivers that start again
//!   publish theirs anew. One DeleteCollection with the field selector
//!   `spec.nodeName=<node>`, retried with exponential backoff (1 s
//!   doubling to 5 minutes, 100 attempts) while the API server is
//!   unreachable or refuses.
//! - [`DriverPresence`]: when the last instance of a driver disconnects,
//!   its slices on the node are deleted after a grace period (30 s, so a
//!   driver being updated can come back first), unless an instance
//!   connects again in time. A second disconnect while a deletion is
//!   pending keeps the first deadline.

use crate::error::Error;
use k8s_openapi::api::resource::v1::ResourceSlice;
use kube::api::{Api, DeleteParams, ListParams};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// How long after a driver's last instance disconnected its slices are
/// deleted, by default (upstream's).
pub const DEFAULT_GRACE_PERIOD: Duration = Duration::from_secs(30);
/// The first retry delay of a wipe.
const WIPE_BACKOFF: Duration = Duration::from_secs(1);
/// The longest retry delay of a wipe.
const WIPE_BACKOFF_MAX: Duration = Duration::from_secs(300);
/// Attempts before a wipe gives up.
const WIPE_ATTEMPTS: u32 = 100;

/// Deletes every ResourceSlice of `node`, of every driver; retried while
/// the API server fails (see the module documentation). Returns the
/// last error when every attempt failed.
pub async fn wipe_node(client: kube::Client, node: &str) -> Result<(), Error> {
    wipe(&Api::all(client), node, None).await
}

/// Deletes the slices of `node`, of one driver or all, with retries.
async fn wipe(api: &Api<ResourceSlice>, node: &str, driver: Option<&str>) -> Result<(), Error> {
    let selector = match driver {
        Some(d) => format!("spec.nodeName={node},spec.driver={d}"),
        None => format!("spec.nodeName={node}"),
    };
    let list = ListParams::default().fields(&selector);
    let mut delay = WIPE_BACKOFF;
    let mut attempt = 1;
    loop {
        match api.delete_collection(&DeleteParams::default(), &list).await {
            Ok(_) => {
                tracing::info!(node, driver, "deleted the node's ResourceSlices");
                return Ok(());
            }
            Err(kube::Error::Api(status)) if status.code == 404 => return Ok(()),
            Err(source) if attempt >= WIPE_ATTEMPTS => {
                return Err(Error::Wipe {
                    node: node.into(),
                    source,
                });
            }
            Err(error) => {
                tracing::info!(node, driver, %error, ?delay, "deleting the node's ResourceSlices failed, retrying");
            }
        }
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(WIPE_BACKOFF_MAX);
        attempt += 1;
    }
}

/// One driver's instances and pending deletion.
#[derive(Debug, Default)]
struct Driver {
    instances: BTreeSet<String>,
    wipe: Option<(Instant, JoinHandle<()>)>,
}

/// Tracks which drivers have a connected instance on one node and deletes
/// the slices of a driver gone for longer than the grace period. Pending
/// deletions are cancelled when it is dropped.
#[derive(Debug)]
pub struct DriverPresence {
    api: Api<ResourceSlice>,
    node: String,
    grace: Duration,
    drivers: Arc<Mutex<BTreeMap<String, Driver>>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl DriverPresence {
    /// A tracker for `node` with the default grace period.
    pub fn new(client: kube::Client, node: impl Into<String>) -> Self {
        Self {
            api: Api::all(client),
            node: node.into(),
            grace: DEFAULT_GRACE_PERIOD,
            drivers: Arc::default(),
        }
    }

    /// The same tracker with another grace period.
    pub fn with_grace_period(mut self, grace: Duration) -> Self {
        self.grace = grace;
        self
    }

    /// An instance of `driver` connected: any pending deletion of the
    /// driver's slices is cancelled.
    pub fn connected(&self, driver: &str, instance: &str) {
        let mut drivers = lock(&self.drivers);
        let entry = drivers.entry(driver.to_string()).or_default();
        entry.instances.insert(instance.to_string());
        if let Some((_, task)) = entry.wipe.take() {
            task.abort();
            tracing::info!(node = %self.node, driver, "driver is back, its ResourceSlices stay");
        }
    }

    /// An instance of `driver` disconnected: when it was the last, the
    /// driver's slices on the node are deleted after the grace period,
    /// counted from the first such disconnect. Needs a tokio runtime.
    pub fn disconnected(&self, driver: &str, instance: &str) {
        let mut drivers = lock(&self.drivers);
        let entry = drivers.entry(driver.to_string()).or_default();
        entry.instances.remove(instance);
        if !entry.instances.is_empty() || entry.wipe.is_some() {
            return;
        }
        let deadline = Instant::now() + self.grace;
        let (api, node, name, drivers_ref) = (
            self.api.clone(),
            self.node.clone(),
            driver.to_string(),
            Arc::downgrade(&self.drivers),
        );
        tracing::info!(node = %self.node, driver, grace = ?self.grace, "driver gone, deleting its ResourceSlices after the grace period");
        let task = tokio::spawn(async move {
            tokio::time::sleep_until(deadline).await;
            if let Err(error) = wipe(&api, &node, Some(&name)).await {
                tracing::warn!(node, driver = %name, %error, "giving up deleting the driver's ResourceSlices");
            }
            if let Some(drivers) = drivers_ref.upgrade()
                && let Some(entry) = lock(&drivers).get_mut(&name)
            {
                entry.wipe = None;
            }
        });
        entry.wipe = Some((deadline, task));
    }

    /// When the slices of `driver` are due to be deleted, if they are.
    pub fn pending_wipe(&self, driver: &str) -> Option<Instant> {
        lock(&self.drivers)
            .get(driver)
            .and_then(|d| d.wipe.as_ref())
            .map(|(at, _)| *at)
    }
}

impl Drop for DriverPresence {
    fn drop(&mut self) {
        for driver in lock(&self.drivers).values_mut() {
            if let Some((_, task)) = driver.wipe.take() {
                task.abort();
            }
        }
    }
}
