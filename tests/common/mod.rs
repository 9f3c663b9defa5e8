//! Test support shared by the integration tests: builders for scenario
//! tables, the scenario harness and a mock volume plugin.

#![allow(dead_code)]

pub(crate) mod builders;
pub(crate) mod harness;
pub(crate) mod mock_plugin;
