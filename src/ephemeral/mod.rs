//! The generic ephemeral volume controller (kube-controller-manager's
//! `ephemeral-volume`): each `pod.spec.volumes[].ephemeral` gets a
//! PersistentVolumeClaim named `<pod>-<volume>`, made from the volume's
//! template and controlled by the pod, so the claim lives as long as the
//! pod (the garbage collector deletes it after the pod) and the PV
//! controller binds or provisions it like any other.
//!
//! Two halves, as the PersistentVolume controller: [`controller_base`]
//! wires the pod and claim watchers, the pod-by-claim [`index`], the queue
//! and its workers; [`controller`] decides what one pod needs and creates
//! its claims. [`claims`] holds the plain rules (names, ownership, the
//! claim made from a template); [`metrics`] upstream's two counters.

pub(crate) mod claims;
pub(crate) mod controller;
pub(crate) mod controller_base;
pub(crate) mod index;
pub(crate) mod metrics;

/// The controller's name in `--controllers`, as kube-controller-manager's.
pub const NAME: &str = "ephemeral-volume";

/// The component of its events (upstream's `EventSource`).
pub(crate) const COMPONENT: &str = "ephemeral_volume";
