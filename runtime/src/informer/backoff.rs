//! The retry delays of a broken watch: client-go's reflector backoff (as
//! kube's `default_backoff`), with its jitter drawn from
//! [`ambient`](crate::ambient), so a simulation replays it from its seed.
//!
//! 800 ms, doubling up to 30 s, each delay stretched by a random share of
//! itself so watchers do not retry in step; back to 800 ms once the watch
//! has gone 120 s without a failure.

use std::time::Duration;

use kube::runtime::utils::{Backoff, ResetTimerBackoff};

use crate::ambient;

/// The first delay.
const MIN_DELAY: Duration = Duration::from_millis(800);
/// The longest delay.
const MAX_DELAY: Duration = Duration::from_secs(30);
/// How long a watch must go without a failure for the delays to start
/// over.
const RESET_AFTER: Duration = Duration::from_secs(120);

/// Exponential delays with jitter, without the reset.
#[derive(Debug, Clone)]
pub struct Exponential {
    next: Duration,
}

impl Exponential {
    fn new() -> Self {
        Self { next: MIN_DELAY }
    }
}

impl Iterator for Exponential {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        let delay = self.next;
        self.next = (delay * 2).min(MAX_DELAY);
        Some(delay + ambient::random_fraction_of(delay))
    }
}

impl Backoff for Exponential {
    fn reset(&mut self) {
        self.next = MIN_DELAY;
    }
}

/// The backoff of every watch of the process.
pub type WatchBackoff = ResetTimerBackoff<Exponential>;

/// A new backoff for one watch: `watcher(..).backoff(watch_backoff())`.
pub fn watch_backoff() -> WatchBackoff {
    ResetTimerBackoff::new(Exponential::new(), RESET_AFTER)
}

#[cfg(test)]
mod tests;
