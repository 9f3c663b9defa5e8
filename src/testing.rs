//! What only tests and benchmarks need, beyond the library's own surface
//! (compiled in by the `testing` feature, which the crate's own tests and
//! benchmarks turn on): the event recorder and its outcomes, the leader
//! elector on its own, the admin server's routes, the PersistentVolume
//! controller's store and volume index (what
//! [`crate::pv::Controller::store`] shows), the offline binder, and (with
//! the embedded cluster) the settle loop, the stand-in kubelet and the
//! tables of the embedded mode.

#[cfg(feature = "embedded")]
pub use crate::embedded::{
    render_events, render_resource_claims, render_table, stand_in_kubelet, wait_settled,
};
pub use crate::pv::{MatchError, VolumeIndex};
pub use crate::pv::{PvStore, ReservedVolume};
pub use crate::runtime::events::{EventRecorder, QUEUE_CAPACITY, RecorderError, reference_of};
pub use crate::runtime::leader::{LeaderElector, LeaderError};
pub use crate::runtime::metrics::EventOutcome;
pub use crate::runtime::plan::Then;
pub use crate::runtime::workload::Ended;

/// The admin server's own routes, for tests that call them without a
/// socket.
pub fn router(
    metrics: std::sync::Arc<crate::runtime::metrics::Metrics>,
    health: crate::runtime::server::Health,
) -> axum::Router {
    crate::runtime::server::router(crate::runtime::server::AdminState {
        metrics,
        health,
        routes: axum::Router::new(),
    })
}

pub use crate::pv::{Rehearsed, Server};

/// What an offline binder knows: the objects of its store of volumes and
/// claims and of its other stores.
#[derive(Clone, Debug, Default)]
pub struct OfflineObjects {
    /// Volumes, in the store.
    pub volumes: Vec<k8s_openapi::api::core::v1::PersistentVolume>,
    /// Claims, in the store.
    pub claims: Vec<k8s_openapi::api::core::v1::PersistentVolumeClaim>,
    /// StorageClasses.
    pub classes: Vec<k8s_openapi::api::storage::v1::StorageClass>,
    /// Pods.
    pub pods: Vec<k8s_openapi::api::core::v1::Pod>,
    /// Nodes.
    pub nodes: Vec<k8s_openapi::api::core::v1::Node>,
}

/// The PersistentVolume controller's decisions with no API server and no
/// client at all, knowing `objects`: for deciding and rehearsing
/// ([`crate::pv::Binder::rehearse_claim`],
/// [`crate::pv::Binder::rehearse_volume`]) with nothing sent.
pub fn offline_binder(
    settings: crate::pv::Settings,
    objects: OfflineObjects,
) -> Result<crate::pv::Binder, crate::runtime::informer::StoreError> {
    use std::sync::Arc;

    use crate::kinds::NODE;
    use crate::runtime::informer::{MemStore, Store, StoreRef};

    fn filled<K: kube::Resource + Send + Sync + 'static>(
        objects: Vec<K>,
    ) -> Result<Arc<MemStore<K>>, crate::runtime::informer::StoreError>
    where
        MemStore<K>: Store<K>,
    {
        let store = Arc::new(MemStore::<K>::default());
        for object in objects {
            store.written(Arc::new(object))?;
        }
        Ok(store)
    }

    let store = Arc::new(PvStore::default());
    for volume in objects.volumes {
        store.offer_volume(Arc::new(volume))?;
    }
    for claim in objects.claims {
        store.offer_claim(Arc::new(claim))?;
    }
    let nodes = StoreRef::new(&NODE);
    nodes.fix(filled(objects.nodes)?);
    Ok(crate::pv::Binder {
        store,
        classes: filled(objects.classes)?,
        pods: filled(objects.pods)?,
        nodes,
        running: crate::runtime::operations::Running::default(),
        memory: Arc::default(),
        settings,
    })
}
