//! The PersistentVolume controller (kube-controller-manager's
//! `persistentvolume-binder-controller`): it binds claims to volumes, hands
//! claims to provisioners and reclaims released volumes.
//!
//! Two halves, as upstream: `controller_base` is the wiring (what it asks
//! of the process's informers, its handlers, queues, workers and resync)
//! and `controller` the decisions (what to do with one volume or one
//! claim, as a plan). Between them sit plain data structures: the
//! write-through `store` of volumes and claims with its volume `index`,
//! what the binder remembers of each claim (`memory`), and the typed
//! readings of the objects (`objects`, `keys`). The long `operations`
//! (provision, delete, recycle) and the volume plugins touch storage; the
//! decisions only say when. [`VolumePlugin`] is the interface a storage
//! back end implements.

pub(crate) mod admin;
pub(crate) mod census;
pub(crate) mod constants;
pub(crate) mod consumer_wait;
pub(crate) mod controller;
pub(crate) mod controller_base;
pub(crate) mod error;
pub(crate) mod index;
pub(crate) mod keys;
pub(crate) mod memory;
pub(crate) mod metrics;
pub(crate) mod migration;
pub(crate) mod objects;
pub(crate) mod operations;
pub(crate) mod other_binder;
pub(crate) mod packed;
pub(crate) mod plugins;
pub(crate) mod store;

pub use crate::runtime::events::EventType;
pub use controller::Settings;
pub use controller_base::Config;
pub(crate) use controller_base::NAME;
pub use objects::ReclaimPolicy;
pub use plugins::{
    PluginError, ProvisionRequest, RecycleContext, RecycleWrites, VolumePlugin, VolumePlugins,
};

// Only for the crate's tests and benchmarks.
#[cfg(feature = "testing")]
pub use controller::{Binder, RetryPolicy};
#[cfg(feature = "testing")]
pub use controller_base::{Controller, DEFAULT_CLAIM_WORKERS};
#[cfg(feature = "testing")]
pub use keys::VolumeName;
#[cfg(feature = "testing")]
pub use plugins::PluginConfig;
#[cfg(feature = "testing")]
pub use plugins::recycler::{RecyclerPodConfig, default_template as default_recycler_template};
