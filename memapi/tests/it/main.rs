//! memapi's integration tests, one binary: a real `kube::Client` (and, for
//! `kubectl`, a real kubectl) against the in-memory server, one module per
//! area of its behaviour.

mod crud;
mod kubectl;
mod levers;
mod list;
mod reactors;
mod resource;
mod strict;
mod support;
mod watch;
