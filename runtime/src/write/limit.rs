//! How many writes the door lets be in flight at once.
//!
//! While the API server takes every write, the door holds none back: the
//! writes in flight are at most as many as the controllers' workers, whose
//! flags are the ceiling. When the server turns a write away as overloaded
//! (429 Too Many Requests, as its in-flight limit or API Priority and
//! Fairness sheds load; 503 Service Unavailable; 504, a write it could not
//! finish in time), sending as many again would only be turned away again,
//! each refusal failing a sync that then waits out its backoff, and each
//! 429 pausing the whole client for its `Retry-After`
//! ([`crate::ratelimit`]). So the door learns what the server takes:
//!
//! - A refusal halves the writes let be in flight at once, at once. One cut
//!   a round: the writes in flight at the cut were sent under the old limit,
//!   and their refusals do not cut it again.
//! - Those writes then tell how many the server took at once: once all are
//!   answered, the limit is at most the number of them it served, and that
//!   number is the limit's ceiling for [`CEILING_HELD`].
//! - Each round of writes answered grows the limit by one (additive
//!   increase, multiplicative decrease, as TCP paces a connection), up to
//!   the ceiling while it holds; past it, once the server has refused
//!   nothing for that long, so that a server that takes more again is found
//!   again, at the price of a refusal (and its pause) when it does not.
//! - The limit is never below one write, and once it has grown back to the
//!   most writes the process ever had in flight at once, it is lifted.
//! - A write held back waits before it is sent: it holds its object's write
//!   lock and its change, no connection (a plan's writes let go of the
//!   copies they were made on before their first is sent).
//!
//! The limit in force is the gauge `pv_controller_api_write_limit`.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use prometheus::IntGauge;
use tokio::sync::Notify;
use tokio::time::Instant;

/// How long the writes the server took at once when it last refused bound
/// the limit: asking for more costs a refusal, and a 429's pause of the
/// whole client, when the server still does not take them.
const CEILING_HELD: Duration = Duration::from_secs(30);

/// How a write ended, as the limit learns from it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ended {
    /// The server answered, short of overload (an error such as a 409
    /// included): a round of these grows a cut limit by one.
    Answered,
    /// The server turned the write away as overloaded, with this status
    /// code (429, 503 or 504).
    Overloaded(u16),
    /// It failed apart from the server's answer (a lost connection, an
    /// encoding error): tells nothing about the server's load.
    Failed,
}

impl Ended {
    /// How the write whose result is `result` ended.
    pub fn of<T>(result: &Result<T, kube::Error>) -> Self {
        match result {
            Err(kube::Error::Api(status)) if matches!(status.code, 429 | 503 | 504) => {
                Self::Overloaded(status.code)
            }
            Ok(_) | Err(kube::Error::Api(_)) => Self::Answered,
            Err(_) => Self::Failed,
        }
    }
}

/// The door's limit on writes in flight. Cheap to clone; clones share it.
#[derive(Clone)]
pub struct WriteLimit {
    inner: Arc<Inner>,
}

struct Inner {
    state: Mutex<State>,
    /// Wakes a write held back when one ends or the limit grows.
    freed: Notify,
    /// `pv_controller_api_write_limit`.
    gauge: IntGauge,
}

struct State {
    /// The limit in force, unrounded; `None` while the server has turned no
    /// write away since the limit was last lifted.
    limit: Option<f64>,
    in_flight: usize,
    /// The most writes in flight at once so far.
    most: usize,
    /// Counts the cuts; a write sent before the last one does not cut again.
    cuts: u64,
    /// The writes in flight at the last cut, until all are answered.
    settling: Option<Settling>,
    /// The writes the server took at once when it last refused, and when.
    ceiling: Option<(usize, Instant)>,
}

/// The writes in flight when the limit was last cut.
struct Settling {
    /// How many are still in flight.
    outstanding: usize,
    /// How many the server served.
    served: usize,
}

impl State {
    /// How many writes may be in flight at once now.
    fn allowed(&self) -> usize {
        match self.limit {
            // `limit` stays between one and `most`, both `usize`.
            Some(limit) => (limit.floor() as usize).max(1),
            None => usize::MAX,
        }
    }

    /// What the gauge shows: the limit in force, or the most writes in
    /// flight at once while none is.
    fn shown(&self) -> i64 {
        let shown = match self.limit {
            Some(_) => self.allowed(),
            None => self.most,
        };
        i64::try_from(shown).unwrap_or(i64::MAX)
    }

    /// Halves the limit for a refusal with `code`, and starts settling the
    /// writes in flight.
    fn cut(&mut self, code: u16) {
        let before = self.limit.unwrap_or(self.in_flight as f64);
        self.limit = Some((before / 2.0).max(1.0));
        self.cuts += 1;
        self.settling = Some(Settling {
            outstanding: self.in_flight,
            served: 0,
        });
        tracing::warn!(
            code,
            limit = self.allowed(),
            "the API server turned a write away as overloaded: writes in flight limited"
        );
    }

    /// Counts the end of a write in flight at the last cut; once all have
    /// ended, what the server served of them bounds the limit.
    fn settle(&mut self, served: bool, now: Instant) {
        let Some(settling) = &mut self.settling else {
            return;
        };
        settling.outstanding = settling.outstanding.saturating_sub(1);
        settling.served += usize::from(served);
        if settling.outstanding > 0 {
            return;
        }
        let took = settling.served.max(1);
        self.settling = None;
        self.ceiling = Some((took, now));
        if let Some(limit) = &mut self.limit {
            *limit = limit.min(took as f64);
        }
    }

    /// Grows the limit by one a round of answers, up to the ceiling while
    /// it holds; lifts it once it reaches the most ever in flight. Returns
    /// whether it was lifted.
    fn grow(&mut self, now: Instant) -> bool {
        let Some(limit) = self.limit else {
            return false;
        };
        let mut grown = limit + 1.0 / limit;
        match self.ceiling {
            Some((took, since)) if now.duration_since(since) < CEILING_HELD => {
                grown = grown.min((took as f64).max(limit));
            }
            _ => self.ceiling = None,
        }
        if grown >= self.most as f64 {
            self.limit = None;
            self.ceiling = None;
            return true;
        }
        self.limit = Some(grown);
        false
    }
}

impl WriteLimit {
    /// No limit yet; the limit in force is shown on `gauge`.
    pub fn new(gauge: IntGauge) -> Self {
        gauge.set(0);
        Self {
            inner: Arc::new(Inner {
                state: Mutex::new(State {
                    limit: None,
                    in_flight: 0,
                    most: 0,
                    cuts: 0,
                    settling: None,
                    ceiling: None,
                }),
                freed: Notify::new(),
                gauge,
            }),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.inner
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Waits until the limit lets one more write be in flight, and counts
    /// it in flight until the returned [`Admitted`] is dropped.
    pub async fn admit(&self) -> Admitted {
        loop {
            let freed = self.inner.freed.notified();
            let mut freed = std::pin::pin!(freed);
            // Registered before the check, so a write ending between the
            // check and the wait is not missed.
            freed.as_mut().enable();
            if let Some(admitted) = self.try_admit() {
                return admitted;
            }
            freed.await;
        }
    }

    /// Counts one more write in flight if the limit lets it.
    fn try_admit(&self) -> Option<Admitted> {
        let mut state = self.state();
        if state.in_flight >= state.allowed() {
            return None;
        }
        state.in_flight += 1;
        if state.in_flight > state.most {
            state.most = state.in_flight;
            self.inner.gauge.set(state.shown());
        }
        Some(Admitted {
            limit: self.clone(),
            cuts: state.cuts,
        })
    }

    /// The writes the limit lets be in flight at once now; `None` while no
    /// limit is in force.
    pub fn allowed(&self) -> Option<usize> {
        let state = self.state();
        state.limit.map(|_| state.allowed())
    }

    /// Learns from a write admitted after `cuts` cuts that ended as
    /// `outcome`.
    fn learn(&self, cuts: u64, outcome: Ended) {
        let now = Instant::now();
        let mut state = self.state();
        let before = state.allowed();
        if let Ended::Overloaded(code) = outcome
            && cuts == state.cuts
        {
            state.cut(code);
        }
        if cuts < state.cuts {
            state.settle(outcome == Ended::Answered, now);
        }
        // A round at the limit in force grows it; writes sent before the
        // cut are the last round's.
        if outcome == Ended::Answered && cuts == state.cuts && state.grow(now) {
            tracing::info!(
                most = state.most,
                "the API server takes the writes again: writes in flight no longer limited"
            );
            self.inner.freed.notify_waiters();
        } else if state.allowed() > before {
            self.inner.freed.notify_one();
        }
        self.inner.gauge.set(state.shown());
    }

    fn release(&self) {
        self.state().in_flight -= 1;
        self.inner.freed.notify_one();
    }
}

/// A write the limit let through, counted in flight until dropped; tell
/// the limit how it ended with [`Admitted::ended`].
pub struct Admitted {
    limit: WriteLimit,
    /// The limit's cuts when the write was let through.
    cuts: u64,
}

impl Admitted {
    /// Tells the limit how the write ended, and stops counting it.
    pub fn ended(self, outcome: Ended) {
        self.limit.learn(self.cuts, outcome);
    }
}

impl Drop for Admitted {
    fn drop(&mut self) {
        self.limit.release();
    }
}

#[cfg(test)]
mod tests;
