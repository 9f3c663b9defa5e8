//! What only tests and benchmarks need, beyond the library's own surface
//! (compiled in by the `testing` feature, which the crate's own tests and
//! benchmarks turn on): the event recorder and its outcomes, the leader
//! elector on its own, the admin server's routes, the PersistentVolume
//! controller's shadow cache and volume index (what
//! [`crate::pv::Controller::cache`] shows), the offline binder, and (with
//! the embedded cluster) the settle loop, the stand-in kubelet and the
//! tables of the embedded mode.

#[cfg(feature = "embedded")]
pub use crate::embedded::{
    render_events, render_resource_claims, render_table, stand_in_kubelet, wait_settled,
};
pub use crate::pv::cache::{CacheError, Reservation, ShadowCache};
pub use crate::pv::index::{MatchError, VolumeIndex};
pub use crate::runtime::events::{EventRecorder, QUEUE_CAPACITY, RecorderError, reference_of};
pub use crate::runtime::leader::{LeaderElector, LeaderError};
pub use crate::runtime::metrics::EventOutcome;

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

pub use crate::pv::controller::{Rehearsed, Server};

/// What an offline PersistentVolume controller knows: the objects of its
/// shadow cache and of its other stores.
#[derive(Clone, Debug, Default)]
pub struct OfflineObjects {
    /// Volumes, in the shadow cache.
    pub volumes: Vec<k8s_openapi::api::core::v1::PersistentVolume>,
    /// Claims, in the shadow cache.
    pub claims: Vec<k8s_openapi::api::core::v1::PersistentVolumeClaim>,
    /// StorageClasses.
    pub classes: Vec<k8s_openapi::api::storage::v1::StorageClass>,
    /// Pods.
    pub pods: Vec<k8s_openapi::api::core::v1::Pod>,
    /// Nodes.
    pub nodes: Vec<k8s_openapi::api::core::v1::Node>,
}

/// Why an offline controller could not be made.
#[derive(Debug, thiserror::Error)]
pub enum OfflineError {
    /// Its parts could not be built.
    #[error(transparent)]
    Build(#[from] crate::runtime::shared::BuildError),
    /// Its client could not be built.
    #[error("building the offline client: {0}")]
    Client(#[from] kube::Error),
    /// An object could not be stored.
    #[error(transparent)]
    Store(#[from] crate::runtime::informer::StoreError),
    /// A volume or claim could not be put into the shadow cache.
    #[error(transparent)]
    Cache(#[from] CacheError),
}

/// A PersistentVolume controller with no API server behind it (its client
/// points at a closed port: anything sent fails), knowing `objects`: for
/// rehearsing its decisions ([`crate::pv::Controller::rehearse_claim`],
/// [`crate::pv::Controller::rehearse_volume`]) with nothing sent.
pub fn offline_binder(
    settings: crate::pv::Settings,
    objects: OfflineObjects,
) -> Result<crate::pv::Controller, OfflineError> {
    use std::sync::Arc;

    use crate::kinds::{NODE, PERSISTENT_VOLUME, PERSISTENT_VOLUME_CLAIM, POD};
    use crate::pv::controller::{Controller, Listers, Parts, Writers};
    use crate::runtime::informer::{MemStore, Store, StoreRef};
    use crate::runtime::kinds::Shape;
    use crate::runtime::write::Door;

    fn fixed<K>(shape: &'static Shape<K>, store: Arc<dyn Store<K>>) -> StoreRef<K> {
        let handle = StoreRef::new(shape);
        handle.fix(store);
        handle
    }
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

    let nowhere = kube::Config::new(http::Uri::from_static("http://127.0.0.1:9"));
    let client = kube::Client::try_from(nowhere)?;
    let metrics = Arc::new(
        crate::runtime::metrics::Metrics::new()
            .map_err(crate::runtime::shared::BuildError::from)?,
    );
    let cache = Arc::new(ShadowCache::default());
    for volume in objects.volumes {
        cache.offer_volume(Arc::new(volume))?;
    }
    for claim in objects.claims {
        cache.offer_claim(Arc::new(claim))?;
    }
    let pods = filled(objects.pods)?;
    let door = Door::new(client.clone(), Arc::clone(&metrics));
    let parts = Parts {
        client: client.clone(),
        listers: Listers {
            classes: filled(objects.classes)?,
            pods: Arc::clone(&pods),
            nodes: fixed(&NODE, filled(objects.nodes)?),
        },
        writers: Writers {
            volumes: door.writer(
                "offline",
                fixed(&PERSISTENT_VOLUME, Arc::clone(&cache) as _),
            ),
            claims: door.writer(
                "offline",
                fixed(&PERSISTENT_VOLUME_CLAIM, Arc::clone(&cache) as _),
            ),
            pods: door.writer("offline", fixed(&POD, pods)),
        },
        cache,
        recorder: EventRecorder::new(
            client,
            Arc::clone(&metrics),
            crate::pv::constants::CONTROLLER_NAME,
            "offline",
        )
        .map_err(crate::runtime::shared::BuildError::from)?,
        operations: crate::runtime::operations::OperationTracker::new(),
        settings,
        pv_metrics: crate::pv::metrics::PvMetrics::new(&metrics)
            .map_err(crate::runtime::shared::BuildError::from)?,
        journal: None,
    };
    Ok(Controller::new(parts))
}
