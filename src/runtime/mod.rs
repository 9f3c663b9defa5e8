//! What every controller of the binary shares: the API clients (with the
//! write gate, request timeout and rate limit), leader election on the one
//! Lease, the admin server, the metrics registry, the work queue, the
//! operation tracker and event recording.
//!
//! Nothing here knows a controller: the parts take keys, futures, objects
//! and references, and a controller wires them to its decisions.

pub(crate) mod client;
pub(crate) mod events;
pub(crate) mod keys;
pub(crate) mod leader;
pub(crate) mod leadership;
pub(crate) mod metrics;
pub(crate) mod operations;
pub(crate) mod queue;
pub(crate) mod ratelimit;
pub(crate) mod requests;
pub(crate) mod server;
pub(crate) mod shared;
pub(crate) mod watch;
