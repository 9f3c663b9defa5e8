//! The PersistentVolume controller (kube-controller-manager's
//! `persistentvolume-binder`): it binds claims to volumes, hands claims to
//! provisioners and reclaims released volumes.
//!
//! Two halves, as upstream: [`controller_base`] is the wiring (watchers,
//! shadow cache, queues, workers, resync, leadership) and [`controller`] the
//! decisions (what to do with one volume or one claim). Between them sit
//! plain data structures, the shadow [`cache`] with its volume [`index`],
//! and the typed readings of the objects ([`objects`], [`keys`]). The
//! volume [`plugins`] touch storage; the controller only decides when.

pub(crate) mod cache;
pub(crate) mod constants;
pub(crate) mod controller;
pub(crate) mod controller_base;
pub(crate) mod error;
pub(crate) mod index;
pub(crate) mod keys;
pub(crate) mod metrics;
pub(crate) mod migration;
pub(crate) mod objects;
pub(crate) mod packed;
pub(crate) mod plugins;
