//! pv-controller: a Kubernetes PersistentVolume controller.
//!
//! It binds PersistentVolumeClaims to PersistentVolumes, hands claims to
//! provisioners and reclaims released volumes, with the behaviour of the
//! `persistentvolume-binder` of kube-controller-manager. The crate is split
//! into wiring (`controller_base`) and decisions (`controller`), with plain
//! data structures (`cache`, `index`, `queue`) in between and an in-memory
//! API server (`memapi`) to prove it on.

pub mod app;
pub mod cache;
pub mod client;
pub mod constants;
pub mod controller;
pub mod controller_base;
pub mod embedded;
pub mod error;
pub mod events;
pub mod index;
pub mod keys;
pub mod leader;
pub mod memapi;
pub mod metrics;
pub mod migration;
pub mod objects;
pub mod operations;
pub mod options;
pub mod quantity;
pub mod queue;
pub mod ratelimit;
pub mod reclaim;
pub mod server;
