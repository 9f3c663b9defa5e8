//! The publisher's promises beyond upstream's table: a restart with the
//! same desired state writes nothing, a changed device rewrites only its
//! own pool, large pools publish in as few writes as slices, an invalid
//! pool sends nothing and blocks no other pool.

use super::support::*;
use k8s_openapi::api::core::v1::Node;
use memapi::MemApi;
use resourceslice::{DriverResources, Options, Owner, Pool, Stats};
use std::time::Duration;

const DRIVER: &str = "gpu.example.com";

/// `pools` pools of `devices` devices each.
fn resources(pools: usize, devices: usize) -> DriverResources {
    DriverResources {
        pools: (0..pools)
            .map(|p| {
                let list = (0..devices).map(|d| dev(&format!("dev-{d}"))).collect();
                (format!("pool-{p}"), Pool::from_devices(list))
            })
            .collect(),
    }
}

fn options(resources: DriverResources) -> Options {
    let mut options = Options::new(DRIVER, Some(Owner::node("node-1")));
    options.resources = resources;
    options
}

#[tokio::test(start_paused = true)]
async fn ten_pools_of_300_devices_publish_in_30_slices_and_a_restart_writes_nothing() {
    let mem = MemApi::new();
    node(&mem, "node-1");
    let first = publish(&mem, options(resources(10, 300))).await;
    assert_eq!(slices(&mem).len(), 30);
    assert_eq!(writes(&mem), 30);
    assert_eq!(
        first.stats(),
        Stats {
            creates: 30,
            updates: 0,
            deletes: 0
        }
    );
    let uid = mem.get::<Node>(None, "node-1").unwrap().metadata.uid;
    assert!(
        slices(&mem)
            .iter()
            .all(|s| s.metadata.owner_references.as_ref().unwrap()[0].uid == uid.clone().unwrap())
    );
    first.stop().await;

    let second = publish(&mem, options(resources(10, 300))).await;
    tokio::time::sleep(Duration::from_secs(120)).await;
    assert_eq!(writes(&mem), 30, "the restarted publisher writes nothing");
    assert_eq!(second.stats(), Stats::default());
    second.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_changed_device_rewrites_only_its_own_pool() {
    let mem = MemApi::new();
    node(&mem, "node-1");
    let publisher = publish(&mem, options(resources(3, 200))).await;
    let before: Vec<_> = slices(&mem);
    let mut changed = resources(3, 200);
    changed.pools.get_mut("pool-1").unwrap().slices[1].devices[5] = dev_attrs("dev-133");
    publisher.update(changed);
    settle().await;
    assert_eq!(
        publisher.stats(),
        Stats {
            creates: 6,
            updates: 1,
            deletes: 0
        }
    );
    let after = slices(&mem);
    let moved: Vec<_> = before
        .iter()
        .zip(&after)
        .filter(|(b, a)| b.metadata.resource_version != a.metadata.resource_version)
        .map(|(_, a)| (a.spec.pool.name.clone(), a.spec.pool.generation))
        .collect();
    assert_eq!(
        moved,
        [("pool-1".to_string(), 1)],
        "one slice, generation kept"
    );
    publisher.stop().await;
}

#[tokio::test(start_paused = true)]
async fn an_invalid_pool_sends_nothing_and_blocks_no_other_pool() {
    let mem = MemApi::new();
    node(&mem, "node-1");
    let mut desired = resources(2, 3);
    desired.pools.get_mut("pool-0").unwrap().slices[0].devices[1] = dev("Not_A_Label");
    let (on_error, errors) = collect_errors();
    let mut options = options(desired);
    options.on_error = Some(on_error);
    let publisher = publish(&mem, options).await;
    assert_eq!(writes(&mem), 1, "only pool-1's slice");
    assert_eq!(slices(&mem)[0].spec.pool.name, "pool-1");
    assert_eq!(
        errors.lock().unwrap().as_slice(),
        [
            r#"pool validation failed: device name "Not_A_Label" in pool "pool-0" is not a DNS label (lower-case letters, digits and '-', at most 63)"#
        ]
    );
    publisher.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_lost_create_answer_is_retried_without_a_second_slice() {
    let mem = MemApi::new();
    node(&mem, "node-1");
    mem.add_reactor(
        memapi::Reactor::on(memapi::Verb::Create, "resourceslices")
            .error(500)
            .after_commit(),
    );
    let (on_error, errors) = collect_errors();
    let mut options = options(resources(1, 1));
    options.on_error = Some(on_error);
    let publisher = publish(&mem, options).await;
    tokio::time::sleep(Duration::from_secs(120)).await;
    assert_eq!(errors.lock().unwrap().len(), 1);
    let stored = slices(&mem);
    assert_eq!(
        stored.len(),
        1,
        "the watch showed the slice stored despite the error"
    );
    publisher.stop().await;
}
