//! 1,000 nodes x 1 pool x 16 devices: every node's publisher publishes
//! its pool on one in-memory API server, then each is started again with
//! the same devices. Prints the writes and time of both rounds, and the
//! process's peak resident memory.

// A benchmark reports a failure by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::resource::v1::Device;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use memapi::{MemApi, Verb};
use resourceslice::{DriverResources, Options, Owner, Pool, Publisher};
use std::time::{Duration, Instant};

const NODES: usize = 1000;
const DEVICES: usize = 16;

fn writes(mem: &MemApi) -> u64 {
    let r = mem.requests();
    [Verb::Create, Verb::Update, Verb::Delete]
        .iter()
        .map(|v| r.count(*v, "resourceslices", None))
        .sum()
}

fn resources(node: &str) -> DriverResources {
    let devices = (0..DEVICES)
        .map(|i| Device {
            name: format!("gpu-{i}"),
            ..Device::default()
        })
        .collect();
    DriverResources {
        pools: [(node.to_string(), Pool::from_devices(devices))].into(),
    }
}

/// Starts one publisher per node and waits until `want` writes were made
/// in total and every publisher has had time to sync.
async fn round(mem: &MemApi, want: u64) -> (Vec<Publisher>, Duration) {
    let start = Instant::now();
    let publishers: Vec<Publisher> = (0..NODES)
        .map(|i| {
            let node = format!("node-{i}");
            let mut options = Options::new("gpu.example.com", Some(Owner::node(&node)));
            options.resources = resources(&node);
            Publisher::start(mem.client(), options).expect("start")
        })
        .collect();
    while writes(mem) < want {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    (publishers, start.elapsed())
}

/// The peak resident set of this process, from /proc (Linux).
fn peak_rss() -> String {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .map(str::to_string)
        })
        .map_or_else(
            || "unknown".into(),
            |l| l.replace("VmHWM:", "").trim().to_string(),
        )
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let mem = MemApi::new();
    for i in 0..NODES {
        mem.create(&Node {
            metadata: ObjectMeta {
                name: Some(format!("node-{i}")),
                ..ObjectMeta::default()
            },
            ..Node::default()
        })
        .expect("node");
    }
    let (publishers, first) = round(&mem, NODES as u64).await;
    let first_writes = writes(&mem);
    for p in publishers {
        p.stop().await;
    }
    let (publishers, second) = round(&mem, first_writes).await;
    // Time for every restarted publisher to list, watch and sync its pool.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let second_writes = writes(&mem) - first_writes;
    let synced: u64 = publishers
        .iter()
        .map(|p| p.stats().creates + p.stats().updates)
        .sum();
    println!("resourceslice publish: {NODES} nodes x 1 pool x {DEVICES} devices");
    println!("  first publish : {first_writes} writes in {first:?}");
    println!(
        "  re-publish    : {second_writes} writes ({synced} by the publishers) in {second:?} + 2 s settle"
    );
    println!("  peak RSS      : {}", peak_rss());
    for p in publishers {
        p.stop().await;
    }
}
