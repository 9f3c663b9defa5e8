//! Every row of upstream's `TestControllerSyncPool`, as behaviour on
//! memapi: the stored slices and the publisher's stats after the first
//! syncs, then a second sync of every pool that must write nothing, and
//! the errors reported (each message once).
//!
//! memapi names created slices with five random characters where
//! upstream's fake client counts, so created slices are recognised by
//! their `generateName`. One row is adapted: with DRAPartitionableDevices
//! off a real server drops `perDeviceNodeSelection` and then refuses the
//! slice for having no node selection at all, so the
//! "drop-partitionable-devices" row publishes its counters and consuming
//! device for the owner node instead; and upstream's attribute
//! `new-attribute` is not a C identifier, which a real server refuses, so
//! it is `new_attribute` here.
//!
//! The second sync runs as the publisher runs it: the watch events of
//! the first writes queue their pools after the sync delay (and pools
//! where slices were created are checked again once the publisher's
//! memory of them expires); a row whose server drops no field then also
//! gets its desired state again through `update`.

use super::support::*;
use k8s_openapi::api::core::v1::{NodeSelector, NodeSelectorRequirement, NodeSelectorTerm};
use k8s_openapi::api::resource::v1::{
    Counter, CounterSet, Device, DeviceCounterConsumption, DeviceTaint, ResourcePool,
    ResourceSlice, ResourceSliceSpec,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use k8s_openapi::jiff::Timestamp;
use memapi::MemApi;
use resourceslice::{DriverResources, NodeSelection, Options, Owner, Pool, Slice, Stats};
use std::collections::BTreeSet;
use std::time::Duration;

const OWNER: &str = "owner";
const NODE_UID: &str = "node-uid";
const DRIVER: &str = "driver";
const POOL: &str = "pool";

fn gen_name(index: usize) -> String {
    format!("{index:05x}-{DRIVER}-{OWNER}-")
}

/// Who owns the row's slices.
#[derive(Clone, Copy, PartialEq)]
enum Own {
    /// The Node "owner" with a known UID: node-local slices.
    Node,
    /// An app object: slices of no node.
    App,
    /// No owner.
    Nobody,
}

fn owner_ref(own: Own) -> Option<Vec<OwnerReference>> {
    let (api_version, kind, uid) = match own {
        Own::Node => ("v1", "Node", NODE_UID),
        Own::App => ("apps/v1", "Something", ""),
        Own::Nobody => return None,
    };
    Some(vec![OwnerReference {
        api_version: api_version.into(),
        kind: kind.into(),
        name: OWNER.into(),
        uid: uid.into(),
        controller: Some(true),
        block_owner_deletion: None,
    }])
}

/// A stored slice as upstream's rows seed them.
fn stored(
    name: &str,
    own: Own,
    generation: i64,
    count: i64,
    devices: Vec<Device>,
) -> ResourceSlice {
    ResourceSlice {
        metadata: ObjectMeta {
            name: Some(name.into()),
            uid: Some(name.into()),
            owner_references: owner_ref(own),
            ..ObjectMeta::default()
        },
        spec: ResourceSliceSpec {
            driver: DRIVER.into(),
            node_name: (own == Own::Node).then(|| OWNER.to_string()),
            node_selector: (own == Own::App).then(|| selector("node-a")),
            pool: ResourcePool {
                name: POOL.into(),
                generation,
                resource_slice_count: count,
            },
            devices: Some(devices),
            ..ResourceSliceSpec::default()
        },
    }
}

fn selector(node: &str) -> NodeSelector {
    NodeSelector {
        node_selector_terms: vec![NodeSelectorTerm {
            match_fields: Some(vec![NodeSelectorRequirement {
                key: "name".into(),
                operator: "In".into(),
                values: Some(vec![node.into()]),
            }]),
            match_expressions: None,
        }],
    }
}

fn slices_of(devices: Vec<Vec<Device>>) -> Vec<Slice> {
    devices
        .into_iter()
        .map(|devices| Slice {
            devices,
            ..Slice::default()
        })
        .collect()
}

fn pool(generation: i64, devices: Vec<Vec<Device>>) -> Pool {
    Pool {
        generation,
        slices: slices_of(devices),
        ..Pool::default()
    }
}

fn time(s: &str) -> Time {
    Time(s.parse::<Timestamp>().unwrap())
}

fn taint(key: &str, effect: &str, at: Option<&str>) -> DeviceTaint {
    DeviceTaint {
        key: key.into(),
        effect: effect.into(),
        time_added: at.map(time),
        value: None,
    }
}

fn tainted(name: &str, taints: Vec<DeviceTaint>) -> Device {
    Device {
        taints: Some(taints),
        ..dev(name)
    }
}

fn counters(name: &str, value: &str) -> std::collections::BTreeMap<String, Counter> {
    [(
        name.to_string(),
        Counter {
            value: Quantity(value.into()),
        },
    )]
    .into()
}

fn consuming(name: &str, set: &str, counter: &str) -> Device {
    Device {
        consumes_counters: Some(vec![DeviceCounterConsumption {
            counter_set: set.into(),
            counters: counters(counter, "1"),
        }]),
        ..dev(name)
    }
}

fn counter_set(name: &str, counter: &str, value: &str) -> CounterSet {
    CounterSet {
        name: name.into(),
        counters: counters(counter, value),
    }
}

fn bound(name: &str) -> Device {
    Device {
        binding_conditions: Some(vec!["condition1".into(), "condition2".into()]),
        binding_failure_conditions: Some(vec!["failure-condition1".into()]),
        binds_to_node: Some(true),
        ..dev(name)
    }
}

/// One stored slice the row expects: its exact name, or the
/// `generateName` of a created one, with its pool and devices.
struct Want {
    name: String,
    created: bool,
    generation: i64,
    count: i64,
    devices: Vec<Device>,
}

fn kept(name: &str, generation: i64, count: i64, devices: Vec<Device>) -> Want {
    Want {
        name: name.into(),
        created: false,
        generation,
        count,
        devices,
    }
}

fn created(generate_name: &str, generation: i64, count: i64, devices: Vec<Device>) -> Want {
    Want {
        name: generate_name.into(),
        created: true,
        generation,
        count,
        devices,
    }
}

/// Devices as JSON without taint times (checked apart where they matter).
fn devices_json(devices: &[Device]) -> serde_json::Value {
    let mut v = serde_json::to_value(devices).unwrap();
    for d in v.as_array_mut().unwrap() {
        for t in d
            .get_mut("taints")
            .and_then(|t| t.as_array_mut())
            .into_iter()
            .flatten()
        {
            t.as_object_mut().unwrap().remove("timeAdded");
        }
    }
    v
}

struct Row {
    own: Own,
    reconcile: bool,
    sync_delay: Option<Duration>,
    drop: &'static [&'static str],
    initial: Vec<ResourceSlice>,
    desired: DriverResources,
    selection: NodeSelection,
    want: Vec<Want>,
    stats: Stats,
    errors: &'static [&'static str],
}

impl Row {
    fn new(initial: Vec<ResourceSlice>, desired: Pool) -> Self {
        Self {
            own: Own::Node,
            reconcile: false,
            sync_delay: None,
            drop: &[],
            initial,
            desired: one_pool(POOL, desired),
            selection: NodeSelection::ThisNode,
            want: Vec::new(),
            stats: Stats::default(),
            errors: &[],
        }
    }

    fn want(mut self, want: Vec<Want>) -> Self {
        self.want = want;
        self
    }

    fn stats(mut self, creates: u64, updates: u64, deletes: u64) -> Self {
        self.stats = Stats {
            creates,
            updates,
            deletes,
        };
        self
    }

    fn own(mut self, own: Own, selection: NodeSelection) -> Self {
        self.own = own;
        self.selection = selection;
        self
    }

    fn errors(mut self, errors: &'static [&'static str]) -> Self {
        self.errors = errors;
        self
    }

    fn dropping(mut self, paths: &'static [&'static str]) -> Self {
        self.drop = paths;
        self
    }

    /// Runs the row; returns the stored slices for further checks.
    async fn run(mut self, name: &str) -> Vec<ResourceSlice> {
        let mem = MemApi::new();
        mem.drop_fields("resourceslices", self.drop).unwrap();
        for slice in &self.initial {
            mem.create(slice).unwrap();
        }
        for pool in self.desired.pools.values_mut() {
            pool.node_selection = self.selection.clone();
        }
        let owner = match self.own {
            Own::Node => Some(Owner::Node {
                name: OWNER.into(),
                uid: Some(NODE_UID.into()),
            }),
            Own::App => Some(Owner::Object {
                api_version: "apps/v1".into(),
                kind: "Something".into(),
                name: OWNER.into(),
                uid: String::new(),
            }),
            Own::Nobody => None,
        };
        let (on_error, errors) = collect_errors();
        let mut options = Options::new(DRIVER, owner);
        options.resources = self.desired.clone();
        options.on_error = Some(on_error);
        options.reconcile_pool_with_name = self.reconcile.then(|| POOL.to_string());
        if let Some(delay) = self.sync_delay {
            options.sync_delay = delay;
        }
        let publisher = publish(&mem, options).await;
        let stored = slices(&mem);
        assert_eq!(publisher.stats(), self.stats, "{name}: stats");
        let mut got: Vec<(String, i64, i64, serde_json::Value)> = stored
            .iter()
            .map(|s| {
                let full = s.metadata.name.clone().unwrap();
                let label = match s.metadata.generate_name.as_deref() {
                    Some(g) if full.len() == g.len() + 5 && full.starts_with(g) => g.to_string(),
                    _ => full,
                };
                (
                    label,
                    s.spec.pool.generation,
                    s.spec.pool.resource_slice_count,
                    devices_json(s.spec.devices.as_deref().unwrap_or_default()),
                )
            })
            .collect();
        let mut want: Vec<(String, i64, i64, serde_json::Value)> = self
            .want
            .iter()
            .map(|w| {
                let _ = w.created;
                (
                    w.name.clone(),
                    w.generation,
                    w.count,
                    devices_json(&w.devices),
                )
            })
            .collect();
        got.sort_by(|a, b| a.0.cmp(&b.0));
        want.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(got, want, "{name}: slices");
        for s in &stored {
            assert_eq!(
                s.metadata.owner_references,
                owner_ref(self.own),
                "{name}: owner"
            );
            assert_eq!(s.spec.driver, DRIVER);
        }

        let before = writes(&mem);
        tokio::time::sleep(Duration::from_secs(61)).await;
        assert_eq!(
            writes(&mem),
            before,
            "{name}: the second sync writes nothing"
        );
        if self.drop.is_empty() {
            publisher.update(self.desired.clone());
            settle().await;
            assert_eq!(
                writes(&mem),
                before,
                "{name}: a sync after update writes nothing"
            );
        }
        assert_eq!(
            publisher.stats(),
            self.stats,
            "{name}: stats after the second sync"
        );
        let errors: BTreeSet<String> = errors.lock().unwrap().iter().cloned().collect();
        let expected: BTreeSet<String> = self.errors.iter().map(ToString::to_string).collect();
        assert_eq!(errors, expected, "{name}: errors");
        publisher.stop().await;
        stored
    }
}

#[tokio::test(start_paused = true)]
async fn create_slice() {
    Row::new(vec![], pool(0, vec![vec![]]))
        .want(vec![created(&gen_name(0), 1, 1, vec![])])
        .stats(1, 0, 0)
        .run("create-slice")
        .await;
}

#[tokio::test(start_paused = true)]
async fn keep_slice_unchanged() {
    let name = format!("{}0", gen_name(0));
    Row::new(
        vec![stored(&name, Own::Node, 1, 1, vec![dev("device")])],
        pool(1, vec![vec![dev("device")]]),
    )
    .want(vec![kept(&name, 1, 1, vec![dev("device")])])
    .run("keep-slice-unchanged")
    .await;
}

#[tokio::test(start_paused = true)]
async fn keep_taint_unchanged() {
    let name = format!("{}0", gen_name(0));
    let at = "2025-01-01T00:00:00Z";
    let stored_devices = vec![tainted("device", vec![taint("", "NoExecute", Some(at))])];
    let got = Row::new(
        vec![stored(&name, Own::Node, 1, 1, stored_devices.clone())],
        pool(
            1,
            vec![vec![tainted("device", vec![taint("", "NoExecute", None)])]],
        ),
    )
    .want(vec![kept(&name, 1, 1, stored_devices)])
    .run("keep-taint-unchanged")
    .await;
    let taints = got[0].spec.devices.as_ref().unwrap()[0]
        .taints
        .clone()
        .unwrap();
    assert_eq!(taints[0].time_added, Some(time(at)));
}

#[tokio::test(start_paused = true)]
async fn add_taints() {
    let name = format!("{}0", gen_name(0));
    let at = "2025-01-01T00:00:00Z";
    let earlier = "2024-12-31T23:59:00Z";
    let got = Row::new(
        vec![stored(
            &name,
            Own::Node,
            1,
            1,
            vec![tainted("device", vec![taint("", "NoExecute", Some(at))])],
        )],
        pool(
            1,
            vec![vec![tainted(
                "device",
                vec![
                    taint("", "NoExecute", None),
                    taint("example.com/tainted", "NoSchedule", None),
                    taint(
                        "example.com/tainted2",
                        "NoExecute",
                        Some("2024-12-31T23:59:00.100Z"),
                    ),
                ],
            )]],
        ),
    )
    .want(vec![kept(
        &name,
        1,
        1,
        vec![tainted(
            "device",
            vec![
                taint("", "NoExecute", None),
                taint("example.com/tainted", "NoSchedule", None),
                taint("example.com/tainted2", "NoExecute", None),
            ],
        )],
    )])
    .stats(0, 1, 0)
    .run("add-taints")
    .await;
    let taints = got[0].spec.devices.as_ref().unwrap()[0]
        .taints
        .clone()
        .unwrap();
    assert_eq!(
        taints[0].time_added,
        Some(time(at)),
        "kept from the stored slice"
    );
    assert!(taints[1].time_added.is_some(), "stamped by the server");
    assert_eq!(taints[2].time_added, Some(time(earlier)), "rounded");
}

#[tokio::test(start_paused = true)]
async fn drop_taints() {
    let name = format!("{}0", gen_name(0));
    Row::new(
        vec![stored(&name, Own::Node, 1, 1, vec![dev("device")])],
        pool(1, vec![vec![tainted("device", vec![taint("", "NoExecute", None)])]]),
    )
    .dropping(&["spec.devices[].taints"])
    .want(vec![kept(&name, 1, 1, vec![dev("device")])])
    .stats(0, 1, 0)
    .errors(&[r#"update ResourceSlice: pool "pool", slice #0: some fields were dropped by the apiserver, probably because these features are disabled: DRADeviceTaints"#])
    .run("drop-taints")
    .await;
}

#[tokio::test(start_paused = true)]
async fn drop_consumable_capacity_field() {
    let name = format!("{}0", gen_name(0));
    let multi = Device {
        allow_multiple_allocations: Some(true),
        ..dev("device")
    };
    Row::new(
        vec![stored(&name, Own::Node, 1, 1, vec![dev("device")])],
        pool(1, vec![vec![multi]]),
    )
    .dropping(&["spec.devices[].allowMultipleAllocations"])
    .want(vec![kept(&name, 1, 1, vec![dev("device")])])
    .stats(0, 1, 0)
    .errors(&[r#"update ResourceSlice: pool "pool", slice #0: some fields were dropped by the apiserver, probably because these features are disabled: DRAConsumableCapacity"#])
    .run("drop-consumable-capacity-field")
    .await;
}

#[tokio::test(start_paused = true)]
async fn remove_pool() {
    let mut row = Row::new(
        vec![stored("slice-1", Own::Node, 1, 1, vec![])],
        Pool::default(),
    )
    .stats(0, 0, 1);
    row.desired = DriverResources::default();
    row.sync_delay = Some(Duration::ZERO);
    row.run("remove-pool").await;
}

#[tokio::test(start_paused = true)]
async fn one_existing_and_one_desired_slice_should_be_updated_inplace() {
    let name = format!("{}0", gen_name(0));
    Row::new(
        vec![stored(&name, Own::Node, 1, 1, vec![])],
        pool(0, vec![vec![dev("device")]]),
    )
    .want(vec![kept(&name, 1, 1, vec![dev("device")])])
    .stats(0, 1, 0)
    .run("one-existing-and-one-desired-slice-should-be-updated-inplace")
    .await;
}

#[tokio::test(start_paused = true)]
async fn update_slice_when_more_than_one_existing_or_desired_slice() {
    let (s1, s2) = (format!("{}0", gen_name(0)), format!("{}1", gen_name(1)));
    Row::new(
        vec![
            stored(&s1, Own::Node, 1, 2, vec![]),
            stored(&s2, Own::Node, 1, 2, vec![dev("device-2")]),
        ],
        pool(0, vec![vec![dev("device-1")], vec![dev("device-2")]]),
    )
    .want(vec![
        kept(&s1, 1, 2, vec![dev("device-1")]),
        kept(&s2, 1, 2, vec![dev("device-2")]),
    ])
    .stats(0, 1, 0)
    .run("update-slice-when-more-than-one-existing-or-desired-slice")
    .await;
}

#[tokio::test(start_paused = true)]
async fn delete_redundant_slice() {
    let (s1, s2) = (format!("{}0", gen_name(0)), format!("{}1", gen_name(1)));
    Row::new(
        vec![
            stored(&s1, Own::Node, 1, 1, vec![dev("device")]),
            stored(&s2, Own::Node, 1, 1, vec![dev("device")]),
        ],
        pool(0, vec![vec![dev("device")]]),
    )
    .want(vec![kept(&s1, 1, 1, vec![dev("device")])])
    .stats(0, 0, 1)
    .run("delete-redundant-slice")
    .await;
}

#[tokio::test(start_paused = true)]
async fn update_slice() {
    let name = format!("{}0", gen_name(0));
    Row::new(
        vec![stored(&name, Own::Node, 1, 1, vec![dev("device")])],
        pool(0, vec![vec![dev_attrs("device")]]),
    )
    .want(vec![kept(&name, 1, 1, vec![dev_attrs("device")])])
    .stats(0, 1, 0)
    .run("update-slice")
    .await;
}

#[tokio::test(start_paused = true)]
async fn update_slice_many_devices() {
    let name = format!("{}0", gen_name(0));
    Row::new(
        vec![stored(
            &name,
            Own::Node,
            1,
            1,
            vec![dev("device-1"), dev("device-2")],
        )],
        pool(0, vec![vec![dev("device-1"), dev_attrs("device-2")]]),
    )
    .want(vec![kept(
        &name,
        1,
        1,
        vec![dev("device-1"), dev_attrs("device-2")],
    )])
    .stats(0, 1, 0)
    .run("update-slice-many-devices")
    .await;
}

fn three(generations: [i64; 3], count: i64) -> (Vec<String>, Vec<ResourceSlice>) {
    let names: Vec<String> = (0..3).map(|i| format!("{}{i}", gen_name(i))).collect();
    let slices = (0..3)
        .map(|i| {
            stored(
                &names[i],
                Own::Node,
                generations[i],
                count,
                vec![dev(&format!("device-{}", i + 1))],
            )
        })
        .collect();
    (names, slices)
}

/// A pool of generation 0 with one device a slice.
fn one_each(devices: &[Device]) -> Pool {
    pool(0, devices.iter().map(|d| vec![d.clone()]).collect())
}

/// The slices `names` kept, holding one of `devices` each, in order.
fn kept_each(names: &[String], generation: i64, count: i64, devices: &[Device]) -> Vec<Want> {
    names
        .iter()
        .zip(devices)
        .map(|(name, device)| kept(name, generation, count, vec![device.clone()]))
        .collect()
}

#[tokio::test(start_paused = true)]
async fn multiple_resourceslices_existing_no_changes() {
    let (n, initial) = three([1, 1, 1], 3);
    let devices = [dev("device-1"), dev("device-2"), dev("device-3")];
    Row::new(initial, one_each(&devices))
        .want(kept_each(&n, 1, 3, &devices))
        .run("multiple-resourceslices-existing-no-changes")
        .await;
}

#[tokio::test(start_paused = true)]
async fn multiple_resourceslices_existing_with_different_resource_pool_generation() {
    let (n, _) = three([1, 1, 1], 1);
    let initial = vec![
        stored(&n[0], Own::Node, 1, 1, vec![]),
        stored(&n[1], Own::Node, 2, 1, vec![dev("device")]),
        stored(&n[2], Own::Node, 1, 1, vec![]),
    ];
    Row::new(initial, pool(0, vec![vec![dev("device")]]))
        .want(vec![created(&gen_name(0), 3, 1, vec![dev("device")])])
        .stats(1, 0, 3)
        .run("multiple-resourceslices-existing-with-different-resource-pool-generation")
        .await;
}

#[tokio::test(start_paused = true)]
async fn multiple_resourceslices_existing_one_changed() {
    let (n, initial) = three([1, 1, 1], 3);
    let devices = [dev("device-1"), dev_attrs("device-2"), dev("device-3")];
    Row::new(initial, one_each(&devices))
        .want(kept_each(&n, 1, 3, &devices))
        .stats(0, 1, 0)
        .run("multiple-resourceslices-existing-one-changed")
        .await;
}

#[tokio::test(start_paused = true)]
async fn multiple_resourceslices_existing_two_changed() {
    let (n, initial) = three([1, 1, 1], 3);
    let devices = [
        dev("device-1"),
        dev_attrs("device-2"),
        dev_attrs("device-3"),
    ];
    Row::new(initial, one_each(&devices))
        .want(kept_each(&n, 2, 3, &devices))
        .stats(0, 3, 0)
        .run("multiple-resourceslices-existing-two-changed")
        .await;
}

#[tokio::test(start_paused = true)]
async fn multiple_resourceslices_existing_one_removed() {
    let (n, initial) = three([1, 1, 1], 3);
    let devices = [dev("device-1"), dev("device-2")];
    Row::new(initial, one_each(&devices))
        .want(kept_each(&n, 2, 2, &devices))
        .stats(0, 2, 1)
        .run("multiple-resourceslices-existing-one-removed")
        .await;
}

#[tokio::test(start_paused = true)]
async fn multiple_resourceslices_existing_one_added() {
    let (n, initial) = three([1, 1, 1], 3);
    let devices = [
        dev("device-1"),
        dev("device-2"),
        dev("device-3"),
        dev("device-4"),
    ];
    let mut want = kept_each(&n, 2, 4, &devices);
    want.push(created(&gen_name(3), 2, 4, vec![dev("device-4")]));
    Row::new(initial, one_each(&devices))
        .want(want)
        .stats(1, 3, 0)
        .run("multiple-resourceslices-existing-one-added")
        .await;
}

#[tokio::test(start_paused = true)]
async fn add_one_network_device_all_nodes() {
    let got = Row::new(vec![], pool(0, vec![vec![dev("device")]]))
        .own(Own::Nobody, NodeSelection::AllNodes)
        .want(vec![created(
            &format!("00000-{DRIVER}-"),
            1,
            1,
            vec![dev("device")],
        )])
        .stats(1, 0, 0)
        .run("add-one-network-device-all-nodes")
        .await;
    assert_eq!(got[0].spec.all_nodes, Some(true));
    assert_eq!(got[0].spec.node_name, None);
}

#[tokio::test(start_paused = true)]
async fn add_one_network_device_some_nodes() {
    let got = Row::new(vec![], pool(0, vec![vec![dev("device")]]))
        .own(Own::App, NodeSelection::NodeSelector(selector("node-a")))
        .want(vec![created(&gen_name(0), 1, 1, vec![dev("device")])])
        .stats(1, 0, 0)
        .run("add-one-network-device-some-nodes")
        .await;
    assert_eq!(got[0].spec.node_selector, Some(selector("node-a")));
}

async fn reconcile_row(
    name: &str,
    selection: NodeSelection,
    devices: Vec<Device>,
    per_device: bool,
) -> ResourceSlice {
    let mut p = pool(0, vec![devices.clone()]);
    p.slices[0].per_device_node_selection = per_device.then_some(true);
    let mut row = Row::new(vec![], p)
        .own(Own::Node, selection)
        .want(vec![created(&gen_name(0), 1, 1, devices)])
        .stats(1, 0, 0);
    row.reconcile = true;
    let got = row.run(name).await;
    assert_eq!(got[0].spec.node_name, None, "{name}: no node name");
    got[0].clone()
}

#[tokio::test(start_paused = true)]
async fn reconcile_with_pool_name_create_slice_no_node_name() {
    let got = reconcile_row(
        "reconcile-with-pool-name-create-slice-no-node-name",
        NodeSelection::AllNodes,
        vec![],
        false,
    )
    .await;
    assert_eq!(got.spec.all_nodes, Some(true));
}

#[tokio::test(start_paused = true)]
async fn reconcile_with_pool_name_with_node_selector() {
    let got = reconcile_row(
        "reconcile-with-pool-name-with-node-selector",
        NodeSelection::NodeSelector(selector("node-a")),
        vec![dev("device")],
        false,
    )
    .await;
    assert_eq!(got.spec.node_selector, Some(selector("node-a")));
}

#[tokio::test(start_paused = true)]
async fn reconcile_with_pool_name_with_perdevice_node_selector() {
    let device = Device {
        node_selector: Some(selector("node-a")),
        ..dev("device")
    };
    let got = reconcile_row(
        "reconcile-with-pool-name-with-perdevice-node-selector",
        NodeSelection::PerDevice,
        vec![device],
        true,
    )
    .await;
    assert_eq!(got.spec.per_device_node_selection, Some(true));
}

#[tokio::test(start_paused = true)]
async fn update_node_selector() {
    let got = Row::new(
        vec![stored(
            &format!("{}0", gen_name(0)),
            Own::App,
            1,
            1,
            vec![dev("device")],
        )],
        pool(0, vec![vec![dev("device")]]),
    )
    .own(Own::App, NodeSelection::NodeSelector(selector("node-b")))
    .want(vec![kept(
        &format!("{}0", gen_name(0)),
        1,
        1,
        vec![dev("device")],
    )])
    .stats(0, 1, 0)
    .run("update-node-selector")
    .await;
    assert_eq!(got[0].spec.node_selector, Some(selector("node-b")));
}

fn partitionable() -> Pool {
    let device = Device {
        node_name: Some(OWNER.into()),
        ..consuming("device", "gpu-0", "mem")
    };
    Pool {
        generation: 1,
        slices: vec![
            Slice {
                per_device_node_selection: Some(true),
                shared_counters: vec![counter_set("gpu-0", "mem", "1")],
                ..Slice::default()
            },
            Slice {
                per_device_node_selection: Some(true),
                devices: vec![device],
                ..Slice::default()
            },
        ],
        ..Pool::default()
    }
}

#[tokio::test(start_paused = true)]
async fn create_partitionable_devices() {
    let device = partitionable().slices[1].devices.clone();
    let got = Row::new(vec![], partitionable())
        .own(Own::App, NodeSelection::PerDevice)
        .want(vec![
            created(&gen_name(0), 1, 2, vec![]),
            created(&gen_name(1), 1, 2, device),
        ])
        .stats(2, 0, 0)
        .run("create-partitionable-devices")
        .await;
    assert_eq!(got[0].spec.shared_counters.as_ref().map(Vec::len), Some(1));
    assert!(
        got.iter()
            .all(|s| s.spec.per_device_node_selection == Some(true))
    );
}

#[tokio::test(start_paused = true)]
async fn drop_partitionable_devices() {
    let p = Pool {
        generation: 1,
        slices: vec![
            Slice {
                shared_counters: vec![counter_set("gpu-0", "mem", "1")],
                ..Slice::default()
            },
            Slice {
                devices: vec![consuming("device", "gpu-0", "mem")],
                ..Slice::default()
            },
        ],
        ..Pool::default()
    };
    let got = Row::new(vec![], p)
        .dropping(&["spec.sharedCounters", "spec.perDeviceNodeSelection", "spec.devices[].consumesCounters"])
        .want(vec![
            created(&gen_name(0), 1, 2, vec![]),
            created(&gen_name(1), 1, 2, vec![dev("device")]),
        ])
        .stats(2, 0, 0)
        .errors(&[
            r#"create ResourceSlice: pool "pool", slice #0: some fields were dropped by the apiserver, probably because these features are disabled: DRAPartitionableDevices"#,
            r#"create ResourceSlice: pool "pool", slice #1: some fields were dropped by the apiserver, probably because these features are disabled: DRAPartitionableDevices"#,
        ])
        .run("drop-partitionable-devices")
        .await;
    assert_eq!(got[0].spec.shared_counters, None);
}

#[tokio::test(start_paused = true)]
async fn create_device_with_binding_condition() {
    Row::new(vec![], pool(1, vec![vec![bound("device")]]))
        .want(vec![created(&gen_name(0), 1, 1, vec![bound("device")])])
        .stats(1, 0, 0)
        .run("create-device-with-binding-condition")
        .await;
}

#[tokio::test(start_paused = true)]
async fn drop_device_with_binding_condition() {
    Row::new(vec![], pool(1, vec![vec![bound("device")]]))
        .dropping(&[
            "spec.devices[].bindingConditions",
            "spec.devices[].bindingFailureConditions",
            "spec.devices[].bindsToNode",
        ])
        .want(vec![created(&gen_name(0), 1, 1, vec![dev("device")])])
        .stats(1, 0, 0)
        .errors(&[r#"create ResourceSlice: pool "pool", slice #0: some fields were dropped by the apiserver, probably because these features are disabled: DRADeviceBindingConditions"#])
        .run("drop-device-with-binding-condition")
        .await;
}

async fn invalid(name: &str, p: Pool, error: &'static [&'static str]) {
    Row::new(vec![], p).errors(error).run(name).await;
}

#[tokio::test(start_paused = true)]
async fn detect_resource_pools_with_duplicate_counter_sets() {
    let set = Slice {
        shared_counters: vec![CounterSet {
            name: "counterset".into(),
            counters: Default::default(),
        }],
        ..Slice::default()
    };
    let p = Pool {
        generation: 1,
        slices: vec![set.clone(), set],
        ..Pool::default()
    };
    invalid(
        "detect-resource-pools-with-duplicate-counter-sets",
        p,
        &[r#"pool validation failed: found duplicate counter set "counterset" in pool "pool""#],
    )
    .await;
}

#[tokio::test(start_paused = true)]
async fn detect_duplicate_devices() {
    invalid(
        "detect-duplicate-devices",
        pool(1, vec![vec![dev("device")], vec![dev("device")]]),
        &[r#"pool validation failed: found duplicate device "device" in pool "pool""#],
    )
    .await;
}

#[tokio::test(start_paused = true)]
async fn detect_device_referencing_unknown_counter_set() {
    let device = Device {
        consumes_counters: Some(vec![DeviceCounterConsumption {
            counter_set: "counterset".into(),
            counters: Default::default(),
        }]),
        ..dev("device")
    };
    invalid(
        "detect-device-referencing-unknown-counter-set",
        pool(1, vec![vec![device]]),
        &[r#"pool validation failed: counter set "counterset" referenced by device "device" not found"#],
    )
    .await;
}

#[tokio::test(start_paused = true)]
async fn detect_device_referencing_unknown_counter_in_counter_set() {
    let p = Pool {
        generation: 1,
        slices: vec![
            Slice {
                shared_counters: vec![counter_set("counterset", "memory", "8Gi")],
                ..Slice::default()
            },
            Slice {
                devices: vec![consuming("device", "counterset", "cpu")],
                ..Slice::default()
            },
        ],
        ..Pool::default()
    };
    invalid(
        "detect-device-referencing-unknown-counter-in-counter-set",
        p,
        &[r#"pool validation failed: counter "cpu" referenced by device "device" not found in counter set "counterset""#],
    )
    .await;
}

#[tokio::test(start_paused = true)]
async fn migration_from_random_naming_to_index_based_naming() {
    let initial = (1..=3)
        .map(|i| {
            stored(
                &format!("random-name{i}"),
                Own::Node,
                1,
                3,
                vec![dev(&format!("device-{i}"))],
            )
        })
        .collect();
    Row::new(
        initial,
        pool(
            0,
            vec![
                vec![dev("device-1")],
                vec![dev("device-2")],
                vec![dev("device-3")],
            ],
        ),
    )
    .want(vec![
        created(&gen_name(0), 2, 3, vec![dev("device-1")]),
        created(&gen_name(1), 2, 3, vec![dev("device-2")]),
        created(&gen_name(2), 2, 3, vec![dev("device-3")]),
    ])
    .stats(3, 0, 3)
    .run("migration-from-random-naming-to-index-based-naming")
    .await;
}

#[tokio::test(start_paused = true)]
async fn migration_mixed_naming() {
    let s2 = format!("{}1", gen_name(1));
    let initial = vec![
        stored("random-name1", Own::Node, 1, 3, vec![dev("device-1")]),
        stored(&s2, Own::Node, 1, 3, vec![dev("device-2")]),
        stored("random-name3", Own::Node, 1, 3, vec![dev("device-3")]),
    ];
    Row::new(
        initial,
        pool(
            0,
            vec![
                vec![dev("device-1")],
                vec![dev("device-2")],
                vec![dev("device-3")],
            ],
        ),
    )
    .want(vec![
        created(&gen_name(0), 2, 3, vec![dev("device-1")]),
        kept(&s2, 2, 3, vec![dev("device-2")]),
        created(&gen_name(2), 2, 3, vec![dev("device-3")]),
    ])
    .stats(2, 1, 2)
    .run("migration-mixed-naming")
    .await;
}
