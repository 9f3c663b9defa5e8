//! Builders and a harness shared by the tests.

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::resource::v1::{
    Device, DeviceAttribute, ResourcePool, ResourceSlice, ResourceSliceSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use memapi::{MemApi, Verb};
use resourceslice::{DriverResources, Error, ErrorHandler, Options, Pool, Publisher};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A device with only a name.
pub(crate) fn dev(name: &str) -> Device {
    Device {
        name: name.into(),
        ..Device::default()
    }
}

/// A device with upstream's `new-attribute: value`, spelled as a real server accepts it (`new_attribute`).
pub(crate) fn dev_attrs(name: &str) -> Device {
    Device {
        attributes: Some(
            [(
                "new_attribute".to_string(),
                DeviceAttribute {
                    string: Some("value".into()),
                    ..DeviceAttribute::default()
                },
            )]
            .into(),
        ),
        ..dev(name)
    }
}

/// Desired resources of one pool.
pub(crate) fn one_pool(name: &str, pool: Pool) -> DriverResources {
    DriverResources {
        pools: [(name.to_string(), pool)].into(),
    }
}

/// Writes made to ResourceSlices.
pub(crate) fn writes(mem: &MemApi) -> u64 {
    let r = mem.requests();
    [
        Verb::Create,
        Verb::Update,
        Verb::Patch,
        Verb::Delete,
        Verb::DeleteCollection,
    ]
    .iter()
    .map(|v| r.count(*v, "resourceslices", None))
    .sum()
}

/// The stored slices, sorted by name.
pub(crate) fn slices(mem: &MemApi) -> Vec<ResourceSlice> {
    mem.list::<ResourceSlice>()
}

/// An error handler that keeps the messages.
pub(crate) fn collect_errors() -> (ErrorHandler, Arc<Mutex<Vec<String>>>) {
    let errors = Arc::new(Mutex::new(Vec::new()));
    let sink = errors.clone();
    let handler: ErrorHandler = Arc::new(move |e: &Error| sink.lock().unwrap().push(e.to_string()));
    (handler, errors)
}

/// Lets the publisher work (paused time: everything ready runs).
pub(crate) async fn settle() {
    tokio::time::sleep(Duration::from_secs(1)).await;
}

/// Starts a publisher on `mem` and lets it publish.
pub(crate) async fn publish(mem: &MemApi, options: Options) -> Publisher {
    let publisher = Publisher::start(mem.client(), options).unwrap();
    settle().await;
    publisher
}

/// A slice of one driver on one node, in a pool named after the node.
pub(crate) fn slice(name: &str, driver: &str, node: &str) -> ResourceSlice {
    ResourceSlice {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        spec: ResourceSliceSpec {
            driver: driver.into(),
            node_name: Some(node.into()),
            pool: ResourcePool {
                name: node.into(),
                generation: 1,
                resource_slice_count: 1,
            },
            ..ResourceSliceSpec::default()
        },
    }
}

/// Creates a Node named `name`: the owner a node-local publisher looks up.
pub(crate) fn node(mem: &MemApi, name: &str) {
    mem.create(&Node {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        ..Node::default()
    })
    .unwrap();
}
