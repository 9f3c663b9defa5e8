//! What only tests and benchmarks need, beyond the library's own surface:
//! the event recorder and its outcomes, the leader elector on its own, the
//! admin server's routes, the PersistentVolume controller's shadow cache
//! and volume index (what [`crate::pv::Controller::cache`] shows), and
//! (with the embedded cluster) the settle loop, the stand-in kubelet and
//! the tables of the embedded mode.

#[cfg(feature = "embedded")]
pub use crate::embedded::{
    render_events, render_resource_claims, render_table, stand_in_kubelet, wait_settled,
};
pub use crate::pv::cache::{CacheError, Reservation, ShadowCache};
pub use crate::pv::index::{MatchError, VolumeIndex};
pub use crate::runtime::events::{
    EventRecorder, EventType, QUEUE_CAPACITY, RecorderError, reference_of,
};
pub use crate::runtime::leader::{LeaderElector, LeaderError};
pub use crate::runtime::metrics::EventOutcome;

/// The admin server's routes (without shadow mode), for tests that call
/// them without a socket.
pub fn router(
    metrics: std::sync::Arc<crate::runtime::metrics::Metrics>,
    health: crate::runtime::server::Health,
) -> axum::Router {
    crate::runtime::server::router(crate::runtime::server::AdminState {
        metrics,
        health,
        shadow: None,
        routes: axum::Router::new(),
    })
}
