//! The server's limit on writes served at once
//! ([`crate::MemApiConfig::max_mutating_in_flight`]), as kube-apiserver's
//! max-in-flight filter applies it, after authentication and before
//! authorization: a write past the limit is answered 429 with
//! `Retry-After: 1` and not served.

use super::*;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The message of kube-apiserver's answer to a request past its limit.
const TOO_MANY: &str = "Too many requests, please try again later.";

/// What the limit made of one request.
pub(super) enum Seat<'a> {
    /// Not a write, or no limit: not counted.
    Free,
    /// A write under the limit, counted until dropped.
    Taken(&'a AtomicUsize),
    /// A write past the limit.
    Refused,
}

impl Drop for Seat<'_> {
    fn drop(&mut self) {
        if let Seat::Taken(count) = self {
            count.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

impl Seat<'_> {
    /// The answer to a request refused by the limit, if this one was.
    pub(super) fn refusal(&self) -> Option<Outcome> {
        matches!(self, Seat::Refused)
            .then(|| Outcome::Respond(faults::injected_error(429, TOO_MANY.to_string(), Some(1))))
    }
}

/// Seats the request `verb` under the limit of `shared`.
pub(super) fn seat(shared: &Shared, verb: Verb) -> Seat<'_> {
    let Some(limit) = shared.max_mutating_in_flight else {
        return Seat::Free;
    };
    if !verb.is_write() {
        return Seat::Free;
    }
    let count = &shared.mutating_in_flight;
    if count.fetch_add(1, Ordering::SeqCst) >= limit {
        count.fetch_sub(1, Ordering::SeqCst);
        return Seat::Refused;
    }
    Seat::Taken(count)
}
