//! The executor: carries a controller's plans out ([`super::plan`]), one
//! step at a time, for every controller of the process.
//!
//! - A write goes through the write door ([`super::write`]): the change is
//!   made on the newest stored copy under the object's write lock, sent,
//!   counted once, and the answer stored before the next step runs, so the
//!   step after it (and every decision after it) sees it.
//! - A 409, or a change the newest copy refuses because the object moved on
//!   since the decision, ends the plan: the caller queues the key to be
//!   decided again from the newest copy. Any other failed write ends it too.
//! - An event is handed to the recorder; an operation to the tracker, which
//!   refuses a second start of a name that runs or backs off (normal: the
//!   next decision asks again).
//! - The plan's holds are released when it ends.
//!
//! Its other mode journals plans instead ([`super::journal`]): each write
//! is made on copies and handed to the journal with the objects before and
//! after it, each operation start is handed over unstarted, events are
//! dropped, and the holds of a plan that went through go to the journal.
//! Nothing is sent; the stores keep what the cluster shows.

use std::sync::Arc;

use crate::events::EventRecorder;
use crate::journal::Journal;
use crate::operations::{OperationError, OperationTracker};
use crate::plan::{Plan, Start, Step};
use crate::rehearsal::Rehearsal;
use crate::write::{WriteError, WriterSet};

/// Carries out one controller's plans. Cheap to clone.
#[derive(Clone)]
pub struct Executor {
    controller: &'static str,
    writers: WriterSet,
    recorder: EventRecorder,
    operations: OperationTracker,
    journal: Option<Arc<dyn Journal>>,
}

impl std::fmt::Debug for Executor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Executor")
            .field("writers", &self.writers)
            .finish_non_exhaustive()
    }
}

impl Executor {
    /// The executor of `controller`'s plans, writing through `writers`,
    /// recording events on `recorder` and starting operations on
    /// `operations`; with a `journal`, handing its plans there instead.
    pub fn new(
        controller: &'static str,
        writers: WriterSet,
        recorder: EventRecorder,
        operations: OperationTracker,
        journal: Option<Arc<dyn Journal>>,
    ) -> Self {
        Self {
            controller,
            writers,
            recorder,
            operations,
            journal,
        }
    }

    /// Carries out `plan`'s steps in order and returns what follows it;
    /// ends at the first failed write, with its error.
    pub async fn execute<A>(&self, plan: Plan<A>) -> Result<A, WriteError> {
        if let Some(journal) = &self.journal {
            return self.journal(plan, journal.as_ref());
        }
        let (steps, holds, after) = plan.into_parts();
        for step in steps {
            match step {
                Step::Write(write) => {
                    if let Err(error) = write.run(&self.writers).await {
                        tracing::debug!(step = %write, %error, "plan ended by a write");
                        return Err(error);
                    }
                }
                Step::Event(event) => self.recorder.record(
                    &event.object,
                    event.event_type,
                    &event.reason,
                    event.message,
                ),
                Step::Start(start) => self.start(start),
            }
        }
        drop(holds);
        Ok(after)
    }

    /// Hands `plan` to `journal` step by step, its writes made on copies of
    /// the stored objects; ends at the first write its copy refuses.
    fn journal<A>(&self, plan: Plan<A>, journal: &dyn Journal) -> Result<A, WriteError> {
        let (steps, holds, after) = plan.into_parts();
        let mut copies = Rehearsal::default();
        for step in steps {
            match step {
                Step::Write(write) => {
                    if let Err(error) = write.journal(&self.writers, &mut copies, journal) {
                        tracing::debug!(step = %write, %error, "journaled plan ended by a write");
                        return Err(error);
                    }
                }
                Step::Event(_) => {}
                Step::Start(start) => journal.start(self.controller, &start.name),
            }
        }
        for hold in holds {
            journal.hold(hold);
        }
        Ok(after)
    }

    /// Starts an operation unless one of the same name runs or backs off
    /// after a failure; a refused start is normal and only logged.
    fn start(&self, start: Start) {
        let Start { name, work } = start;
        let shown = name.to_string();
        match self.operations.run(name, work) {
            Ok(()) => tracing::debug!(operation = %shown, "operation scheduled"),
            Err(OperationError::AlreadyRunning { .. }) => {
                tracing::debug!(operation = %shown, "operation already running, skipping");
            }
            Err(OperationError::Backoff { remaining, .. }) => {
                tracing::debug!(operation = %shown, ?remaining, "operation postponed by backoff");
            }
        }
    }
}

#[cfg(test)]
mod tests;
