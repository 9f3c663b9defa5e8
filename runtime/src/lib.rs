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

pub mod ambient;
pub mod api_message;
pub mod client;
pub mod events;
pub mod executor;
pub mod informer;
pub mod keys;
pub mod kinds;
pub mod leader;
pub mod lean;
pub mod managers;
pub mod merge_patch;
pub mod metrics;
pub mod operations;
pub mod plan;
pub mod queue;
pub mod ratelimit;
pub mod requests;
pub mod runner;
pub mod server;
pub mod shadow;
pub mod shared;
pub mod sparse;
pub mod supervisor;
pub mod version;
pub mod waiting;
pub mod workload;
pub mod write;
