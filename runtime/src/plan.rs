//! A decision's plan: what a controller decided to do about one object, as
//! data, in order, and what follows it. A decision reads what the process
//! knows (the stores, the indexes, the operations running) and returns a
//! plan; it sends nothing, awaits nothing and changes nothing. The executor
//! ([`super::executor`]) carries the plan out, one step at a time.
//!
//! A step is one of:
//! - a write of one object ([`Write`]): an update of named fields, made on
//!   the copy the decision read (its basis) when the plan is made and sent
//!   as the difference between the two, conditional on the basis's
//!   resourceVersion (or on the answer to this plan's own earlier write of
//!   the object), so it never lands on a copy the decision did not see; a
//!   create; a delete with the UID the decision saw as precondition; a
//!   server-side apply to an object's status. What to record should the
//!   write fail goes with it ([`IfFailed`]);
//! - an event;
//! - the start of a long operation, named by its kind and object
//!   ([`OperationName`]);
//! - an effect of the controller's own (`L`: what the process remembers,
//!   whom it queues), applied by the controller's [`crate::executor::Effects`]
//!   when the executor reaches it.
//!
//! Besides its steps, a plan names the objects it reserves for another
//! while it runs ([`Reservation`], taken before its first step and released
//! when it ends) and what follows it ([`Then`]: done, wait to be woken,
//! fail, or decide again once some objects were read from the API server),
//! which the runtime interprets the same way for every controller.
//!
//! Because a plan is data, its order is something a test asserts: the
//! [`Plan::lines`] of a decision are the writes, events and operations it
//! will cause, in order.

mod copies;
mod reads;
mod writes;

use std::any::TypeId;
use std::collections::HashMap;
use std::fmt;
use std::marker::PhantomData;
use std::sync::{Arc, OnceLock};

use k8s_openapi::api::core::v1::ObjectReference;

use crate::events::{EventType, reference_of};
use crate::keys::ObjectKey;
use crate::kinds::{Kind, Part};
use crate::operations::OperationName;
use crate::write::WriteError;
pub use copies::{Copies, Versions};
use reads::ReadOne;
pub use reads::{Found, Read, Reads};
use writes::Written;
pub use writes::{Applied, Write};

/// What became of a write step: the server's answer once the step went
/// through, or that it failed; nothing while it has not run (nor ever,
/// when the plan ended before it). The decision that planned the step
/// keeps a clone (cheap: clones share the answer), so a later step can
/// name what an earlier one created.
pub struct Answer<T> {
    slot: Arc<OnceLock<Outcome<T>>>,
}

/// How a write step ended.
enum Outcome<T> {
    /// It went through; the server answered this.
    Answered(T),
    /// It failed (and ended the plan).
    Failed,
}

impl<T> Clone for Answer<T> {
    fn clone(&self) -> Self {
        Self {
            slot: Arc::clone(&self.slot),
        }
    }
}

impl<T> Default for Answer<T> {
    fn default() -> Self {
        Self {
            slot: Arc::default(),
        }
    }
}

impl<T> fmt::Debug for Answer<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match self.slot.get() {
            None => "not run",
            Some(Outcome::Answered(_)) => "answered",
            Some(Outcome::Failed) => "failed",
        };
        f.write_str(state)
    }
}

impl<T> Answer<T> {
    /// The server's answer, once the step went through.
    pub fn answered(&self) -> Option<&T> {
        match self.slot.get() {
            Some(Outcome::Answered(answer)) => Some(answer),
            Some(Outcome::Failed) | None => None,
        }
    }

    /// Keeps how the step ended and passes its result on. A step runs
    /// once, so the slot is empty here; were it not, the first outcome
    /// stays.
    pub(crate) fn record<E>(&self, result: Result<T, E>) -> Result<(), E> {
        let (outcome, result) = match result {
            Ok(answer) => (Outcome::Answered(answer), Ok(())),
            Err(error) => (Outcome::Failed, Err(error)),
        };
        if self.slot.set(outcome).is_err() {
            tracing::debug!("a write step's answer was kept already");
        }
        result
    }
}

/// The kind and key of an object a step writes or reads.
pub type Target = (TypeId, ObjectKey);

/// The target of the object `key` of kind `K`.
pub fn target<K: Kind>(key: ObjectKey) -> Target {
    (TypeId::of::<K>(), key)
}

/// How a write writes its object, for the shadow observer and the lines.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verb {
    /// A create.
    Create,
    /// An update of named fields (spec or status).
    Update,
    /// A server-side apply to the status.
    Apply,
    /// A delete.
    Delete,
}

/// An event about one object.
#[derive(Clone, Debug)]
pub struct Event {
    /// The object, as the event names it.
    pub object: ObjectReference,
    /// Normal or Warning.
    pub event_type: EventType,
    /// The reason, one CamelCase word.
    pub reason: String,
    /// What happened, for a person.
    pub message: String,
}

impl fmt::Display for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = self.object.name.as_deref().unwrap_or("");
        let object = match self.object.namespace.as_deref() {
            Some(namespace) if !namespace.is_empty() => format!("{namespace}/{name}"),
            _ => name.to_string(),
        };
        write!(
            f,
            "event {} {} on {} {object}: {}",
            self.event_type.as_str(),
            self.reason,
            self.object.kind.as_deref().unwrap_or(""),
            self.message
        )
    }
}

/// What to record when a write fails (the write ends the plan either way).
pub enum IfFailed<L> {
    /// This Warning, its message followed by the API server's words.
    Warn(Box<Event>),
    /// This effect of the controller's own.
    Local(L),
}

/// One step of a plan.
pub enum Step<L> {
    /// A write of one object, and what to record should it fail.
    Write(Box<dyn Write>, Vec<IfFailed<L>>),
    /// An event.
    Event(Event),
    /// A long operation to start, unless one of its name runs or backs off.
    Start(OperationName),
    /// An effect of the controller's own.
    Local(L),
}

impl<L> Step<L> {
    /// The step as a plan's line; `None` for an effect of the controller's
    /// own, which the lines leave out.
    pub fn line(&self) -> Option<String> {
        match self {
            Step::Write(write, _) => Some(write.to_string()),
            Step::Event(event) => Some(event.to_string()),
            Step::Start(name) => Some(format!("start {name}")),
            Step::Local(_) => None,
        }
    }
}

/// An object reserved for another while a plan runs (a volume for the claim
/// the plan is about): the next decisions pass it by.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reservation {
    /// The object it is reserved for (the claim).
    pub for_key: ObjectKey,
    /// The UID of the object it is reserved for.
    pub for_uid: String,
    /// The name of the object reserved (the volume).
    pub reserved: String,
}

/// Why a key's turn failed, as a plan says it: retried with the key's
/// backoff.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    /// What went wrong, for the log.
    pub reason: String,
    /// The `result` label of the sync metric.
    pub label: &'static str,
    /// Whether it is expected now and then (logged at debug level).
    pub expected: bool,
}

impl Failure {
    /// The failure of a write that ended a plan.
    pub fn of_write(error: &WriteError) -> Self {
        Self {
            reason: error.to_string(),
            label: error.metric_label(),
            expected: error.is_conflict(),
        }
    }
}

/// What follows a plan whose steps all went through: one value the
/// runtime interprets the same way for every controller.
pub enum Then {
    /// The key is done: its backoff is forgotten.
    Done,
    /// The key waits to be woken by its controller (a claim waits for a
    /// volume to become free), and is decided again then.
    Wait,
    /// The key's turn failed: retried with its backoff.
    Fail(Failure),
    /// Read these objects from the API server and decide again with what
    /// they are (a decision that asks to read has no steps).
    Read(Vec<Box<dyn Read>>),
}

impl fmt::Debug for Then {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Then::Done => f.write_str("Done"),
            Then::Wait => f.write_str("Wait"),
            Then::Fail(failure) => write!(f, "Fail({})", failure.reason),
            Then::Read(reads) => f
                .debug_list()
                .entries(reads.iter().map(ToString::to_string))
                .finish(),
        }
    }
}

/// What a decision decided: its steps in order, the objects it reserves
/// while they run, and what follows. `L` is the controller's own effect.
pub struct Plan<L> {
    steps: Vec<Step<L>>,
    reservations: Vec<Reservation>,
    then: Then,
    /// Where the copy each update made lives, by object: an update whose
    /// basis is that copy builds on the earlier one.
    made: HashMap<Target, usize>,
}

impl<L> Default for Plan<L> {
    fn default() -> Self {
        Self {
            steps: Vec::new(),
            reservations: Vec::new(),
            then: Then::Done,
            made: HashMap::new(),
        }
    }
}

impl<L> fmt::Debug for Plan<L> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Plan")
            .field("steps", &self.lines())
            .field("reservations", &self.reservations)
            .field("then", &self.then)
            .finish()
    }
}

impl<L> Plan<L> {
    /// A plan that does nothing and fails with `failure`.
    pub fn failed(failure: Failure) -> Self {
        Self {
            then: Then::Fail(failure),
            ..Self::default()
        }
    }

    /// Adds the update of `part` of `basis` made by `edit` (which says
    /// whether it changed anything, `label` naming the change in the
    /// plan's lines), unless it changes nothing; returns the object as the
    /// update leaves it, on which the decision goes on.
    pub fn update<K: Kind>(
        &mut self,
        basis: &Arc<K>,
        part: Part,
        label: impl fmt::Display,
        edit: impl FnOnce(&mut K) -> bool,
    ) -> Arc<K> {
        let mut changed = K::clone(basis);
        if !edit(&mut changed) {
            return Arc::clone(basis);
        }
        let changed = Arc::new(changed);
        let object = target::<K>(ObjectKey::of(basis.as_ref()));
        let chained = self.made.get(&object) == Some(&address(basis));
        self.made.insert(object, address(&changed));
        self.push_write(Written::update(
            Arc::clone(basis),
            Arc::clone(&changed),
            part,
            label.to_string(),
            chained,
        ));
        changed
    }

    fn push_write(&mut self, write: impl Write + 'static) {
        self.steps.push(Step::Write(Box::new(write), Vec::new()));
    }

    /// Adds the create of `object`; the answer tells what the server made
    /// of it once the step ran.
    pub fn create<K: Kind>(&mut self, object: K) -> Answer<Arc<K>> {
        let answer = Answer::default();
        self.push_write(Written::Create {
            object,
            answer: answer.clone(),
        });
        answer
    }

    /// Adds the delete of the object `key`, of the incarnation `uid` when
    /// given; the answer tells, once the step ran, whether finalizers hold
    /// the object.
    pub fn delete<K: Kind>(
        &mut self,
        key: ObjectKey,
        uid: Option<String>,
    ) -> Answer<Option<Arc<K>>> {
        let answer = Answer::default();
        self.push_write(Written::<K>::Delete {
            key,
            uid,
            answer: answer.clone(),
        });
        answer
    }

    /// Adds a server-side apply of `applied` to the status of the object
    /// `key` of kind `K`, as the field manager `manager`.
    pub fn apply_status<K: Kind>(
        &mut self,
        key: ObjectKey,
        manager: &'static str,
        applied: impl Applied,
    ) {
        self.push_write(Written::<K>::Apply {
            key,
            manager,
            applied: Box::new(applied),
        });
    }

    /// Records `what` should the last write added fail.
    pub fn if_failed(&mut self, what: IfFailed<L>) {
        if let Some(Step::Write(_, if_failed)) = self
            .steps
            .iter_mut()
            .rev()
            .find(|step| matches!(step, Step::Write(..)))
        {
            if_failed.push(what);
        }
    }

    /// Adds an event about `object`.
    pub fn event<K: kube::Resource<DynamicType = ()>>(
        &mut self,
        object: &K,
        event_type: EventType,
        reason: &str,
        message: String,
    ) {
        self.steps
            .push(Step::Event(event(object, event_type, reason, message)));
    }

    /// Adds the start of the operation `name`.
    pub fn start(&mut self, name: OperationName) {
        self.steps.push(Step::Start(name));
    }

    /// Adds an effect of the controller's own.
    pub fn local(&mut self, effect: L) {
        self.steps.push(Step::Local(effect));
    }

    /// Reserves `reservation` while the plan runs.
    pub fn reserve(&mut self, reservation: Reservation) {
        self.reservations.push(reservation);
    }

    /// Says what follows the plan.
    pub fn then(&mut self, then: Then) {
        self.then = then;
    }

    /// Asks for the object `key` of kind `K` to be read from the API
    /// server, and the key decided again with it.
    pub fn read<K: Kind>(&mut self, key: ObjectKey) {
        let read = Box::new(ReadOne::<K> {
            key,
            kind: PhantomData,
        });
        match &mut self.then {
            Then::Read(reads) => reads.push(read),
            then => *then = Then::Read(vec![read]),
        }
    }

    /// What follows the plan.
    pub fn what_then(&self) -> &Then {
        &self.then
    }

    /// The writes, events and operation starts, one line each, in order.
    pub fn lines(&self) -> Vec<String> {
        self.steps.iter().filter_map(Step::line).collect()
    }

    /// The steps in order.
    pub fn steps(&self) -> &[Step<L>] {
        &self.steps
    }

    /// The steps, the reservations and what follows, for the executor.
    pub fn into_parts(self) -> (Vec<Step<L>>, Vec<Reservation>, Then) {
        (self.steps, self.reservations, self.then)
    }
}

/// Where a shared object lives, to tell a copy an update made from another.
fn address<K>(object: &Arc<K>) -> usize {
    Arc::as_ptr(object).addr()
}

/// An event of `event_type` about `object`.
pub fn event<K: kube::Resource<DynamicType = ()>>(
    object: &K,
    event_type: EventType,
    reason: &str,
    message: String,
) -> Event {
    Event {
        object: reference_of(object),
        event_type,
        reason: reason.to_string(),
        message,
    }
}
