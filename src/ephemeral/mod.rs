//! The generic ephemeral volume controller (kube-controller-manager's
//! `ephemeral-volume-controller`): each `pod.spec.volumes[].ephemeral` gets
//! a PersistentVolumeClaim named `<pod>-<volume>`, made from the volume's
//! template and controlled by the pod, so the claim lives as long as the
//! pod (the garbage collector deletes it after the pod) and the
//! PersistentVolume controller binds or provisions it like any other.
//!
//! Two halves, as every controller of the process: `controller_base` wires
//! its handlers and workload to the process's informers, `controller`
//! decides what one pod needs (a plan of creates, from the stores alone),
//! which the process's executor carries out. `claims` holds the
//! plain rules (names, ownership, the claim made from a template);
//! `metrics` upstream's two counters.

mod claims;
mod controller;
mod controller_base;
mod metrics;

pub use controller_base::Config;
pub(crate) use controller_base::NAME;

// Only for the crate's tests and benchmarks.
#[cfg(not(feature = "testing"))]
pub(crate) use controller_base::Controller;
#[cfg(feature = "testing")]
pub use controller_base::Controller;
pub(crate) use controller_base::build;
