//! memapi's integration tests, one binary: a real `kube::Client` (and, for
//! `kubectl`, a real kubectl) against the in-memory server, one module per
//! area of its behaviour.

// A test or benchmark reports a failure by panicking: unwrap and expect
// are its assertions.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod crud;
mod fuzz;
mod kubectl;
mod levers;
mod list;
mod rbac;
mod reactors;
mod request_log;
mod resource;
mod slices;
mod strict;
mod support;
mod watch;
