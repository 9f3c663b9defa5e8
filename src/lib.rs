//! pv-controller: a Kubernetes PersistentVolume controller.
//!
//! It binds PersistentVolumeClaims to PersistentVolumes, hands claims to
//! provisioners and reclaims released volumes, with the behaviour of the
//! `persistentvolume-binder` of kube-controller-manager.
//!
//! The crate is laid out for several controllers in one process: the
//! PersistentVolume controller (`pv`) is one folder beside the parts every
//! controller shares (`runtime`: API clients, leader election, admin
//! server, metrics, queue, operation tracker, events), and the process
//! (`app`, `options`) wires them. docs/architecture.md draws the whole.
//!
//! The public surface is what a binary, a benchmark or a test needs to
//! build and run a controller, or to plug a volume plugin into it; the
//! modules themselves are private.

mod app;
#[cfg(feature = "embedded")]
mod embedded;
mod ephemeral;
mod options;
mod pv;
mod resourceclaim;
mod runtime;

pub use app::{App, AppConfig, AppError, ControllerSelection, UnknownController};
#[cfg(feature = "embedded")]
pub use embedded::{
    EmbeddedConfig, EmbeddedError, render_events, render_resource_claims, render_table,
    run as run_embedded, stand_in_kubelet, wait_settled,
};
pub use ephemeral::NAME as EPHEMERAL_VOLUME;
pub use ephemeral::controller::{EphemeralController, SyncError as EphemeralSyncError, Synced};
pub use ephemeral::controller_base::{EphemeralBase, EphemeralError, EphemeralIdle};
pub use options::{DurationError, LogFormat, Options, parse_duration};
pub use pv::controller::{Controller, Listers, RetryPolicy, Settings};
pub use pv::controller_base::{
    BaseConfig, BaseError, ControllerBase, DEFAULT_CLAIM_WORKERS, DEFAULT_VOLUME_WORKERS,
    DEFAULT_WATCH_FAILURE_LIMIT, IdleProbe, NAME as PERSISTENTVOLUME_BINDER,
};
pub use pv::index::VolumeIndex;
pub use pv::keys::{ClaimKey, VolumeName};
pub use pv::objects::{ClaimPhase, ReclaimPolicy, VolumePhase};
pub use pv::plugins::recycler::{
    ANN_CLAIM_UID as RECYCLER_ANN_CLAIM_UID, ANN_VOLUME_UID as RECYCLER_ANN_VOLUME_UID,
    RecyclerPodConfig, TemplateError, default_template as default_recycler_template,
};
pub use pv::plugins::{
    EventRelay, PluginConfig, PluginError, ProvisionRequest, RecycleContext, VolumePlugin,
    VolumePlugins,
};
pub use resourceclaim::NAME as RESOURCECLAIM;
pub use resourceclaim::{
    ClaimControllerBase, ClaimControllerConfig, ClaimControllerError, ClaimIdle,
    ResourceClaimController, SyncError as ClaimSyncError, WorkKey,
};
pub use runtime::client::{
    ClientError, ClientOptions, Clients, DEFAULT_REQUEST_TIMEOUT, WriteGate,
};
pub use runtime::events::{EventRecorder, EventType, QUEUE_CAPACITY, RecorderError, reference_of};
pub use runtime::keys::ObjectKey;
pub use runtime::leader::{LeaderElector, LeaderError, LeaseConfig, default_identity};
pub use runtime::leadership::{Campaign, ControllerRun, Leadership};
pub use runtime::metrics::{EventOutcome, Metrics, MetricsError};
pub use runtime::ratelimit::RateLimitLayer;
pub use runtime::requests::{RequestCollector, RequestCounts};
pub use runtime::server::{BindError, Health, Liveness, Readiness, parse_bind_address, router};
pub use runtime::shared::{
    AllIdle, BoxError, ControllerFailure, Idle, RunFn, Shared, StartContext, Started,
};
