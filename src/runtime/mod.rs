//! What every controller of the process shares, and nothing
//! controller-specific: the API clients (with the write gate, request
//! timeout and rate limit), one informer per kind with its one store, the
//! one write door, the one runner (stores synced, then the Lease, then the
//! workers, then a clean stop), leader election on the one Lease, the admin
//! server, the metrics registry, the work queue, the operation tracker and
//! event recording.
//!
//! Nothing here knows a controller: the parts take kinds, keys, futures,
//! objects and references, and a controller wires them to its decisions.

pub(crate) mod api_message;
pub(crate) mod client;
pub(crate) mod events;
pub(crate) mod executor;
pub(crate) mod informer;
pub(crate) mod journal;
pub(crate) mod keys;
pub(crate) mod kinds;
pub(crate) mod leader;
pub(crate) mod lean;
pub(crate) mod merge_patch;
pub(crate) mod metrics;
pub(crate) mod operations;
pub(crate) mod plan;
pub(crate) mod queue;
pub(crate) mod ratelimit;
pub(crate) mod rehearsal;
pub(crate) mod requests;
pub(crate) mod runner;
pub(crate) mod server;
pub(crate) mod shared;
pub(crate) mod sparse;
pub(crate) mod workload;
pub(crate) mod write;
