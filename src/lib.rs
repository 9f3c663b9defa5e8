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
//! The surface is what a user of the library needs:
//!
//! - the process: [`App`] (or [`serve`], which builds it again when an API
//!   appears or goes) on [`Clients`], configured by an [`AppConfig`], made
//!   from the binary's flags ([`Options`]) or by hand: which controllers
//!   run ([`ControllerSelection`]), the Lease ([`LeaseConfig`]), shadow mode
//!   of `--shadow` ([`ShadowConfig`], its judgements in a
//!   [`ShadowReport`]); and, with the `embedded` feature,
//!   [`run_embedded`] on an in-memory cluster;
//! - each controller's settings: [`pv::Config`], [`ephemeral::Config`],
//!   [`resourceclaim::Config`];
//! - the plugin interface a storage back end implements,
//!   [`pv::VolumePlugin`], and what it is handed;
//! - `pv-controller explain`'s client, [`explain_cli`].
//!
//! The names on objects (annotations, finalizers, the controllers' names)
//! are the `k8s_names` crate's. docs/architecture.md draws the whole.
//! What only the crate's own tests and benchmarks need (the controllers'
//! syncs and caches, the runtime's parts, the offline binder in
//! `testing`) is compiled in by the `testing` feature, which a user of the
//! library never needs.

// What only tests reach is `pub` for the `testing` feature, so without it
// the lint would name every such item; it holds with the feature on, as
// the crate's own tests, benchmarks and CI's lints build it.
#![cfg_attr(not(feature = "testing"), allow(unreachable_pub))]

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
mod shadow;
mod table;
#[cfg(feature = "testing")]
pub mod testing;
mod version;

// The runtime is its own crate (runtime/ in the workspace); under this name
// the crate's modules reach it as they did when it was one of them
// (`crate::runtime::keys::ObjectKey`).
use pv_controller_runtime as runtime;

pub use app::{App, AppConfig, AppError, ControllerSelection, plugin_config, serve};
#[cfg(feature = "embedded")]
pub use embedded::{EmbeddedConfig, EmbeddedError, run as run_embedded};
pub use options::{Command, LoggingFormat, Options};
pub use runtime::client::{ClientOptions, Clients};
pub use runtime::informer::LIST_PAGE_SIZE;
pub use runtime::leader::{LeaseConfig, default_identity};
pub use runtime::server::parse_bind_address;
pub use runtime::workload::IdleProbe;
pub use shadow::{ShadowConfig, ShadowReport};
pub use version::{REVISION, VERSION};

// Only for the crate's tests and benchmarks.
#[cfg(feature = "testing")]
pub use runtime::{
    client::{ReviewClientOptions, WriteGate},
    informer::WatchFailure,
    keys::ObjectKey,
    metrics::Metrics,
    runner::RunError,
    server::{
        DelegationConfig, Health, Readiness, SecureServing, ServingCertificate, ServingLimits,
    },
};
