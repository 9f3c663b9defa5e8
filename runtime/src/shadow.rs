//! Shadow mode, as the runtime sees it: plans made but not sent. A process
//! that must not act on the cluster (one that runs beside the controller
//! that does, to be compared with it) still decides every key as usual;
//! its executor then hands each write a plan would send, each operation it
//! would start and each reservation it took to a [`Shadow`], and sends
//! nothing. What the shadow makes of them is its own business.
//!
//! A plan's writes build on each other (a write's answer is what the next
//! write of the same object is conditional on), so the executor makes them
//! on copies of the stored objects, one set of copies per plan
//! ([`crate::copies`]): the stores keep following only what the cluster
//! shows, and the next plan starts from there.

use std::any::Any;

use crate::keys::ObjectKey;
use crate::operations::OperationName;
use crate::plan::{Reservation, Verb};

/// A write a plan would have sent, with the object as the plan found it,
/// as the write would have left it, and as the cluster shows it now.
/// Objects are the kind's typed objects, as the stores hold them.
#[derive(Clone, Copy)]
pub struct Intended<'a> {
    /// The controller whose plan it is (the write metric's `controller`).
    pub controller: &'static str,
    /// The resource written, by its plural.
    pub resource: &'a str,
    /// How.
    pub verb: Verb,
    /// The object's key.
    pub key: &'a ObjectKey,
    /// The UID the write names (a delete's precondition), if any.
    pub uid: Option<&'a str>,
    /// The object before the write, as the plan's earlier steps left it.
    pub before: Option<&'a (dyn Any + Send + Sync)>,
    /// The object after it; `None` for a delete.
    pub after: Option<&'a (dyn Any + Send + Sync)>,
    /// The object as its store holds it (what the cluster shows).
    pub shown: Option<&'a (dyn Any + Send + Sync)>,
}

/// Where a shadow executor hands what it does not send.
pub trait Shadow: Send + Sync {
    /// A write a plan would have sent.
    fn write(&self, intended: &Intended<'_>);

    /// An operation `controller`'s plan would have started.
    fn start(&self, controller: &'static str, operation: &OperationName);

    /// A reservation of a plan that went through, with what keeps it
    /// (released when dropped): kept for as long as the shadow needs it,
    /// instead of released at once.
    fn reserve(&self, reservation: Reservation, kept: Box<dyn Any + Send>);
}
