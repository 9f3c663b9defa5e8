//! The controller's integration tests, one binary: every module below is a
//! former test file, and `cargo test binder::` (or `lifecycle::`, ...) still
//! runs one of them. One crate means the test support is compiled and
//! linked once instead of once per file, and that support code no test uses
//! is a warning like anywhere else.
//!
//! The objects come from the `testkit` crate (the builders the unit tests
//! use too); the support that needs the controller lives here:
//! [`process`] (the process on memapi for every controller: built, its
//! syncs called directly, run until settled, stopped; its events and
//! counters), [`harness`] (the binder's scenario tables run with no server,
//! directly and with the whole controller; object comparison, invariants)
//! and [`mock_plugin`] (a volume plugin whose answers a row scripts).

// A test or benchmark reports a failure by panicking: unwrap and expect
// are its assertions.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod harness;
#[path = "../support/https.rs"]
mod https;
mod mock_plugin;
mod process;

mod admin;
mod admin_limits;
mod best_fit;
mod binary;
mod binder;
mod binding_writes;
mod chaos;
mod dashboard;
mod delete;
mod deploy;
mod docs;
mod durations;
mod embedded;
mod ephemeral;
mod events;
mod explain;
mod floors;
mod image;
mod leader_election;
mod lifecycle;
mod messages;
mod metrics;
mod other_binder;
mod plans;
mod provision;
mod rbac;
mod recycle;
mod resourceclaim;
mod resync;
mod runtime;
mod shadow;
mod supervision;
mod unknown_fields;
mod write_limit;
