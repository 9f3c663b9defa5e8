//! The executor: carries a controller's plans out ([`super::plan`]), one
//! step at a time, for every controller of the process.
//!
//! - The plan's reservations are taken first, before anything is sent
//!   ([`Executor::start`]: at once, so the next decision already passes the
//!   reserved objects by), and released when the plan ends.
//! - Before anything is sent, every write's object is checked against its
//!   store: a plan whose decision read a copy of any of its objects that
//!   the store has left behind (a volume changed, a claim re-created)
//!   sends nothing.
//! - A write goes through the write door ([`super::write`]), conditional on
//!   the copy its decision read, or on this plan's own last answer for the
//!   object; the answer is stored before the next step runs, so the step
//!   after it (and every decision after it) sees it. A 409, a store that
//!   has seen the object change since the decision, or any other failed
//!   write ends the plan, after what the step says to record should it
//!   fail: the key is decided again from the newest copy.
//! - An event is handed to the recorder; an operation to the tracker, which
//!   refuses a second start of a name that runs or backs off (normal: the
//!   next decision asks again) and runs it with the controller's runner; an
//!   effect of the controller's own to its [`Effects`].
//!
//! In shadow mode ([`super::shadow`]) each write is made on copies and
//! handed to the shadow with the objects before and after it, each
//! operation start handed over unstarted, events dropped, and the
//! reservations of a plan that went through kept by the shadow. Nothing is
//! sent; the stores keep what the cluster shows; effects are applied as
//! usual (they are the process's own memory).

use std::any::Any;
use std::sync::Arc;

use futures::future::BoxFuture;

use crate::events::EventRecorder;
use crate::operations::{OperationError, OperationName, OperationTracker};
use crate::plan::{Copies, Versions};
use crate::plan::{IfFailed, Plan, Reads, Reservation, Step, Then};
use crate::shadow::{Intended, Shadow};
use crate::write::{WriteError, WriterSet};

/// Applies a controller's own effects (`L`), as its plans name them.
pub trait Effects<L>: Send + Sync {
    /// Applies `effect`.
    fn apply(&self, effect: &L);
}

/// Takes a plan's reservations for its controller.
pub trait Reserver: Send + Sync {
    /// Takes `reservation`; what is returned releases it when dropped.
    /// Refused (with why) when the object is reserved for another.
    fn reserve(&self, reservation: &Reservation) -> Result<Box<dyn Any + Send>, String>;
}

/// The work of a long operation, as the tracker runs it.
pub type OperationWork = BoxFuture<'static, Result<(), String>>;

/// Makes the work of a controller's operation from its name, with the
/// executor that carries out the operation's own plans; `None` for a kind
/// of operation the controller does not know.
pub type Runner<L> =
    Arc<dyn Fn(&OperationName, &Executor<L>) -> Option<OperationWork> + Send + Sync>;

/// An effect applier that applies nothing: for a controller without
/// effects of its own.
#[derive(Debug, Default)]
pub struct NoEffects;

impl<L> Effects<L> for NoEffects {
    fn apply(&self, _: &L) {}
}

struct Inner<L> {
    controller: &'static str,
    writers: WriterSet,
    recorder: EventRecorder,
    effects: Arc<dyn Effects<L>>,
    reserver: Option<Arc<dyn Reserver>>,
    operations: Option<(OperationTracker, Runner<L>)>,
    shadow: Option<Arc<dyn Shadow>>,
}

/// Carries out one controller's plans. Cheap to clone.
pub struct Executor<L> {
    inner: Arc<Inner<L>>,
}

impl<L> Clone for Executor<L> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<L> std::fmt::Debug for Executor<L> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Executor")
            .field("controller", &self.inner.controller)
            .field("shadow", &self.inner.shadow.is_some())
            .finish_non_exhaustive()
    }
}

/// What an executor is made of; see [`Executor::new`].
pub struct Parts<L> {
    /// The controller whose plans it carries out.
    pub controller: &'static str,
    /// Its writers, one per kind it writes.
    pub writers: WriterSet,
    /// Where its events go.
    pub recorder: EventRecorder,
    /// What applies its effects.
    pub effects: Arc<dyn Effects<L>>,
    /// What takes its reservations, if it makes any.
    pub reserver: Option<Arc<dyn Reserver>>,
    /// The tracker of its long operations and what runs them, if it has any.
    pub operations: Option<(OperationTracker, Runner<L>)>,
    /// Where plans go instead of being carried out, in shadow mode.
    pub shadow: Option<Arc<dyn Shadow>>,
}

/// A plan whose reservations are taken, ready to run.
pub struct Started<L> {
    steps: Vec<Step<L>>,
    reservations: Vec<(Reservation, Box<dyn Any + Send>)>,
    then: Then,
}

impl<L: Send + Sync + 'static> Executor<L> {
    /// The executor made of `parts`.
    pub fn new(parts: Parts<L>) -> Self {
        Self {
            inner: Arc::new(Inner {
                controller: parts.controller,
                writers: parts.writers,
                recorder: parts.recorder,
                effects: parts.effects,
                reserver: parts.reserver,
                operations: parts.operations,
                shadow: parts.shadow,
            }),
        }
    }

    /// The controller whose plans it carries out.
    pub fn controller(&self) -> &'static str {
        self.inner.controller
    }

    /// The writers, by kind.
    pub fn writers(&self) -> &WriterSet {
        &self.inner.writers
    }

    /// Carries `plan` out and says what follows it; ends at the first
    /// failed write, with its error.
    pub async fn execute(&self, plan: Plan<L>) -> Result<Then, WriteError> {
        let started = self.start(plan)?;
        self.finish(started).await
    }

    /// Takes `plan`'s reservations, now: the next decision passes the
    /// reserved objects by. Refused, with nothing sent, when one is reserved
    /// for another.
    pub fn start(&self, plan: Plan<L>) -> Result<Started<L>, WriteError> {
        let (steps, reservations, then) = plan.into_parts();
        let mut taken = Vec::with_capacity(reservations.len());
        for reservation in reservations {
            let Some(reserver) = &self.inner.reserver else {
                return Err(WriteError::NoWriter("reservations"));
            };
            match reserver.reserve(&reservation) {
                Ok(kept) => taken.push((reservation, kept)),
                Err(reason) => {
                    return Err(WriteError::Stale {
                        object: reservation.reserved.clone(),
                        reason,
                    });
                }
            }
        }
        Ok(Started {
            steps,
            reservations: taken,
            then,
        })
    }

    /// Runs the steps of a started plan; releases its reservations (or, in
    /// shadow mode, hands those of a plan that went through to the shadow).
    pub async fn finish(&self, started: Started<L>) -> Result<Then, WriteError> {
        let Started {
            mut steps,
            reservations,
            then,
        } = started;
        if let Some(shadow) = &self.inner.shadow {
            self.in_shadow(&steps, shadow.as_ref())?;
            for (reservation, kept) in reservations {
                shadow.reserve(reservation, kept);
            }
            return Ok(then);
        }
        let outdated = steps.iter().find_map(|step| match step {
            Step::Write(write, _) => write.outdated(&self.inner.writers),
            _ => None,
        });
        if let Some(error) = outdated {
            tracing::debug!(controller = self.inner.controller, %error, "plan decided on a copy the store has left behind");
            return Err(error);
        }
        for step in &mut steps {
            if let Step::Write(write, _) = step {
                write.let_go(&self.inner.writers);
            }
        }
        let mut versions = Versions::new();
        for step in steps {
            match step {
                Step::Write(write, if_failed) => {
                    let target = write.target();
                    let version = versions.get(&target).map(String::as_str);
                    match write.send(&self.inner.writers, version).await {
                        Ok(Some(answered)) => {
                            versions.insert(target, answered);
                        }
                        Ok(None) => {}
                        Err(error) => {
                            tracing::debug!(controller = self.inner.controller, step = %write, %error, "plan ended by a write");
                            self.failed(if_failed, &error);
                            return Err(error);
                        }
                    }
                }
                Step::Event(event) => self.inner.recorder.record(
                    &event.object,
                    event.event_type,
                    &event.reason,
                    event.message,
                ),
                Step::Start(name) => self.start_operation(name),
                Step::Local(effect) => self.inner.effects.apply(&effect),
            }
        }
        drop(reservations);
        Ok(then)
    }

    /// Records what a failed write's step says to record.
    fn failed(&self, if_failed: Vec<IfFailed<L>>, error: &WriteError) {
        for what in if_failed {
            match what {
                IfFailed::Warn(event) => self.inner.recorder.record(
                    &event.object,
                    event.event_type,
                    &event.reason,
                    format!("{}: {}", event.message, error.server_words()),
                ),
                IfFailed::Local(effect) => self.inner.effects.apply(&effect),
            }
        }
    }

    /// Hands the steps to `shadow`, the writes made on copies of the
    /// stored objects; ends at the first write the copies refuse.
    fn in_shadow(&self, steps: &[Step<L>], shadow: &dyn Shadow) -> Result<(), WriteError> {
        let mut copies = Copies::default();
        let mut versions = Versions::new();
        for step in steps {
            match step {
                Step::Write(write, _) => {
                    let target = write.target();
                    let shown = write.seed(&self.inner.writers, &mut copies)?;
                    let before = copies.any(&target);
                    let version = versions.get(&target).map(String::as_str);
                    let answered = write.on_copies(&mut copies, version).inspect_err(
                        |error| tracing::debug!(step = %write, %error, "shadow plan ended by a write"),
                    )?;
                    if let Some(answered) = answered {
                        versions.insert(target.clone(), answered);
                    }
                    let after = write.after(&copies);
                    shadow.write(&Intended {
                        controller: self.inner.controller,
                        resource: write.resource(),
                        verb: write.verb(),
                        key: &target.1,
                        uid: write.uid(),
                        before: before.as_deref(),
                        after: after.as_deref(),
                        shown: shown.as_deref(),
                    });
                }
                Step::Event(_) => {}
                Step::Start(name) => shadow.start(self.inner.controller, name),
                Step::Local(effect) => self.inner.effects.apply(effect),
            }
        }
        Ok(())
    }

    /// Starts an operation unless one of the same name runs or backs off
    /// after a failure; a refused start is normal and only logged.
    fn start_operation(&self, name: OperationName) {
        let Some((tracker, runner)) = &self.inner.operations else {
            tracing::warn!(controller = self.inner.controller, operation = %name, "no operations are set up");
            return;
        };
        let Some(work) = runner(&name, self) else {
            tracing::warn!(controller = self.inner.controller, operation = %name, "unknown kind of operation");
            return;
        };
        let shown = name.to_string();
        match tracker.run(name, work) {
            Ok(()) => tracing::debug!(operation = %shown, "operation scheduled"),
            Err(OperationError::AlreadyRunning { .. }) => {
                tracing::debug!(operation = %shown, "operation already running, skipping");
            }
            Err(OperationError::Backoff { remaining, .. }) => {
                tracing::debug!(operation = %shown, ?remaining, "operation postponed by backoff");
            }
        }
    }

    /// Reads what `then` asks to read into `reads`.
    pub async fn read(&self, then: &Then, reads: &mut Reads) -> Result<(), WriteError> {
        let Then::Read(requests) = then else {
            return Ok(());
        };
        for request in requests {
            let found = request.read(&self.inner.writers).await?;
            reads.insert(request.target(), found);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
