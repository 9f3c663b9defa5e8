//! resourceslice on memapi: upstream's publisher table, the publisher's
//! promises (restarts write nothing, one pool's change rewrites one pool,
//! large pools), the kubelet's clean-up, and the dra-publish binary.

// A test reports a failure by panicking: unwrap and expect are its
// assertions.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod binary;
mod kubelet;
mod publisher;
mod support;
mod sync_pool;
