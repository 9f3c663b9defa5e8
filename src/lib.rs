//! pv-controller: a Kubernetes PersistentVolume controller.
//!
//! It binds PersistentVolumeClaims to PersistentVolumes, hands claims to
//! provisioners and reclaims released volumes, with the behaviour of the
//! `persistentvolume-binder` of kube-controller-manager. The crate is split
//! into wiring (`controller_base`) and decisions (`controller`), with plain
//! data structures (`cache`, `index`, `queue`) in between and an in-memory
//! API server (`memapi`) to prove it on.

pub mod constants;
pub mod keys;
pub mod memapi;
