//! Copies: a plan carried out on copies of objects, with no server. Each
//! update is made on the copy when its version is the one the decision
//! read (the same condition the API server checks) and stored back with a
//! new resourceVersion, each create stored, each delete dropped; events
//! and operation starts are noted as lines. The shadow executor makes each
//! plan's writes this way ([`crate::executor`]), and tests carry a
//! decision's plan out on copies of what a server holds to see what it
//! would do.

use std::any::{Any, TypeId};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use super::{Plan, Step, Target, Then};
use crate::keys::ObjectKey;
use crate::kinds::Kind;
use crate::write::WriteError;

/// The objects of a set of copies, and what a plan noted besides writes.
#[derive(Default)]
pub struct Copies {
    objects: BTreeMap<(TypeId, ObjectKey), Arc<dyn Any + Send + Sync>>,
    version: u64,
    /// The events the plans recorded, as "Type Reason message".
    pub events: Vec<String>,
    /// The operations the plans started, by name.
    pub started: Vec<String>,
}

impl std::fmt::Debug for Copies {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Copies")
            .field("objects", &self.objects.len())
            .field("events", &self.events)
            .field("started", &self.started)
            .finish()
    }
}

/// The resourceVersions of the objects a plan wrote, by object: a later
/// write of the same object in the plan is conditional on its plan's own
/// last answer.
pub type Versions = HashMap<Target, String>;

impl Copies {
    /// Puts `object` as the copy of its key.
    pub fn put<K: Kind>(&mut self, object: K) {
        let key = (TypeId::of::<K>(), ObjectKey::of(&object));
        self.objects.insert(key, Arc::new(object));
    }

    /// The copy of the object `key` of kind `K`.
    pub fn get<K: Kind>(&self, key: &ObjectKey) -> Option<&K> {
        self.objects
            .get(&(TypeId::of::<K>(), key.clone()))
            .and_then(|object| object.downcast_ref::<K>())
    }

    /// The copy of the object `target`, of whatever kind (shared: a later
    /// write replaces it in the copies, not where it is held).
    pub fn any(&self, target: &Target) -> Option<Arc<dyn Any + Send + Sync>> {
        self.objects.get(target).cloned()
    }

    /// Every copy of kind `K`, by key.
    pub fn list<K: Kind>(&self) -> Vec<K> {
        self.objects
            .iter()
            .filter(|((kind, _), _)| *kind == TypeId::of::<K>())
            .filter_map(|(_, object)| object.downcast_ref::<K>().cloned())
            .collect()
    }

    /// Drops the copy of the object `key` of kind `K`.
    pub fn remove<K: Kind>(&mut self, key: &ObjectKey) {
        self.objects.remove(&(TypeId::of::<K>(), key.clone()));
    }

    /// A resourceVersion no copy had before.
    pub fn next_version(&mut self) -> String {
        self.version += 1;
        format!("copy-{}", self.version)
    }

    /// Carries `plan` out on the copies: its writes, with its events and
    /// operation starts noted; its effects are left out. Returns what
    /// follows it, or the first write the copies refuse.
    pub fn carry_out<L>(&mut self, plan: Plan<L>) -> Result<Then, WriteError> {
        let (steps, _, then) = plan.into_parts();
        let mut versions = Versions::new();
        for step in &steps {
            match step {
                Step::Write(write, _) => {
                    let version = versions.get(&write.target()).map(String::as_str);
                    if let Some(version) = write.on_copies(self, version)? {
                        versions.insert(write.target(), version);
                    }
                }
                Step::Event(event) => self.events.push(format!(
                    "{} {} {}",
                    event.event_type.as_str(),
                    event.reason,
                    event.message
                )),
                Step::Start(name) => self.started.push(name.to_string()),
                Step::Local(_) => {}
            }
        }
        Ok(then)
    }
}
