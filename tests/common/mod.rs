//! Test support shared by the integration tests: builders for scenario
//! tables, the scenario harness and a mock volume plugin.

#![allow(dead_code)]

pub mod builders;
pub mod harness;
pub mod mock_plugin;
