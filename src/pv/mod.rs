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

mod admin;
mod census;
mod constants;
mod consumer_wait;
mod controller;
mod controller_base;
mod error;
mod index;
mod keys;
mod memory;
mod metrics;
mod migration;
mod objects;
mod operations;
mod other_binder;
mod packed;
mod plugins;
mod store;

pub use crate::runtime::events::EventType;
pub use controller::Settings;
pub use controller_base::Config;
pub(crate) use controller_base::NAME;
pub use objects::ReclaimPolicy;
pub use plugins::{
    PluginError, ProvisionRequest, RecycleContext, RecycleWrites, VolumePlugin, VolumePlugins,
};

// What the rest of the process uses of the controller. Its modules are its
// own: the compiler keeps every other module (the other controllers, shadow
// mode, the process) out of them but for what is named here.
pub(crate) use admin::routes as admin_routes;
pub(crate) use constants::CONTROLLER_NAME;
pub(crate) use consumer_wait::ConsumerWait;
pub(crate) use controller::{FirstSign, Foreseen, explain_listed};
pub(crate) use controller_base::build;
pub(crate) use index::Verdict;
pub(crate) use keys::{DELETE, PROVISION, RECYCLE};
#[cfg(test)]
pub(crate) use keys::{delete, provision, recycle};
pub(crate) use objects::claim_class;
pub(crate) use other_binder::OtherBinder;
pub(crate) use plugins::recycler::{TemplateError, default_template, load_template};
#[cfg(not(feature = "testing"))]
pub(crate) use plugins::{PluginConfig, recycler::RecyclerPodConfig};
#[cfg(feature = "testing")]
pub use plugins::{PluginConfig, recycler::RecyclerPodConfig};
#[cfg(not(feature = "testing"))]
pub(crate) use {controller::Binder, controller_base::Controller};

// Only for the crate's tests and benchmarks.
#[cfg(feature = "testing")]
pub use controller::{Binder, RetryPolicy};
#[cfg(feature = "testing")]
pub use controller_base::{Controller, DEFAULT_CLAIM_WORKERS};
#[cfg(feature = "testing")]
pub use {
    controller::{Rehearsed, Server},
    index::{MatchError, VolumeIndex},
    keys::VolumeName,
    plugins::recycler::default_template as default_recycler_template,
    store::{PvStore, ReservedVolume},
};
