//! pv-controller: Kubernetes' PersistentVolume controller, with the
//! generic ephemeral volume and ResourceClaim controllers beside it, in one
//! process.
//!
//! It binds PersistentVolumeClaims to PersistentVolumes, hands claims to
//! provisioners and reclaims released volumes, with the behaviour of the
//! `persistentvolume-binder-controller` of kube-controller-manager; makes
//! the claims of pods' ephemeral volumes (`ephemeral-volume-controller`);
//! and the ResourceClaims of pods' templates (`resourceclaim-controller`).
//!
//! The process ([`App`], configured by [`AppConfig`] or the binary's
//! [`Options`]) builds the controllers that `--controllers` enables on one
//! runtime: one watch and one store per kind, one write door, one event
//! recorder, one runner under one leader election. Each controller is a
//! module with its `Controller` (the decisions) and `Config`; [`pv`] also
//! has the plugin interface ([`pv::VolumePlugin`]) a storage back end
//! implements. docs/architecture.md draws the whole; what only tests and
//! benchmarks need is in [`testing`].

mod app;
#[cfg(feature = "embedded")]
mod embedded;
pub mod ephemeral;
pub mod explain_cli;
mod feature_gates;
mod kinds;
mod options;
pub mod pv;
pub mod resourceclaim;
mod runtime;
pub mod testing;

pub use app::{
    App, AppConfig, AppError, ControllerNames, ControllerSelection, Controllers,
    DEFAULT_API_DISCOVERY_PERIOD, DEFAULT_WATCH_FAILURE_LIMIT, UnknownController, plugin_config,
    serve,
};
#[cfg(feature = "embedded")]
pub use embedded::{EmbeddedConfig, EmbeddedError, run as run_embedded};
pub use feature_gates::{Feature, FeatureGateError, FeatureGates};
pub use options::{Command, DurationError, LogFormat, Options, parse_duration};
pub use runtime::client::WriteGate;
pub use runtime::client::{ClientOptions, Clients, DEFAULT_REQUEST_TIMEOUT, ReviewClientOptions};
pub use runtime::dry_run::{DryRunConfig, DryRunJournal};
pub use runtime::informer::{StoreError, WatchFailure, WiringError};
pub use runtime::keys::ObjectKey;
pub use runtime::leader::{LeaseConfig, default_identity};
pub use runtime::metrics::{Metrics, MetricsError};
pub use runtime::requests::RequestCounts;
pub use runtime::runner::RunError;
pub use runtime::server::{
    BindError, DelegationConfig, Health, Liveness, Readiness, SecureServing, ServingCertificate,
    ServingLimits, parse_bind_address,
};
pub use runtime::shared::BuildError;
pub use runtime::workload::IdleProbe;
pub use runtime::write::WriteError;
