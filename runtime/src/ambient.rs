//! What the process takes from its surroundings rather than from the API
//! server: the wall clock (the timestamps of events and of the Lease) and
//! random numbers (the jitter of retries, so that replicas and watchers do
//! not retry in step).
//!
//! A deterministic simulation replaces both on its thread with
//! [`simulate`]: a clock that starts at a fixed time and moves with tokio's
//! clock (paused in a simulation, so it moves only as the run's timers
//! fire), and numbers drawn from a seed. Everything the process does on
//! that thread is then a function of the seed, and a run replays bit for
//! bit. A thread that never calls [`simulate`] reads the system's clock and
//! randomly seeded numbers.

use std::cell::RefCell;
use std::hash::BuildHasher;
use std::marker::PhantomData;
use std::time::Duration;

use k8s_openapi::jiff::{SignedDuration, Timestamp};

/// The simulated surroundings of one thread.
struct Simulated {
    /// The wall-clock time at `since`.
    start: Timestamp,
    /// tokio's time when the simulation began.
    since: tokio::time::Instant,
    /// The state of the seeded generator (SplitMix64).
    state: u64,
}

thread_local! {
    static SIMULATED: RefCell<Option<Simulated>> = const { RefCell::new(None) };
}

/// The current wall-clock time: the simulated clock on a thread under
/// [`simulate`], the system's otherwise.
pub fn now() -> Timestamp {
    SIMULATED
        .with_borrow(|simulated| {
            let simulated = simulated.as_ref()?;
            let elapsed = tokio::time::Instant::now().saturating_duration_since(simulated.since);
            let elapsed = SignedDuration::try_from(elapsed).ok()?;
            simulated.start.checked_add(elapsed).ok()
        })
        .unwrap_or_else(Timestamp::now)
}

/// 64 random bits: drawn from the seed on a thread under [`simulate`],
/// from the standard library's randomly seeded hasher otherwise.
pub fn random_u64() -> u64 {
    SIMULATED
        .with_borrow_mut(|simulated| simulated.as_mut().map(|s| split_mix(&mut s.state)))
        .unwrap_or_else(|| {
            std::collections::hash_map::RandomState::new().hash_one(std::time::Instant::now())
        })
}

/// A random duration in `[0, max)`.
pub fn random_fraction_of(max: Duration) -> Duration {
    // The top 53 bits make a uniform f64 in [0, 1).
    let fraction = (random_u64() >> 11) as f64 / (1u64 << 53) as f64;
    max.mul_f64(fraction)
}

/// Runs this thread in a simulation until the returned guard is dropped:
/// [`now`] starts at `start` and moves with tokio's clock, [`random_u64`]
/// draws from `seed`. Call it inside the (paused) runtime the simulation
/// runs on, so the clock's start is that runtime's time.
pub fn simulate(seed: u64, start: Timestamp) -> Simulation {
    SIMULATED.set(Some(Simulated {
        start,
        since: tokio::time::Instant::now(),
        state: seed,
    }));
    Simulation {
        _thread: PhantomData,
    }
}

/// A simulation in force on this thread; dropping it ends the simulation.
#[must_use = "the simulation ends when this is dropped"]
pub struct Simulation {
    /// Bound to the thread it simulates.
    _thread: PhantomData<*const ()>,
}

impl Drop for Simulation {
    fn drop(&mut self) {
        SIMULATED.set(None);
    }
}

/// One step of SplitMix64.
fn split_mix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests;
