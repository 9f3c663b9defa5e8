//! Request accounting: a log of every request and counters by verb,
//! resource, subresource and response code, so tests can assert things
//! like "no wasted writes" or "exactly one 409".

use super::reactors::Verb;
use std::collections::BTreeMap;
use std::ops::Range;

/// What a write names as the state it is conditional on, as the API server
/// checks it: the `metadata.resourceVersion` and `metadata.uid` of an
/// update's or a patch's body (the values a JSON patch sets or tests at
/// those paths), the `preconditions` of a delete's options. A test reads
/// it to prove a client's writes are conditional where its design says
/// they are.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Preconditions {
    /// The resourceVersion the write is conditional on.
    pub resource_version: Option<String>,
    /// The UID the write is conditional on.
    pub uid: Option<String>,
}

/// One served (or dropped) request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestLogEntry {
    /// The verb.
    pub verb: Verb,
    /// API group ("" for core).
    pub group: String,
    /// Resource plural.
    pub resource: String,
    /// Namespace from the URL, if any.
    pub namespace: Option<String>,
    /// Object name, if any.
    pub name: Option<String>,
    /// Subresource ("status"), if any.
    pub subresource: Option<String>,
    /// The user the request named (by token or impersonation); `None`
    /// for a request that named nobody.
    pub user: Option<String>,
    /// HTTP response code the client saw; `None` when the connection was dropped.
    pub code: Option<u16>,
    /// The client's `User-Agent`, as the real server's audit log keeps it
    /// (tells which of a process's clients sent the request).
    pub user_agent: Option<String>,
    /// When an after-commit reactor replaced the answer of a write that was
    /// stored: the code the server had answered (200, 201). `None` otherwise.
    pub lost_answer: Option<u16>,
    /// What the write named as its preconditions (nothing for reads).
    pub preconditions: Preconditions,
    /// Whether the write is a server-side apply (whose body names the
    /// fields its manager owns, not a copy it read).
    pub apply: bool,
    /// The resourceVersions of the changes the request committed, in
    /// order (empty when it changed nothing): how a test ties a change an
    /// [`Observer`](crate::Observer) saw to the request that made it.
    /// Exact when the server serves one request at a time, as on a
    /// current-thread runtime; on a runtime with several threads it may
    /// also hold changes other requests committed meanwhile.
    pub commits: Range<u64>,
}

/// Counter key: (verb, resource, subresource, code).
type CounterKey = (Verb, String, Option<String>, Option<u16>);

/// A snapshot of the request log and counters.
#[derive(Debug, Clone, Default)]
pub struct RequestStats {
    log: Vec<RequestLogEntry>,
    counters: BTreeMap<CounterKey, u64>,
}

impl RequestStats {
    /// Records one request.
    pub(crate) fn record(&mut self, entry: RequestLogEntry) {
        let key = (
            entry.verb,
            entry.resource.clone(),
            entry.subresource.clone(),
            entry.code,
        );
        *self.counters.entry(key).or_default() += 1;
        self.log.push(entry);
    }

    /// Every request, in arrival order of their answers.
    pub fn log(&self) -> &[RequestLogEntry] {
        &self.log
    }

    /// Requests with this verb on this resource and exact subresource
    /// (`None`: the main resource), whatever their code.
    pub fn count(&self, verb: Verb, resource: &str, subresource: Option<&str>) -> u64 {
        self.counters
            .iter()
            .filter(|((v, r, s, _), _)| *v == verb && r == resource && s.as_deref() == subresource)
            .map(|(_, n)| n)
            .sum()
    }

    /// Like [`count`](Self::count), restricted to one response code.
    pub fn count_code(
        &self,
        verb: Verb,
        resource: &str,
        subresource: Option<&str>,
        code: u16,
    ) -> u64 {
        self.counters
            .iter()
            .filter(|((v, r, s, c), _)| {
                *v == verb && r == resource && s.as_deref() == subresource && *c == Some(code)
            })
            .map(|(_, n)| n)
            .sum()
    }

    /// All requests answered with this code (e.g. 409 for conflicts).
    pub fn total_with_code(&self, code: u16) -> u64 {
        self.counters
            .iter()
            .filter(|((.., c), _)| *c == Some(code))
            .map(|(_, n)| n)
            .sum()
    }

    /// All requests whose connection was dropped by a reactor.
    pub fn total_dropped(&self) -> u64 {
        self.counters
            .iter()
            .filter(|((.., c), _)| c.is_none())
            .map(|(_, n)| n)
            .sum()
    }

    /// Writes that were stored but whose answer an after-commit reactor
    /// replaced with an error or a dropped connection.
    pub fn total_lost_answers(&self) -> u64 {
        self.log.iter().filter(|e| e.lost_answer.is_some()).count() as u64
    }

    /// Requests whose `User-Agent` is `agent`, whatever their verb and
    /// code.
    pub fn count_by_agent(&self, agent: &str) -> u64 {
        self.log
            .iter()
            .filter(|e| e.user_agent.as_deref() == Some(agent))
            .count() as u64
    }

    /// All requests.
    pub fn total(&self) -> u64 {
        self.counters.values().sum()
    }
}
