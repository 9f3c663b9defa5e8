//! The PersistentVolume controller (kube-controller-manager's
//! `persistentvolume-binder-controller`): it binds claims to volumes, hands
//! claims to provisioners and reclaims released volumes.
//!
//! Two halves, as upstream: `controller_base` is the wiring (what it asks
//! of the process's informers, its handlers, queues, workers and resync)
//! and `controller` the decisions (what to do with one volume or one
//! claim). Between them sit plain data structures, the shadow
//! write-through `cache` with its volume `index`, and the typed readings
//! of the objects (`objects`, `keys`). The volume plugins touch storage;
//! the controller only decides when. [`VolumePlugin`] is the interface a
//! storage back end implements.

pub(crate) mod admin;
pub(crate) mod cache;
pub(crate) mod census;
pub(crate) mod constants;
pub(crate) mod controller;
pub(crate) mod controller_base;
pub(crate) mod error;
pub(crate) mod index;
pub(crate) mod keys;
pub(crate) mod metrics;
pub(crate) mod migration;
pub(crate) mod objects;
pub(crate) mod operations;
pub(crate) mod packed;
pub(crate) mod plugins;

pub use controller::{
    Controller, Explanation, LastSync, Next, Requirements, RetryPolicy, Settings, explain_listed,
};
pub(crate) use controller_base::NAME;
pub use controller_base::{
    Config, DEFAULT_CLAIM_WORKERS, DEFAULT_RESYNC_PERIOD, DEFAULT_VOLUME_WORKERS,
};
pub use error::Error;
pub use index::{Candidate, Verdict};
pub use keys::VolumeName;
pub use objects::{ClaimPhase, ReclaimPolicy, VolumePhase};
pub use plugins::recycler::{
    RecyclerPodConfig, TemplateError, default_template as default_recycler_template,
};
pub use plugins::{
    EventRelay, PluginConfig, PluginError, ProvisionRequest, RecycleContext, RecycledVolumes,
    RecyclerPods, VolumePlugin, VolumePlugins,
};
