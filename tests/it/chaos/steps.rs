//! Where in a run a change happened: the request that committed it (its
//! index in memapi's request log, which is the step the run was at) or the
//! test world (users, the kubelet and the scheduler stand-ins write to the
//! store directly, outside the log); and the violations of the
//! invariants, each named, with its object and the step it broke at.

use std::collections::HashMap;
use std::fmt;

use memapi::RequestLogEntry;

/// One invariant broken at one step.
#[derive(Debug, Clone)]
pub(crate) struct Violation {
    /// The invariant's name, first word of the replay line.
    pub(crate) invariant: &'static str,
    /// The object, as `kind name`.
    pub(crate) object: String,
    /// The resourceVersion of the change that broke it (for a request that
    /// committed nothing, the version the server was at).
    pub(crate) version: u64,
    /// Where: `request #N: verb resource/name` or `the test world`.
    pub(crate) step: String,
    /// What broke.
    pub(crate) detail: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {}: {} (at {}, resourceVersion {})",
            self.invariant, self.object, self.detail, self.step, self.version
        )
    }
}

/// The request log, indexed by the versions each request committed.
pub(crate) struct Steps {
    log: Vec<RequestLogEntry>,
    by_version: HashMap<u64, usize>,
}

impl Steps {
    pub(crate) fn new(log: Vec<RequestLogEntry>) -> Self {
        let by_version = log
            .iter()
            .enumerate()
            .flat_map(|(at, entry)| entry.commits.clone().map(move |v| (v, at)))
            .collect();
        Self { log, by_version }
    }

    /// The request that committed `version`, if a request did.
    pub(crate) fn request(&self, version: u64) -> Option<(usize, &RequestLogEntry)> {
        let at = *self.by_version.get(&version)?;
        Some((at, &self.log[at]))
    }

    /// How the step of `version` reads in a violation.
    pub(crate) fn describe(&self, version: u64) -> String {
        match self.request(version) {
            Some((at, entry)) => describe(at, entry),
            None => "the test world".to_string(),
        }
    }

    /// Every request with the version the server was at when it was
    /// served (its first commit, or the next version when it made none;
    /// for a request a fault failed, that of the request before).
    pub(crate) fn requests(&self) -> impl Iterator<Item = (usize, &RequestLogEntry, u64)> {
        let mut at_version = 0;
        self.log.iter().enumerate().map(move |(at, entry)| {
            if entry.commits.start > 0 {
                at_version = entry.commits.start;
            }
            (at, entry, at_version)
        })
    }
}

/// `request #N: patch persistentvolumes/v1 status`.
pub(crate) fn describe(at: usize, entry: &RequestLogEntry) -> String {
    format!(
        "request #{at}: {} {}/{}{}",
        entry.verb,
        entry.resource,
        entry.name.as_deref().unwrap_or(""),
        entry
            .subresource
            .as_deref()
            .map(|s| format!(" {s}"))
            .unwrap_or_default()
    )
}
