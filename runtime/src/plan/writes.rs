//! A plan's writes, of any kind: an update of named fields (the copy the
//! decision read and the copy it made of it), a create, a delete with the
//! UID the decision saw as precondition, a server-side apply to the status.
//! Each is sent by the writer of its kind, or made on copies, under the
//! same conditions.

use std::any::Any;
use std::fmt;
use std::sync::Arc;

use futures::future::BoxFuture;

use super::{Answer, Target, Verb, target};
use crate::keys::ObjectKey;
use crate::kinds::{Kind, Part};
use crate::plan::Copies;
use crate::version::{Age, age, age_of_versions};
use crate::write::{Change, Condition, WriteError, WriterSet};

/// A write step of any kind, as a plan holds it: shown in the plan's
/// lines, sent by the writer of its kind, or made on copies.
pub trait Write: fmt::Display + Send + Sync {
    /// The object written.
    fn target(&self) -> Target;

    /// How it writes.
    fn verb(&self) -> Verb;

    /// The resource written, by its plural.
    fn resource(&self) -> &'static str;

    /// The UID the write names (a delete's precondition), if any.
    fn uid(&self) -> Option<&str>;

    /// Why the write no longer holds, when the store has seen its object
    /// change since the decision (an update not built on an earlier one of
    /// its plan): checked for every write before a plan sends anything, so
    /// a plan whose decision read a copy of any of its objects that is
    /// gone by now sends nothing at all.
    fn outdated(&self, writers: &WriterSet) -> Option<WriteError>;

    /// Lets go of the copies the write was made on once it is about to be
    /// sent: an update keeps only the merge patch of what its decision
    /// changed, so a plan waiting on the server holds a few hundred bytes
    /// a write instead of whole objects.
    fn let_go(&mut self, writers: &WriterSet);

    /// Sends the write through the writer of its kind among `writers`;
    /// `answered` is the resourceVersion of this plan's own last answer
    /// for the object, when the plan wrote it before. Returns the answer's
    /// resourceVersion.
    fn send<'a>(
        &'a self,
        writers: &'a WriterSet,
        answered: Option<&'a str>,
    ) -> BoxFuture<'a, Result<Option<String>, WriteError>>;

    /// Makes the write on `copies` instead, under the same conditions.
    fn on_copies(
        &self,
        copies: &mut Copies,
        answered: Option<&str>,
    ) -> Result<Option<String>, WriteError>;

    /// The object as the write left it on `copies` (what a create made,
    /// under the name it was given); `None` after a delete.
    fn after(&self, copies: &Copies) -> Option<Arc<dyn Any + Send + Sync>>;

    /// Puts the copy the write starts from into `copies` when they hold
    /// none: the store's copy of the object, or the basis when the store
    /// holds none or an older one. Returns the store's copy.
    fn seed(
        &self,
        writers: &WriterSet,
        copies: &mut Copies,
    ) -> Result<Option<Arc<dyn Any + Send + Sync>>, WriteError>;
}

/// What a server-side apply to an object's status sets, made when its step
/// runs, so that it may name what an earlier step of the plan created (a
/// name the server generated). Shown in a plan's lines by its `Display`.
pub trait Applied: fmt::Display + Send + Sync + 'static {
    /// The partial object to apply: apiVersion, kind, name and the status
    /// fields it sets.
    fn partial(&self) -> serde_json::Value;
}

/// A write of one object of kind `K`.
pub(super) enum Written<K> {
    /// An update of the object `key`, decided on its copy at `version`
    /// with UID `uid`.
    Update {
        key: ObjectKey,
        version: Option<String>,
        uid: Option<String>,
        held: Held<K>,
        part: Part,
        label: String,
        /// Whether the basis is what an earlier update of this plan made
        /// of the object: then the write is conditional on that update's
        /// answer, and otherwise on `version`.
        chained: bool,
    },
    /// A create; the answer tells what the server made of it.
    Create { object: K, answer: Answer<Arc<K>> },
    /// A delete, of the incarnation `uid` names when given; the answer
    /// holds the object when finalizers hold it.
    Delete {
        key: ObjectKey,
        uid: Option<String>,
        answer: Answer<Option<Arc<K>>>,
    },
    /// A server-side apply to the status, as a field manager, forcing.
    Apply {
        key: ObjectKey,
        manager: &'static str,
        applied: Box<dyn Applied>,
    },
}

/// What an update holds of its object: the two copies while the plan is
/// made (and on copies, where the write is made), the merge patch between
/// them once the executor is about to send it.
pub(super) enum Held<K> {
    /// The copy the decision read and the copy it made of it.
    Copies { basis: Arc<K>, changed: Arc<K> },
    /// What the decision changed (`None`: nothing the server keeps).
    Change(Option<Change>),
}

impl<K: Kind> Written<K> {
    /// An update of `basis` into `changed`.
    pub(super) fn update(
        basis: Arc<K>,
        changed: Arc<K>,
        part: Part,
        label: String,
        chained: bool,
    ) -> Self {
        let meta = basis.meta();
        Self::Update {
            key: ObjectKey::of(basis.as_ref()),
            version: meta.resource_version.clone(),
            uid: meta.uid.clone(),
            held: Held::Copies { basis, changed },
            part,
            label,
            chained,
        }
    }

    fn key(&self) -> ObjectKey {
        match self {
            Self::Update { key, .. } | Self::Delete { key, .. } | Self::Apply { key, .. } => {
                key.clone()
            }
            Self::Create { object, .. } => ObjectKey::of(object),
        }
    }

    /// `Kind namespace/name`, for errors.
    fn describe(&self) -> String {
        format!("{} {}", K::kind(&()), self.key())
    }

    /// The resourceVersion an update is conditional on, given this plan's
    /// last answer for its object.
    fn condition<'a>(&'a self, answered: Option<&'a str>) -> Option<&'a str> {
        match self {
            Self::Update {
                version,
                chained: true,
                ..
            } => answered.or(version.as_deref()),
            Self::Update { version, .. } => version.as_deref(),
            _ => None,
        }
    }

    /// The refusal of a write whose object is not the copy it expects.
    fn stale(&self, reason: impl Into<String>) -> WriteError {
        WriteError::Stale {
            object: self.describe(),
            reason: reason.into(),
        }
    }
}

impl<K: Kind> Write for Written<K> {
    fn target(&self) -> Target {
        target::<K>(self.key())
    }

    fn verb(&self) -> Verb {
        match self {
            Self::Update { .. } => Verb::Update,
            Self::Create { .. } => Verb::Create,
            Self::Delete { .. } => Verb::Delete,
            Self::Apply { .. } => Verb::Apply,
        }
    }

    fn resource(&self) -> &'static str {
        <K as k8s_openapi::Resource>::URL_PATH_SEGMENT
    }

    fn uid(&self) -> Option<&str> {
        match self {
            Self::Delete { uid, .. } => uid.as_deref(),
            _ => None,
        }
    }

    fn outdated(&self, writers: &WriterSet) -> Option<WriteError> {
        let Self::Update {
            key,
            version,
            chained: false,
            ..
        } = self
        else {
            return None;
        };
        let held = writers.get::<K>().ok()?.stored(key)?;
        let stored = held.meta().resource_version.as_deref();
        (age_of_versions(version.as_deref(), stored) == Age::Newer).then(|| {
            self.stale(format!(
                "the store holds version {} where the decision read {}",
                stored.unwrap_or("-"),
                version.as_deref().unwrap_or("-")
            ))
        })
    }

    fn let_go(&mut self, writers: &WriterSet) {
        let Self::Update { held, part, .. } = self else {
            return;
        };
        let Held::Copies { basis, changed } = &*held else {
            return;
        };
        // A change that cannot be taken keeps its copies: the step fails
        // with the same error when it is sent.
        if let Ok(change) = writers
            .get::<K>()
            .and_then(|writer| writer.change(basis, changed, *part))
        {
            *held = Held::Change(change);
        }
    }

    fn send<'a>(
        &'a self,
        writers: &'a WriterSet,
        answered: Option<&'a str>,
    ) -> BoxFuture<'a, Result<Option<String>, WriteError>> {
        Box::pin(async move {
            let writer = writers.get::<K>();
            let version = |object: &K| object.meta().resource_version.clone();
            match self {
                Self::Update {
                    key,
                    uid,
                    held,
                    part,
                    ..
                } => {
                    let writer = writer?;
                    let taken;
                    let change = match held {
                        Held::Copies { basis, changed } => {
                            taken = writer.change(basis, changed, *part)?;
                            taken.as_ref()
                        }
                        Held::Change(change) => change.as_ref(),
                    };
                    let condition = Condition {
                        version: self.condition(answered),
                        uid: uid.as_deref(),
                    };
                    let written = writer.send_change(key, condition, *part, change).await?;
                    Ok(written.and_then(|written| version(&written)))
                }
                Self::Create { object, answer } => {
                    let result = match writer {
                        Ok(writer) => writer.create(object).await,
                        Err(error) => Err(error),
                    };
                    let answered = result.as_ref().ok().and_then(|created| version(created));
                    answer.record(result).map(|()| answered)
                }
                Self::Delete { key, uid, answer } => {
                    let result = match writer {
                        Ok(writer) => writer.delete(key, uid.as_deref()).await,
                        Err(error) => Err(error),
                    };
                    answer
                        .record(result.map(|held| held.map(Arc::new)))
                        .map(|()| None)
                }
                Self::Apply {
                    key,
                    manager,
                    applied,
                } => {
                    let written = writer?
                        .apply_status(key, manager, &applied.partial())
                        .await?;
                    Ok(version(&written))
                }
            }
        })
    }

    fn on_copies(
        &self,
        copies: &mut Copies,
        answered: Option<&str>,
    ) -> Result<Option<String>, WriteError> {
        let key = self.key();
        match self {
            Self::Update { held: change, .. } => {
                let held = copies.get::<K>(&key);
                let held_version = held.and_then(|held| held.meta().resource_version.as_deref());
                if held.is_none() || held_version != self.condition(answered) {
                    return Err(self.stale("its copy is not the one decided on"));
                }
                // Only a plan being sent lets go of its copies.
                let Held::Copies { changed, .. } = change else {
                    return Err(self.stale("its copies were let go of to be sent"));
                };
                let mut changed = K::clone(changed);
                let version = copies.next_version();
                changed.meta_mut().resource_version = Some(version.clone());
                copies.put(changed);
                Ok(Some(version))
            }
            Self::Create { object, answer } => {
                let mut created = object.clone();
                let version = copies.next_version();
                let meta = created.meta_mut();
                if meta.name.is_none() {
                    // A name the server would generate: its prefix and the
                    // version.
                    let prefix = meta.generate_name.clone().unwrap_or_default();
                    meta.name = Some(format!("{prefix}{version}"));
                }
                meta.resource_version = Some(version.clone());
                copies.put(created.clone());
                answer
                    .record::<WriteError>(Ok(Arc::new(created)))
                    .map(|()| Some(version))
            }
            Self::Delete { uid, answer, .. } => {
                let held = copies.get::<K>(&key);
                let other = held.is_some_and(|held| {
                    uid.is_some() && held.meta().uid.as_deref() != uid.as_deref()
                });
                if other {
                    let refused = self.stale("another incarnation holds the name");
                    return answer.record(Err(refused)).map(|()| None);
                }
                copies.remove::<K>(&key);
                answer.record::<WriteError>(Ok(None)).map(|()| None)
            }
            Self::Apply { applied, .. } => {
                // The partial object merged into the copy (a list it names
                // is replaced whole, as an apply that names every item it
                // manages leaves it).
                let Some(held) = copies.get::<K>(&key) else {
                    return Err(self.stale("not among the copies"));
                };
                let encoding_failed = |error| WriteError::Api {
                    action: format!("apply status of {}", self.describe()),
                    source: kube::Error::SerdeError(error),
                };
                let mut merged = serde_json::to_value(held).map_err(encoding_failed)?;
                json_patch::merge(&mut merged, &applied.partial());
                let mut applied: K = serde_json::from_value(merged).map_err(encoding_failed)?;
                let version = copies.next_version();
                applied.meta_mut().resource_version = Some(version.clone());
                copies.put(applied);
                Ok(Some(version))
            }
        }
    }

    fn after(&self, copies: &Copies) -> Option<Arc<dyn Any + Send + Sync>> {
        match self {
            Self::Create { answer, .. } => answer
                .answered()
                .map(|created| Arc::clone(created) as Arc<dyn Any + Send + Sync>),
            _ => copies.any(&self.target()),
        }
    }

    fn seed(
        &self,
        writers: &WriterSet,
        copies: &mut Copies,
    ) -> Result<Option<Arc<dyn Any + Send + Sync>>, WriteError> {
        let key = self.key();
        let shown = match self {
            // A name the server generates names nothing stored yet.
            Self::Create { .. } if key.name.is_empty() => None,
            _ => writers.get::<K>()?.stored(&key),
        };
        if copies.get::<K>(&key).is_none() {
            let basis = match self {
                Self::Update {
                    held: Held::Copies { basis, .. },
                    ..
                } => Some(basis),
                _ => None,
            };
            let start = match (basis, &shown) {
                (Some(basis), Some(shown)) if age(basis.meta(), shown.meta()) != Age::Newer => {
                    Some(Arc::clone(basis))
                }
                (Some(basis), None) => Some(Arc::clone(basis)),
                (_, shown) => shown
                    .clone()
                    .filter(|_| !matches!(self, Self::Create { .. })),
            };
            if let Some(start) = start {
                copies.put(K::clone(&start));
            }
        }
        Ok(shown.map(|shown| shown as Arc<dyn Any + Send + Sync>))
    }
}

impl<K: Kind> fmt::Display for Written<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = K::kind(&());
        let key = self.key();
        match self {
            Self::Update {
                version,
                part,
                label,
                ..
            } => {
                let part = match part {
                    Part::Spec => "",
                    Part::Status => " status",
                };
                let at = version.as_deref().unwrap_or("-");
                write!(f, "update {kind} {key}{part} at {at}: {label}")
            }
            Self::Create { object, .. } => {
                write!(f, "create {kind} {key}")?;
                // A name the server generates shows as its prefix and a `*`.
                let meta = object.meta();
                match (&meta.name, &meta.generate_name) {
                    (None, Some(prefix)) => write!(f, "{prefix}*"),
                    _ => Ok(()),
                }
            }
            Self::Delete { uid, .. } => {
                write!(f, "delete {kind} {key}")?;
                match uid {
                    Some(uid) => write!(f, " [{uid}]"),
                    None => Ok(()),
                }
            }
            Self::Apply {
                manager, applied, ..
            } => write!(f, "apply {kind} {key} status as {manager}: {applied}"),
        }
    }
}
