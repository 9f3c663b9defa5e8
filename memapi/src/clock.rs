//! memapi's wall clock: the system's, or, on a thread under
//! [`simulate_clock`], one that starts at a fixed time and moves with
//! tokio's (paused) clock, so the timestamps a simulated run stores
//! (creation, deletion, phase transitions, managed fields) are the same on
//! every replay.

use std::cell::Cell;
use std::marker::PhantomData;

use k8s_openapi::jiff::{SignedDuration, Timestamp};

thread_local! {
    /// The simulated clock of this thread: its start, and tokio's time then.
    static SIMULATED: Cell<Option<(Timestamp, tokio::time::Instant)>> = const { Cell::new(None) };
}

/// The current time: simulated on a thread under [`simulate_clock`], the
/// system's otherwise.
pub(crate) fn now() -> Timestamp {
    SIMULATED
        .get()
        .and_then(|(start, since)| {
            let elapsed = tokio::time::Instant::now().saturating_duration_since(since);
            start
                .checked_add(SignedDuration::try_from(elapsed).ok()?)
                .ok()
        })
        .unwrap_or_else(Timestamp::now)
}

/// Makes memapi's clock on this thread start at `start` and move with
/// tokio's clock until the returned guard is dropped. Call it inside the
/// (paused) runtime the server is used from.
pub fn simulate_clock(start: Timestamp) -> SimulatedClock {
    SIMULATED.set(Some((start, tokio::time::Instant::now())));
    SimulatedClock {
        _thread: PhantomData,
    }
}

/// A simulated clock in force on this thread; dropping it brings back the
/// system's.
#[must_use = "the simulated clock ends when this is dropped"]
pub struct SimulatedClock {
    /// Bound to the thread whose clock it sets.
    _thread: PhantomData<*const ()>,
}

impl Drop for SimulatedClock {
    fn drop(&mut self) {
        SIMULATED.set(None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test(start_paused = true)]
    async fn a_simulated_clock_moves_with_tokio_time() {
        let clock = simulate_clock(Timestamp::UNIX_EPOCH);
        assert_eq!(now(), Timestamp::UNIX_EPOCH);
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert_eq!(now().as_second(), 5);
        drop(clock);
        assert!(now() > Timestamp::from_second(1_700_000_000).unwrap());
    }
}
