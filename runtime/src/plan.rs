//! A decision's plan: what a controller decided to do about one object,
//! as data, in order. A decision reads what the process knows (the stores,
//! the indexes, the operations running) and returns a plan; it sends
//! nothing and awaits nothing. The executor ([`super::executor`]) carries
//! the plan out, one step at a time.
//!
//! A step is one of:
//! - an update of named fields of one object ([`Change`]), with the
//!   resourceVersion the decision read it at. The change is made again on
//!   the newest copy when the step runs, and re-checks there what the
//!   decision assumed: a copy that moved on refuses it, and the plan ends;
//! - a create, or a delete with the UID the decision saw as precondition;
//!   each hands its answer to an [`Answer`] the decision keeps, for what
//!   follows the plan and for later steps that name what the create made
//!   (a name the server generated);
//! - a server-side apply to an object's status, made when its step runs
//!   ([`Applied`]);
//! - an event;
//! - a long operation to start.
//!
//! Besides its steps a plan carries what follows it (the controller's own
//! word for "queue this again", "this claim waits"), handed back when every
//! step went through, and the holds a decision took (a volume reserved for a
//! claim), released when the plan ends.
//!
//! Because a plan is data, its order is something a test asserts: the
//! [`Plan::lines`] of a decision are the writes, events and operations it
//! will cause, in order.

use std::any::Any;
use std::borrow::Cow;
use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::sync::{Arc, OnceLock};

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::ObjectReference;

use crate::events::{EventType, reference_of};
use crate::hold::Hold;
use crate::journal::{Intended, Journal, Verb};
use crate::keys::ObjectKey;
use crate::kinds::{Kind, Part};
use crate::merge_patch;
use crate::operations::OperationName;
use crate::rehearsal::Rehearsal;
use crate::write::{Edit, WriteError, Writer, WriterSet, newer};

/// A change of named fields of one object of kind `K`, made on the newest
/// copy of the object when its step runs. Shown in a plan's lines by its
/// `Display`.
pub trait Change<K>: fmt::Display + Send + Sync + 'static {
    /// Makes the change on `newest`: [`Edit::Changed`] when it changed
    /// something, [`Edit::Unchanged`] when the copy already is as wanted,
    /// [`Edit::Refused`] when the object moved on since the decision.
    fn apply(&self, newest: &mut K) -> Edit;
}

/// An update of one object: the change and the copy it was decided on.
pub struct Update<K> {
    /// The copy the decision made the change on (for the key, and as the
    /// oldest copy the change may be made on).
    pub basis: Arc<K>,
    /// The main resource or the status subresource.
    pub part: Part,
    /// What changes.
    pub change: Box<dyn Change<K>>,
}

/// What became of a write step: the server's answer once the step went
/// through, or that it failed; nothing while it has not run (nor ever,
/// when the plan ended before it). The decision that planned the step
/// keeps a clone (cheap: clones share the answer).
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

    /// Whether the step ran and failed.
    pub fn failed(&self) -> bool {
        matches!(self.slot.get(), Some(Outcome::Failed))
    }

    /// Keeps how the step ended and passes its result on. A step runs
    /// once, so the slot is empty here; were it not, the first outcome
    /// stays.
    fn settle<E>(&self, result: Result<T, E>) -> Result<(), E> {
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

/// A create of one object.
pub struct Create<K> {
    /// The object to create.
    pub object: K,
    /// Receives the created object as the server answered it.
    pub answer: Answer<Arc<K>>,
}

/// A delete of one object, of the incarnation `uid` names when given.
pub struct Delete<K> {
    /// The object.
    pub key: ObjectKey,
    /// The UID it must still have (the delete's precondition).
    pub uid: Option<String>,
    /// Receives the object when the answer shows it still stored, marked
    /// for deletion and held by finalizers; `None` when it is gone.
    pub answer: Answer<Option<Arc<K>>>,
}

/// What a server-side apply to an object's status sets, made when its step
/// runs, so that it may name what an earlier step of the plan created (a
/// name the server generated). Shown in a plan's lines by its `Display`.
pub trait Applied: fmt::Display + Send + Sync + 'static {
    /// The partial object to apply: apiVersion, kind, name and the status
    /// fields it sets.
    fn partial(&self) -> serde_json::Value;
}

/// A server-side apply to the status of one object of kind `K`, as a
/// field manager, forcing.
pub struct ApplyStatus<K> {
    /// The object.
    pub key: ObjectKey,
    /// The field manager applying.
    pub manager: &'static str,
    /// What is applied.
    pub applied: Box<dyn Applied>,
    /// The kind, which the key alone does not carry.
    pub kind: PhantomData<fn() -> K>,
}

/// A write step of any kind, as a plan holds it: shown in the plan's
/// lines, and run by the writer of its kind.
pub trait WriteStep: fmt::Display + Send + Sync {
    /// Sends the write through the writer of its kind among `writers`.
    fn run<'a>(&'a self, writers: &'a WriterSet) -> BoxFuture<'a, Result<(), WriteError>>;

    /// Makes the write on the copies of `rehearsal` instead.
    fn rehearse(&self, rehearsal: &mut Rehearsal) -> Result<(), WriteError>;

    /// Makes the write on `copies` (which start from the stored copy of
    /// its object when they hold none) and hands it to `journal` instead
    /// of sending it.
    fn journal(
        &self,
        writers: &WriterSet,
        copies: &mut Rehearsal,
        journal: &dyn Journal,
    ) -> Result<(), WriteError>;
}

/// Puts the stored copy of `key` (or `basis`, when that is newer) into
/// `copies` unless they hold the object already; returns the stored copy.
fn seed<K: Kind>(
    writer: &Writer<K>,
    copies: &mut Rehearsal,
    key: &ObjectKey,
    basis: Option<&Arc<K>>,
) -> Option<Arc<K>> {
    let shown = writer.stored(key);
    if copies.get::<K>(key).is_none() {
        let start = match basis {
            Some(basis) => Some(newer(basis, shown.clone())),
            None => shown.clone(),
        };
        if let Some(start) = start {
            copies.put(K::clone(&start));
        }
    }
    shown
}

/// `object` as the journal takes it.
fn any<K: Kind>(object: &K) -> &(dyn Any + Send + Sync) {
    object
}

/// The resource (plural) of the kind `K`.
fn plural<K: Kind>() -> Cow<'static, str> {
    K::plural(&())
}

/// A write of one object as the journal is told of it: the object, the
/// UID the write names, and how it writes.
struct Journaled<'a> {
    key: &'a ObjectKey,
    uid: Option<&'a str>,
    verb: Verb,
}

/// Makes a write on `copies` by `rehearse` (the copies starting from the
/// stored copy of the object, or `basis` when that is newer) and hands it
/// to `journal` with the object before it, after it and as stored; an
/// update or apply that changed nothing is not handed on.
fn journal_on_copies<K: Kind>(
    writers: &WriterSet,
    copies: &mut Rehearsal,
    journal: &dyn Journal,
    write: &Journaled<'_>,
    basis: Option<&Arc<K>>,
    rehearse: impl FnOnce(&mut Rehearsal) -> Result<(), WriteError>,
) -> Result<(), WriteError> {
    let writer = writers.get::<K>()?;
    let shown = seed(writer, copies, write.key, basis);
    let before = copies.get::<K>(write.key).cloned();
    rehearse(copies)?;
    let after = copies.get::<K>(write.key);
    let version = |object: Option<&K>| object.and_then(|o| o.meta().resource_version.clone());
    if write.verb != Verb::Delete && version(after) == version(before.as_ref()) {
        return Ok(());
    }
    journal.write(&Intended {
        controller: writer.controller(),
        resource: &plural::<K>(),
        verb: write.verb,
        key: write.key,
        uid: write.uid,
        before: before.as_ref().map(any),
        after: after.map(any),
        shown: shown.as_deref().map(any),
    });
    Ok(())
}

impl<K: Kind> WriteStep for Update<K> {
    fn run<'a>(&'a self, writers: &'a WriterSet) -> BoxFuture<'a, Result<(), WriteError>> {
        Box::pin(async move {
            writers
                .get::<K>()?
                .update(&self.basis, self.part, |newest| self.change.apply(newest))
                .await
                .map(drop)
        })
    }

    fn rehearse(&self, rehearsal: &mut Rehearsal) -> Result<(), WriteError> {
        let key = ObjectKey::of(self.basis.as_ref());
        let mut newest = rehearsal
            .get::<K>(&key)
            .cloned()
            .unwrap_or_else(|| K::clone(&self.basis));
        match self.change.apply(&mut newest) {
            Edit::Unchanged => Ok(()),
            Edit::Refused(reason) => Err(WriteError::Stale {
                object: format!("{} {key}", K::kind(&())),
                reason,
            }),
            Edit::Changed => {
                newest.meta_mut().resource_version = Some(rehearsal.next_version());
                rehearsal.put(newest);
                Ok(())
            }
        }
    }

    fn journal(
        &self,
        writers: &WriterSet,
        copies: &mut Rehearsal,
        journal: &dyn Journal,
    ) -> Result<(), WriteError> {
        let key = ObjectKey::of(self.basis.as_ref());
        let write = Journaled {
            key: &key,
            uid: None,
            verb: Verb::Update,
        };
        journal_on_copies(
            writers,
            copies,
            journal,
            &write,
            Some(&self.basis),
            |copies| self.rehearse(copies),
        )
    }
}

impl<K: Kind> WriteStep for Create<K> {
    fn run<'a>(&'a self, writers: &'a WriterSet) -> BoxFuture<'a, Result<(), WriteError>> {
        Box::pin(async move {
            let result = match writers.get::<K>() {
                Ok(writer) => writer.create(&self.object).await,
                Err(error) => Err(error),
            };
            self.answer.settle(result)
        })
    }

    fn rehearse(&self, rehearsal: &mut Rehearsal) -> Result<(), WriteError> {
        let mut created = self.object.clone();
        let version = rehearsal.next_version();
        let meta = created.meta_mut();
        if meta.name.is_none() {
            // A name the server would generate: its prefix and the version.
            let prefix = meta.generate_name.clone().unwrap_or_default();
            meta.name = Some(format!("{prefix}{version}"));
        }
        meta.resource_version = Some(version);
        rehearsal.put(created.clone());
        self.answer.settle::<WriteError>(Ok(Arc::new(created)))
    }

    fn journal(
        &self,
        writers: &WriterSet,
        copies: &mut Rehearsal,
        journal: &dyn Journal,
    ) -> Result<(), WriteError> {
        let writer = writers.get::<K>()?;
        let key = ObjectKey::of(&self.object);
        let shown = (!key.name.is_empty())
            .then(|| writer.stored(&key))
            .flatten();
        self.rehearse(copies)?;
        let created = self.answer.answered();
        journal.write(&Intended {
            controller: writer.controller(),
            resource: &plural::<K>(),
            verb: Verb::Create,
            key: &key,
            uid: None,
            before: None,
            after: created.map(|created| any(created.as_ref())),
            shown: shown.as_deref().map(any),
        });
        Ok(())
    }
}

impl<K: Kind> WriteStep for Delete<K> {
    fn run<'a>(&'a self, writers: &'a WriterSet) -> BoxFuture<'a, Result<(), WriteError>> {
        Box::pin(async move {
            let result = match writers.get::<K>() {
                Ok(writer) => writer.delete(&self.key, self.uid.as_deref()).await,
                Err(error) => Err(error),
            };
            self.answer.settle(result.map(|held| held.map(Arc::new)))
        })
    }

    fn rehearse(&self, rehearsal: &mut Rehearsal) -> Result<(), WriteError> {
        let held = rehearsal.get::<K>(&self.key);
        let other = held.is_some_and(|held| {
            self.uid.is_some() && held.meta().uid.as_deref() != self.uid.as_deref()
        });
        if other {
            return self.answer.settle(Err(WriteError::Stale {
                object: format!("{} {}", K::kind(&()), self.key),
                reason: "another incarnation holds the name".to_string(),
            }));
        }
        rehearsal.remove::<K>(&self.key);
        self.answer.settle::<WriteError>(Ok(None))
    }

    fn journal(
        &self,
        writers: &WriterSet,
        copies: &mut Rehearsal,
        journal: &dyn Journal,
    ) -> Result<(), WriteError> {
        let write = Journaled {
            key: &self.key,
            uid: self.uid.as_deref(),
            verb: Verb::Delete,
        };
        journal_on_copies::<K>(writers, copies, journal, &write, None, |copies| {
            self.rehearse(copies)
        })
    }
}

impl<K: Kind> WriteStep for ApplyStatus<K> {
    fn run<'a>(&'a self, writers: &'a WriterSet) -> BoxFuture<'a, Result<(), WriteError>> {
        Box::pin(async move {
            writers
                .get::<K>()?
                .apply_status(&self.key, self.manager, &self.applied.partial())
                .await
                .map(drop)
        })
    }

    /// Merges the partial object into the rehearsal's copy (a list it
    /// names is replaced whole, as an apply that names every item it
    /// manages leaves it).
    fn rehearse(&self, rehearsal: &mut Rehearsal) -> Result<(), WriteError> {
        let object = format!("{} {}", K::kind(&()), self.key);
        let Some(held) = rehearsal.get::<K>(&self.key) else {
            return Err(WriteError::Stale {
                object,
                reason: "not in the rehearsal".to_string(),
            });
        };
        let encoding_failed = |error| WriteError::Api {
            action: format!("apply status of {object}"),
            source: kube::Error::SerdeError(error),
        };
        let mut merged = serde_json::to_value(held).map_err(encoding_failed)?;
        merge_patch::apply(&mut merged, &self.applied.partial());
        let mut applied: K = serde_json::from_value(merged).map_err(encoding_failed)?;
        applied.meta_mut().resource_version = Some(rehearsal.next_version());
        rehearsal.put(applied);
        Ok(())
    }

    fn journal(
        &self,
        writers: &WriterSet,
        copies: &mut Rehearsal,
        journal: &dyn Journal,
    ) -> Result<(), WriteError> {
        let write = Journaled {
            key: &self.key,
            uid: None,
            verb: Verb::Apply,
        };
        journal_on_copies::<K>(writers, copies, journal, &write, None, |copies| {
            self.rehearse(copies)
        })
    }
}

impl<K: Kind> fmt::Display for Update<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let part = match self.part {
            Part::Spec => "",
            Part::Status => " status",
        };
        write!(
            f,
            "update {} {}{part} at {}: {}",
            K::kind(&()),
            ObjectKey::of(self.basis.as_ref()),
            self.basis.meta().resource_version.as_deref().unwrap_or("-"),
            self.change
        )
    }
}

impl<K: Kind> fmt::Display for Create<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "create {} {}", K::kind(&()), ObjectKey::of(&self.object))?;
        // A name the server generates shows as its prefix and a `*`.
        let meta = self.object.meta();
        match (&meta.name, &meta.generate_name) {
            (None, Some(prefix)) => write!(f, "{prefix}*"),
            _ => Ok(()),
        }
    }
}

impl<K: Kind> fmt::Display for Delete<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "delete {} {}", K::kind(&()), self.key)?;
        match &self.uid {
            Some(uid) => write!(f, " [{uid}]"),
            None => Ok(()),
        }
    }
}

impl<K: Kind> fmt::Display for ApplyStatus<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "apply {} {} status as {}: {}",
            K::kind(&()),
            self.key,
            self.manager,
            self.applied
        )
    }
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

/// The work of a long operation, as its step hands it to the tracker.
pub type OperationWork = BoxFuture<'static, Result<(), String>>;

/// A long operation to start, unless one of its name runs or backs off.
pub struct Start {
    /// The operation's name (one object, one kind of work).
    pub name: OperationName,
    /// What it does.
    pub work: OperationWork,
}

/// One step of a plan.
pub enum Step {
    /// A write of one object.
    Write(Box<dyn WriteStep>),
    /// An event.
    Event(Event),
    /// A long operation to start.
    Start(Start),
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Step::Write(write) => write.fmt(f),
            Step::Event(event) => write!(
                f,
                "event {} {} on {} {}: {}",
                event.event_type.as_str(),
                event.reason,
                event.object.kind.as_deref().unwrap_or(""),
                event_object(&event.object),
                event.message
            ),
            Step::Start(start) => write!(f, "start {}", start.name),
        }
    }
}

/// `namespace/name` or `name` of an event's object.
fn event_object(object: &ObjectReference) -> String {
    let name = object.name.as_deref().unwrap_or("");
    match object.namespace.as_deref() {
        Some(namespace) if !namespace.is_empty() => format!("{namespace}/{name}"),
        _ => name.to_string(),
    }
}

/// What a decision decided: its steps in order, what follows when they all
/// went through (`A`, the controller's own word), and its holds.
pub struct Plan<A> {
    steps: Vec<Step>,
    holds: Vec<Hold>,
    /// What follows the plan.
    pub after: A,
}

impl<A: Default> Default for Plan<A> {
    fn default() -> Self {
        Self {
            steps: Vec::new(),
            holds: Vec::new(),
            after: A::default(),
        }
    }
}

impl<A> fmt::Debug for Plan<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.lines()).finish()
    }
}

impl<A> Plan<A> {
    /// Adds the update of `part` of `basis` by `change`, unless the change
    /// changes nothing on `basis`; returns the object as the update will
    /// leave it (still at `basis`'s resourceVersion), on which the
    /// decision goes on. A change that refuses `basis` itself is a
    /// decision made on a copy it no longer holds for: nothing is added
    /// and the decision ends as stale.
    pub fn update<K: Kind>(
        &mut self,
        basis: &Arc<K>,
        part: Part,
        change: impl Change<K>,
    ) -> Result<Arc<K>, WriteError> {
        let mut changed = K::clone(basis);
        match change.apply(&mut changed) {
            Edit::Unchanged => Ok(Arc::clone(basis)),
            Edit::Refused(reason) => Err(WriteError::Stale {
                object: format!("{} {}", K::kind(&()), ObjectKey::of(basis.as_ref())),
                reason,
            }),
            Edit::Changed => {
                self.steps.push(Step::Write(Box::new(Update {
                    basis: Arc::clone(basis),
                    part,
                    change: Box::new(change),
                })));
                Ok(Arc::new(changed))
            }
        }
    }

    /// Adds the create of `object`; the answer tells what the server made
    /// of it once the step ran.
    pub fn create<K: Kind>(&mut self, object: K) -> Answer<Arc<K>> {
        let answer = Answer::default();
        self.steps.push(Step::Write(Box::new(Create {
            object,
            answer: answer.clone(),
        })));
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
        self.steps.push(Step::Write(Box::new(Delete::<K> {
            key,
            uid,
            answer: answer.clone(),
        })));
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
        self.steps.push(Step::Write(Box::new(ApplyStatus::<K> {
            key,
            manager,
            applied: Box::new(applied),
            kind: PhantomData,
        })));
    }

    /// Adds an event about `object`.
    pub fn event<K: kube::Resource<DynamicType = ()>>(
        &mut self,
        object: &K,
        event_type: EventType,
        reason: &str,
        message: String,
    ) {
        self.steps.push(Step::Event(Event {
            object: reference_of(object),
            event_type,
            reason: reason.to_string(),
            message,
        }));
    }

    /// Adds the start of the operation `name`, doing `work`.
    pub fn start<E: fmt::Display>(
        &mut self,
        name: OperationName,
        work: impl Future<Output = Result<(), E>> + Send + 'static,
    ) {
        let work = Box::pin(async move { work.await.map_err(|error| error.to_string()) });
        self.steps.push(Step::Start(Start { name, work }));
    }

    /// Keeps `hold` until the plan ends.
    pub fn hold(&mut self, hold: Hold) {
        self.holds.push(hold);
    }

    /// The steps, one line each, in order.
    pub fn lines(&self) -> Vec<String> {
        self.steps.iter().map(ToString::to_string).collect()
    }

    /// How many writes the plan makes.
    #[cfg(any(test, feature = "testing"))]
    pub fn writes(&self) -> usize {
        self.steps
            .iter()
            .filter(|step| matches!(step, Step::Write(_)))
            .count()
    }

    /// Carries the plan out on the copies of `rehearsal` (events and
    /// operation starts noted there); returns what follows it, or the
    /// first write's refusal.
    #[cfg(any(test, feature = "testing"))]
    pub fn rehearse(self, rehearsal: &mut Rehearsal) -> Result<A, WriteError> {
        for step in &self.steps {
            match step {
                Step::Write(write) => write.rehearse(rehearsal)?,
                Step::Event(event) => rehearsal.events.push(format!(
                    "{} {} {}",
                    event.event_type.as_str(),
                    event.reason,
                    event.message
                )),
                Step::Start(start) => rehearsal.started.push(start.name.to_string()),
            }
        }
        Ok(self.after)
    }

    /// The steps, the holds and what follows, for the executor.
    pub fn into_parts(self) -> (Vec<Step>, Vec<Hold>, A) {
        (self.steps, self.holds, self.after)
    }
}
