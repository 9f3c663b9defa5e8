//! The kubelet's clean-up: wiping a node's slices, retried while the API
//! server fails, and a driver's slices deleted a grace period after its
//! last instance left.

use super::support::*;
use memapi::{MemApi, Reactor, Verb};
use resourceslice::{DriverPresence, wipe_node};
use std::time::Duration;

fn seeded() -> MemApi {
    let mem = MemApi::new();
    for (name, driver, node) in [
        ("a1", "a.example.com", "node-1"),
        ("b1", "b.example.com", "node-1"),
        ("a2", "a.example.com", "node-2"),
    ] {
        mem.create(&slice(name, driver, node)).unwrap();
    }
    mem
}

fn names(mem: &MemApi) -> Vec<String> {
    slices(mem)
        .into_iter()
        .map(|s| s.metadata.name.unwrap())
        .collect()
}

#[tokio::test(start_paused = true)]
async fn wipe_node_deletes_every_driver_of_one_node_and_retries() {
    let mem = seeded();
    mem.add_reactor(
        Reactor::on(Verb::DeleteCollection, "resourceslices")
            .drop_connection()
            .times(3),
    );
    wipe_node(mem.client(), "node-1").await.unwrap();
    assert_eq!(names(&mem), ["a2"]);
    assert_eq!(
        mem.requests()
            .count(Verb::DeleteCollection, "resourceslices", None),
        4
    );
}

#[tokio::test(start_paused = true)]
async fn a_driver_back_within_the_grace_period_keeps_its_slices() {
    let mem = seeded();
    let presence = DriverPresence::new(mem.client(), "node-1");
    presence.connected("a.example.com", "sock-1");
    presence.disconnected("a.example.com", "sock-1");
    tokio::time::sleep(Duration::from_secs(29)).await;
    presence.connected("a.example.com", "sock-2");
    assert_eq!(presence.pending_wipe("a.example.com"), None);
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(names(&mem), ["a1", "a2", "b1"]);
}

#[tokio::test(start_paused = true)]
async fn a_driver_gone_past_the_grace_period_loses_its_slices_on_the_node() {
    let mem = seeded();
    let presence = DriverPresence::new(mem.client(), "node-1");
    presence.connected("a.example.com", "sock-1");
    presence.connected("a.example.com", "sock-2");
    presence.disconnected("a.example.com", "sock-1");
    assert_eq!(
        presence.pending_wipe("a.example.com"),
        None,
        "one instance left"
    );
    presence.disconnected("a.example.com", "sock-2");
    let first = presence.pending_wipe("a.example.com").unwrap();
    tokio::time::sleep(Duration::from_secs(20)).await;
    presence.connected("a.example.com", "sock-3");
    presence.disconnected("a.example.com", "sock-3");
    let second = presence.pending_wipe("a.example.com").unwrap();
    assert!(
        second > first,
        "a reconnect cancels: the new deadline counts anew"
    );
    presence.disconnected("a.example.com", "sock-9");
    assert_eq!(
        presence.pending_wipe("a.example.com"),
        Some(second),
        "a second disconnect keeps the deadline"
    );
    tokio::time::sleep(Duration::from_secs(29)).await;
    assert_eq!(names(&mem), ["a1", "a2", "b1"]);
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(names(&mem), ["a2", "b1"]);
    assert_eq!(presence.pending_wipe("a.example.com"), None);
}
