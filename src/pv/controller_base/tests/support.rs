//! A controller on an API server of the tests, with empty stores, for unit
//! tests of its decisions, operations and writes.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use memapi::MemApi;

use crate::kinds::{NODE, PERSISTENT_VOLUME, PERSISTENT_VOLUME_CLAIM, POD};
use crate::pv::constants::CONTROLLER_NAME;
use crate::pv::controller::{Binder, PvEffect, Settings};
use crate::pv::controller_base::work::{Applier, Reservations};
use crate::pv::controller_base::{Controller, NAME, operation_tracker};
use crate::pv::metrics::PvMetrics;
use crate::pv::operations::Operations;
use crate::pv::store::PvStore;
use crate::runtime::events::EventRecorder;
use crate::runtime::executor::{Executor, Parts};
use crate::runtime::informer::{MemStore, Store, StoreRef};
use crate::runtime::kinds::Shape;
use crate::runtime::metrics::Metrics;
use crate::runtime::queue::WorkQueue;
use crate::runtime::write::{Door, WriterSet};

/// A controller with the recorder of its events, which a test flushes
/// before it reads them.
pub(crate) struct Tested {
    /// The controller.
    pub(crate) controller: Controller,
    /// Its events' recorder.
    pub(crate) recorder: EventRecorder,
}

impl std::ops::Deref for Tested {
    type Target = Controller;

    fn deref(&self) -> &Controller {
        &self.controller
    }
}

/// The controller on `api`; the caller fills its store.
pub(crate) fn controller(api: &MemApi) -> Tested {
    controller_with(api.client(), Settings::default())
}

/// A store handle of the kind `shape` describes, fixed to `store`.
fn fixed<K>(shape: &'static Shape<K>, store: Arc<dyn Store<K>>) -> StoreRef<K> {
    let handle = StoreRef::new(shape);
    handle.fix(store);
    handle
}

/// The controller on `client` with `settings`; the caller fills its
/// store.
pub(crate) fn controller_with(client: kube::Client, settings: Settings) -> Tested {
    let metrics = Arc::new(Metrics::new().expect("metrics"));
    let pv_metrics = PvMetrics::new(&metrics).expect("pv metrics");
    let store = Arc::new(PvStore::default());
    let pods = Arc::new(MemStore::<Pod>::default());
    let operations = operation_tracker(4, pv_metrics.clone());
    let binder = Binder {
        store: Arc::clone(&store),
        classes: Arc::default(),
        pods: Arc::clone(&pods),
        nodes: fixed(&NODE, Arc::new(MemStore::default())),
        running: operations.running(),
        memory: Arc::default(),
        settings,
    };
    let door = Door::new(client.clone(), Arc::clone(&metrics));
    let writers = WriterSet::default()
        .with(door.writer(
            NAME,
            fixed(
                &PERSISTENT_VOLUME,
                Arc::clone(&store) as Arc<dyn Store<PersistentVolume>>,
            ),
        ))
        .with(door.writer(
            NAME,
            fixed(
                &PERSISTENT_VOLUME_CLAIM,
                Arc::clone(&store) as Arc<dyn Store<PersistentVolumeClaim>>,
            ),
        ))
        .with(door.writer(NAME, fixed(&POD, pods)));
    let recorder = EventRecorder::new(
        client.clone(),
        Arc::clone(&metrics),
        CONTROLLER_NAME,
        "test",
    )
    .expect("recorder");
    let runner = Operations {
        binder: binder.clone(),
        client,
    }
    .runner();
    let executor = Executor::new(Parts {
        controller: NAME,
        writers,
        recorder: recorder.clone(),
        effects: Arc::new(Applier {
            store: Arc::clone(&store),
            memory: Arc::clone(&binder.memory),
            claim_queue: WorkQueue::new(),
            metrics: pv_metrics,
        }),
        reserver: Some(Arc::new(Reservations(store))),
        operations: Some((operations.clone(), runner)),
        shadow: None,
    });
    Tested {
        controller: Controller {
            binder,
            executor,
            operations,
        },
        recorder,
    }
}

/// The executor of `controller`'s plans.
pub(crate) fn executor(controller: &Controller) -> &Executor<PvEffect> {
    &controller.executor
}
