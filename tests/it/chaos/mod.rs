//! The chaos suite: seeded runs of two controller replicas against memapi
//! while a share of all requests fail (409, 429 with Retry-After, 500,
//! 503, timeouts, connections dropped before and after the commit), watch
//! streams are cut and the history compacted (in-stream 410 Gone), the
//! leader is killed at random points (also between the volume and the
//! claim write of a bind, and right after it created a recycler pod) or
//! stopped cleanly, storage fails, and users create, delete and re-create
//! claims, delete volumes, pre-bind volumes and let recycler pods linger;
//! beside them, pods with ResourceClaims from a template are created,
//! placed by a scheduler that allocates their claims, run, finish and are
//! deleted, users delete claims in use, and claim deletes and finalizer
//! removals fail often.
//! Then the faults stop and the state must settle, within a bound, to one
//! that keeps every invariant of the design ([`settled`] and [`history`]).
//!
//! The [`model`] test runs random action sequences without faults against
//! a reference model of the settled state.
//!
//! `CHAOS_SEEDS` (default 200) sets how many seeds `chaos::seeds` runs,
//! from `CHAOS_SEED_START` (default 0); a failing seed is printed with the
//! command that replays it alone:
//! `CHAOS_SEED=<n> cargo test --test it chaos::replay -- --nocapture`
//! (with `RUST_LOG=info` to see the replicas' logs).

mod claims;
mod faults;
mod history;
mod kubelet;
mod model;
mod replicas;
mod run;
mod settled;
mod world;

use std::time::Instant;

use faults::Survived;

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Runs one seed on its own paused-time runtime.
fn run_seed(seed: u64) -> run::Outcome {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .expect("runtime");
    runtime.block_on(run::run(seed))
}

/// The report of failed seeds, each with its replay command.
fn failures(outcomes: &[(u64, run::Outcome)]) -> Vec<String> {
    outcomes
        .iter()
        .filter(|(_, o)| !o.problems.is_empty())
        .map(|(seed, o)| {
            format!(
                "seed {seed} failed:\n    {}\n  replay: CHAOS_SEED={seed} cargo test --test it chaos::replay -- --nocapture",
                o.problems.join("\n    ")
            )
        })
        .collect()
}

#[test]
fn seeds() {
    let count = env_u64("CHAOS_SEEDS", 200);
    let first = env_u64("CHAOS_SEED_START", 0);
    let started = Instant::now();
    // Two threads: the seeds are independent and each is single-threaded.
    let outcomes: Vec<(u64, run::Outcome)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..2)
            .map(|lane| {
                scope.spawn(move || {
                    (first..first + count)
                        .filter(|seed| seed % 2 == lane)
                        .map(|seed| (seed, run_seed(seed)))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().expect("chaos worker"))
            .collect()
    });
    let mut total = Survived::default();
    for (_, outcome) in &outcomes {
        total.merge(&outcome.survived);
    }
    println!(
        "chaos: {count} seeds from {first} in {:.1?} (fault rate {:.0}%), survived:\n{}",
        started.elapsed(),
        run::FAULT_RATE * 100.0,
        total.table()
    );
    let failed = failures(&outcomes);
    assert!(
        failed.is_empty(),
        "{} seed(s) failed:\n{}",
        failed.len(),
        failed.join("\n")
    );
}

#[test]
fn replay() {
    let seed = env_u64("CHAOS_SEED", 0);
    // `RUST_LOG=info` (or any filter) shows the replicas' logs.
    if let Ok(filter) = std::env::var("RUST_LOG") {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_test_writer()
            .try_init();
    }
    let outcome = run_seed(seed);
    println!("chaos seed {seed} survived:\n{}", outcome.survived.table());
    let failed = failures(&[(seed, outcome)]);
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}
