//! The faults a run can be asked to leave out (`CHAOS_WITHOUT`, a
//! comma-separated list of their names): to tell whether a seed that
//! fails with a guard broken fails because of the fault that exercises
//! the guard (docs/reliability.md, "Mutation check"). A fault left out
//! still draws its random numbers, so the rest of the run stays as close
//! to the full one as it can.

/// Which of the faults of the server's lags and reorderings are left out.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Without {
    /// `late-watches`: every kind's watch events on time.
    pub(crate) late_watches: bool,
    /// `paged-lists`: lists in pages of 500 (production's), so no list of
    /// the small cluster is continued from a snapshot or has its token
    /// expired.
    pub(crate) paged_lists: bool,
    /// `ended-watches`: no watch stream ended cleanly.
    pub(crate) ended_watches: bool,
    /// `slow-writes`: no write held two seconds before it commits or
    /// answered two seconds after.
    pub(crate) slow_writes: bool,
    /// `throttling`: no 429 TooManyRequests with Retry-After.
    pub(crate) throttling: bool,
    /// `held-claim-writes`: no claim write held a second (the window
    /// between a bind's volume and claim writes that kills aim at), so
    /// that what the slow writes alone exercise can be told apart.
    pub(crate) held_claim_writes: bool,
}

impl Without {
    /// The names `CHAOS_WITHOUT` takes.
    const NAMES: [&'static str; 6] = [
        "late-watches",
        "paged-lists",
        "ended-watches",
        "slow-writes",
        "throttling",
        "held-claim-writes",
    ];

    /// What `CHAOS_WITHOUT` asks to leave out (nothing when unset); an
    /// unknown name fails the test with the names it takes.
    pub(crate) fn from_env() -> Self {
        let mut without = Self::default();
        let asked = std::env::var("CHAOS_WITHOUT").unwrap_or_default();
        for name in asked.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            let flag = match name {
                "late-watches" => &mut without.late_watches,
                "paged-lists" => &mut without.paged_lists,
                "ended-watches" => &mut without.ended_watches,
                "slow-writes" => &mut without.slow_writes,
                "throttling" => &mut without.throttling,
                "held-claim-writes" => &mut without.held_claim_writes,
                other => panic!(
                    "CHAOS_WITHOUT: no fault {other:?}; the faults are {}",
                    Self::NAMES.join(", ")
                ),
            };
            *flag = true;
        }
        without
    }
}
