//! Reactors: the test lever to inject faults, in the spirit of client-go's
//! fake clientset reactors but at the HTTP level.
//!
//! A reactor matches requests by verb (or every write), resource, name and
//! subresource, and either answers with an error `Status` (with a
//! `Retry-After` header when asked, as a throttling apiserver sends),
//! drops the connection, or delays the request and lets it proceed. It
//! fires once, N times, always, or with a probability drawn from memapi's
//! seeded generator. Installing a reactor gives a [`ReactorId`], by which a
//! test reads how often it fired and removes it.
//!
//! By default a reactor acts before the request is served: an error or a
//! drop means nothing was written. An [`after_commit`](Reactor::after_commit)
//! reactor acts on a write (create, update, patch, delete) that succeeded:
//! the change is stored, watchers see it and the resourceVersion advances,
//! but the client gets the reactor's error or a dropped connection instead
//! of the answer (or the answer late, for a delay) — the lost answer of a
//! real network.

use super::rng::Rng;
use std::fmt;
use std::time::Duration;

/// The API verbs, as Kubernetes audit logs and RBAC name them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Verb {
    /// GET of one object.
    Get,
    /// GET of a collection.
    List,
    /// GET of a collection with `watch=true`.
    Watch,
    /// POST.
    Create,
    /// PUT.
    Update,
    /// PATCH.
    Patch,
    /// DELETE of one object.
    Delete,
    /// DELETE of a collection (with label and field selectors).
    DeleteCollection,
}

impl Verb {
    /// Whether the verb changes something (create, update, patch, delete).
    pub fn is_write(self) -> bool {
        matches!(
            self,
            Verb::Create | Verb::Update | Verb::Patch | Verb::Delete | Verb::DeleteCollection
        )
    }
}

impl fmt::Display for Verb {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self {
            Verb::Get => "get",
            Verb::List => "list",
            Verb::Watch => "watch",
            Verb::Create => "create",
            Verb::Update => "update",
            Verb::Patch => "patch",
            Verb::Delete => "delete",
            Verb::DeleteCollection => "deletecollection",
        };
        f.write_str(s)
    }
}

/// What a matching reactor does.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Answer with this HTTP code and a `Status` body carrying the message.
    Error {
        /// HTTP status code; the `Status.reason` is derived from it.
        code: u16,
        /// `Status.message`.
        message: String,
        /// Seconds for a `Retry-After` header (and the Status's
        /// `details.retryAfterSeconds`), as an apiserver shedding load sends
        /// with 429; no header when `None`.
        retry_after: Option<u32>,
    },
    /// Fail the request without an answer: the tower service returns an
    /// error and the TCP listener closes the connection.
    DropConnection,
    /// Wait this long (tokio time), then go on with the request.
    Delay(Duration),
}

/// How often a reactor fires.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Times {
    /// On the first matching request only.
    Once,
    /// On the first N matching requests.
    N(u32),
    /// On every matching request.
    Always,
    /// On each matching request with this probability (0.0 to 1.0).
    Probability(f64),
}

/// A fault-injection rule. Build with [`Reactor::on`] or [`Reactor::any`].
///
/// ```
/// use memapi::{Reactor, Verb};
/// // The next two PV status updates fail with 409 Conflict.
/// let r = Reactor::on(Verb::Update, "persistentvolumes").subresource("status").error(409).times(2);
/// # let _ = r;
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Reactor {
    verb: Option<Verb>,
    writes_only: bool,
    resource: Option<String>,
    group: Option<String>,
    name: Option<String>,
    /// `None`: any; `Some(None)`: the object itself, no subresource.
    subresource: Option<Option<String>>,
    action: Action,
    times: Times,
    after_commit: bool,
    fired: u32,
}

/// A request as reactors see it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RequestInfo<'a> {
    /// The verb.
    pub verb: Verb,
    /// API group ("" for core).
    pub group: &'a str,
    /// Resource plural.
    pub resource: &'a str,
    /// Object name, for requests about one object.
    pub name: Option<&'a str>,
    /// Subresource ("status").
    pub subresource: Option<&'a str>,
}

impl Reactor {
    /// A reactor for one verb on one resource plural (e.g. "persistentvolumes").
    /// By default it answers 500 once.
    pub fn on(verb: Verb, resource: &str) -> Self {
        Self {
            verb: Some(verb),
            resource: Some(resource.to_string()),
            ..Self::any()
        }
    }

    /// A reactor for one verb on every resource (e.g. every list). By
    /// default it answers 500 once.
    pub fn verb(verb: Verb) -> Self {
        Self {
            verb: Some(verb),
            ..Self::any()
        }
    }

    /// A reactor for every request. By default it answers 500 once.
    pub fn any() -> Self {
        Self {
            verb: None,
            writes_only: false,
            resource: None,
            group: None,
            name: None,
            subresource: None,
            action: Action::Error {
                code: 500,
                message: "injected error".to_string(),
                retry_after: None,
            },
            times: Times::Once,
            after_commit: false,
            fired: 0,
        }
    }

    /// Matches only writes (create, update, patch, delete), of any resource
    /// unless [`on`](Self::on) named one.
    pub fn writes_only(mut self) -> Self {
        self.writes_only = true;
        self
    }

    /// Matches only this API group ("" for core; tells core and events.k8s.io events apart).
    pub fn group(mut self, group: &str) -> Self {
        self.group = Some(group.to_string());
        self
    }

    /// Matches only requests about the object with this name.
    pub fn name(mut self, name: &str) -> Self {
        self.name = Some(name.to_string());
        self
    }

    /// Matches only requests to this subresource ("status").
    pub fn subresource(mut self, sub: &str) -> Self {
        self.subresource = Some(Some(sub.to_string()));
        self
    }

    /// Matches only requests to the object itself, not to a subresource
    /// (a spec or metadata update, not a status update).
    pub fn main_resource(mut self) -> Self {
        self.subresource = Some(None);
        self
    }

    /// Answer with this HTTP code (reason derived from it).
    pub fn error(self, code: u16) -> Self {
        self.error_with(code, "injected error")
    }

    /// Answer with this HTTP code and message.
    pub fn error_with(mut self, code: u16, message: &str) -> Self {
        self.action = Action::Error {
            code,
            message: message.to_string(),
            retry_after: None,
        };
        self
    }

    /// Answer 429 TooManyRequests with `Retry-After: seconds`, as an
    /// apiserver over its in-flight limit does.
    ///
    /// ```
    /// use memapi::{Reactor, Verb};
    /// // The next claim update is throttled: come back in 2 s.
    /// let r = Reactor::on(Verb::Update, "persistentvolumeclaims").throttle(2);
    /// # let _ = r;
    /// ```
    pub fn throttle(mut self, seconds: u32) -> Self {
        self.action = Action::Error {
            code: 429,
            message: "Too many requests, please try again later.".to_string(),
            retry_after: Some(seconds),
        };
        self
    }

    /// Drop the connection instead of answering.
    pub fn drop_connection(mut self) -> Self {
        self.action = Action::DropConnection;
        self
    }

    /// Delay the request (tokio time), then serve it normally.
    pub fn delay(mut self, d: Duration) -> Self {
        self.action = Action::Delay(d);
        self
    }

    /// Act after the write is performed and stored, on successful writes
    /// only (create, update, patch, delete): the client sees the error, the
    /// dropped connection or the delay, but the change is already made.
    /// Counts (`times`, `probability`) apply to those successful writes.
    ///
    /// ```
    /// use memapi::{Reactor, Verb};
    /// // The next PV update is stored, but its answer is lost.
    /// let r = Reactor::on(Verb::Update, "persistentvolumes").after_commit().drop_connection();
    /// # let _ = r;
    /// ```
    pub fn after_commit(mut self) -> Self {
        self.after_commit = true;
        self
    }

    /// Fire on the first `n` matching requests.
    pub fn times(mut self, n: u32) -> Self {
        self.times = Times::N(n);
        self
    }

    /// Fire on every matching request.
    pub fn always(mut self) -> Self {
        self.times = Times::Always;
        self
    }

    /// Fire on each matching request with probability `p`.
    pub fn probability(mut self, p: f64) -> Self {
        self.times = Times::Probability(p);
        self
    }

    /// How many times this reactor has fired.
    pub fn fired(&self) -> u32 {
        self.fired
    }

    fn matches(&self, req: &RequestInfo<'_>) -> bool {
        self.verb.is_none_or(|v| v == req.verb)
            && (!self.writes_only || req.verb.is_write())
            && self.resource.as_deref().is_none_or(|r| r == req.resource)
            && self.group.as_deref().is_none_or(|g| g == req.group)
            && self.name.as_deref().is_none_or(|n| Some(n) == req.name)
            && self
                .subresource
                .as_ref()
                .is_none_or(|s| s.as_deref() == req.subresource)
    }

    /// Whether this reactor fires on a matching request (counting it).
    fn fire(&mut self, rng: &mut Rng) -> bool {
        let fires = match self.times {
            Times::Once => self.fired < 1,
            Times::N(n) => self.fired < n,
            Times::Always => true,
            Times::Probability(p) => rng.next_f64() < p,
        };
        if fires {
            self.fired = self.fired.saturating_add(1);
        }
        fires
    }
}

/// Names one installed reactor, to read its count or remove it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ReactorId(u64);

/// The installed reactors, consulted in installation order, with the
/// generator their probabilities draw from.
#[derive(Debug)]
pub(crate) struct Reactors {
    list: Vec<(ReactorId, Reactor)>,
    next_id: u64,
    rng: Rng,
}

impl Reactors {
    /// No reactors; probabilities drawn from a generator seeded with `seed`.
    pub(crate) fn new(seed: u64) -> Self {
        Self {
            list: Vec::new(),
            next_id: 0,
            rng: Rng::new(seed),
        }
    }

    /// Installs a reactor after the existing ones.
    pub(crate) fn add(&mut self, r: Reactor) -> ReactorId {
        let id = ReactorId(self.next_id);
        self.next_id += 1;
        self.list.push((id, r));
        id
    }

    /// The installed reactor of that id, if it is still installed.
    pub(crate) fn get(&self, id: ReactorId) -> Option<&Reactor> {
        self.list.iter().find(|(i, _)| *i == id).map(|(_, r)| r)
    }

    /// Removes one reactor; returns it if it was installed.
    pub(crate) fn remove(&mut self, id: ReactorId) -> Option<Reactor> {
        let at = self.list.iter().position(|(i, _)| *i == id)?;
        Some(self.list.remove(at).1)
    }

    /// Removes all reactors.
    pub(crate) fn clear(&mut self) {
        self.list.clear();
    }

    /// The actions to take before serving a request: every firing delay,
    /// then at most one error or drop (the first that fires), which ends
    /// the list. After-commit reactors are not consulted.
    pub(crate) fn react(&mut self, req: &RequestInfo<'_>) -> Vec<Action> {
        self.react_in(req, false)
    }

    /// The actions to take on the answer of a write that succeeded: those of
    /// the after-commit reactors, chosen as [`react`](Self::react) does.
    pub(crate) fn react_after_commit(&mut self, req: &RequestInfo<'_>) -> Vec<Action> {
        self.react_in(req, true)
    }

    fn react_in(&mut self, req: &RequestInfo<'_>, after_commit: bool) -> Vec<Action> {
        let mut actions = Vec::new();
        let candidates = self
            .list
            .iter_mut()
            .map(|(_, r)| r)
            .filter(|r| r.after_commit == after_commit && r.matches(req));
        for r in candidates {
            if r.fire(&mut self.rng) {
                let last = !matches!(r.action, Action::Delay(_));
                actions.push(r.action.clone());
                if last {
                    break;
                }
            }
        }
        actions
    }
}
