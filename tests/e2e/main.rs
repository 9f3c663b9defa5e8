//! The end-to-end suite: the `pv-controller` binary against the real
//! cluster named by `PV_CONTROLLER_E2E_KUBECONFIG`, every request made as
//! `deploy/`'s ServiceAccount. Without the variable it prints one line and
//! passes, so `cargo test` stays hermetic.
//!
//! The suite starts two replicas of the binary on one Lease (a third joins
//! after the leader-election case kills one), then runs every case at once,
//! each in its own namespace with its own object names, and checks at the
//! end that no request of any replica was refused. The test plays the
//! parts a controller-less control plane lacks: the kubelet for recycler
//! pods, the scheduler's `selected-node`, external provisioners, and the
//! protection controllers that remove finalizers. docs/testing.md's "End-to-end
//! tests against a real cluster" section says how to run it.
//!
//! Arguments: words select the cases whose names contain one of them;
//! `--list` prints the cases.

// A test or benchmark reports a failure by panicking: unwrap and expect
// are its assertions.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod admin;
mod binding;
mod claims;
mod default_class;
#[path = "../support/https.rs"]
mod https;
mod leader;
mod provisioning;
mod reclaim;
mod recycle;
mod service_account;
mod support;

use std::process::ExitCode;

use support::runner::{self, Suite};

/// Every case: its name and its body.
fn suite() -> Suite {
    vec![
        runner::case("static_binding_picks_the_best_fit", binding::best_fit),
        runner::case("pre_bound_volumes_and_claims_bind", binding::pre_bound),
        runner::case(
            "wait_for_first_consumer_provisions_on_the_selected_node",
            provisioning::wait_for_first_consumer,
        ),
        runner::case(
            "external_provisioning_is_handed_off",
            provisioning::external,
        ),
        runner::case(
            "csi_migrated_class_is_handed_to_its_driver",
            provisioning::csi_migrated,
        ),
        runner::case("retain_keeps_the_released_volume", reclaim::retain),
        runner::case("delete_removes_storage_and_volume", reclaim::delete),
        runner::case(
            "recycle_twice_with_a_lingering_pod",
            recycle::twice_with_lingering_pod,
        ),
        runner::case("lost_and_misbound_claims", claims::lost_and_misbound),
        runner::case(
            "default_class_is_assigned_retroactively_where_the_server_allows",
            default_class::retroactive,
        ),
        runner::case("a_follower_takes_over_from_a_killed_leader", leader::kill_9),
        runner::case(
            "the_secure_port_delegates_authentication_and_authorization",
            admin::secure_port,
        ),
        runner::after_all(
            "requests_are_made_as_the_service_account",
            service_account::impersonated,
        ),
    ]
}

fn main() -> ExitCode {
    let arguments: Vec<String> = std::env::args().skip(1).collect();
    let suite = suite();
    if arguments.iter().any(|a| a == "--list") {
        for entry in &suite {
            println!("{}: test", entry.name);
        }
        return ExitCode::SUCCESS;
    }
    let Some(kubeconfig) = std::env::var_os(support::KUBECONFIG_VARIABLE).filter(|v| !v.is_empty())
    else {
        println!("e2e: skipped, {} is not set", support::KUBECONFIG_VARIABLE);
        return ExitCode::SUCCESS;
    };
    let filters: Vec<String> = arguments
        .into_iter()
        .filter(|a| !a.starts_with('-'))
        .collect();
    runner::run(kubeconfig.into(), suite, &filters)
}
