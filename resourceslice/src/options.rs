//! How a [`Publisher`](crate::Publisher) is started: the driver, the
//! owner of its slices, what to publish first, its delays, and where its
//! errors go.

use crate::error::Error;
use crate::types::{DriverResources, Owner};
use std::sync::Arc;
use std::time::Duration;

/// How long after a watch event its pool is synced, by default.
pub const DEFAULT_SYNC_DELAY: Duration = Duration::from_secs(30);
/// How long a written slice stays in the publisher's view without the
/// watch showing it, by default.
pub const DEFAULT_MUTATION_CACHE_TTL: Duration = Duration::from_secs(60);

/// What the publisher calls with every error it meets (it goes on and
/// retries by itself). The default logs them.
pub type ErrorHandler = Arc<dyn Fn(&Error) + Send + Sync>;

/// How to start a [`Publisher`](crate::Publisher).
#[derive(Clone)]
pub struct Options {
    /// The driver's name (`spec.driver`): a DNS subdomain, ideally in a
    /// domain its vendor owns.
    pub driver: String,
    /// The owner of the slices: a Node for a node-local driver (the
    /// slices are then that node's), any object for network-attached
    /// pools, or none (the slices then outlive the driver unless it
    /// deletes them).
    pub owner: Option<Owner>,
    /// What to publish from the start.
    pub resources: DriverResources,
    /// How long after a watch event its pool is synced.
    pub sync_delay: Duration,
    /// How long a written slice stays in the publisher's view without the
    /// watch showing it.
    pub mutation_cache_ttl: Duration,
    /// Limits the publisher to this one pool: it watches the driver's
    /// slices of no node and ignores other pools, and a Node owner's pool
    /// may then use any node selection (cluster-visible slices owned by a
    /// node). Updates listing other pools are refused.
    pub reconcile_pool_with_name: Option<String>,
    /// Called with every error; `None` logs them.
    pub on_error: Option<ErrorHandler>,
}

impl std::fmt::Debug for Options {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Options")
            .field("driver", &self.driver)
            .field("owner", &self.owner)
            .field("pools", &self.resources.pools.len())
            .field("sync_delay", &self.sync_delay)
            .field("mutation_cache_ttl", &self.mutation_cache_ttl)
            .field("reconcile_pool_with_name", &self.reconcile_pool_with_name)
            .finish_non_exhaustive()
    }
}

impl Options {
    /// Options for `driver` with this owner, nothing to publish yet, and
    /// upstream's delays.
    pub fn new(driver: impl Into<String>, owner: Option<Owner>) -> Self {
        Self {
            driver: driver.into(),
            owner,
            resources: DriverResources::default(),
            sync_delay: DEFAULT_SYNC_DELAY,
            mutation_cache_ttl: DEFAULT_MUTATION_CACHE_TTL,
            reconcile_pool_with_name: None,
            on_error: None,
        }
    }
}
