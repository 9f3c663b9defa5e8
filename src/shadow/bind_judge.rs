//! The binder as the judge of binds and of its operations: shadow mode
//! asks it whether another volume is as good as the one it chose for a
//! claim, what it would have chosen for a claim the other controller bound
//! first, and what a recycle or delete it would start shows first.

use super::{BindJudge, Choice};
use crate::pv::Binder;

/// Binds judged by `binder`'s rules, on the claims and volumes it knows.
pub(crate) fn judge_binds_by(binder: &Binder) -> BindJudge {
    let (for_equivalent, for_operations, binder) = (binder.clone(), binder.clone(), binder.clone());
    BindJudge {
        equivalent: Box::new(move |key, ours, other| for_equivalent.equally_good(key, ours, other)),
        would_bind: Box::new(move |key, taken| {
            binder
                .would_bind(key, taken)
                .map(|chosen| chosen.map_or(Choice::Pending, Choice::Bind))
        }),
        foresee: Box::new(move |kind, object| for_operations.foresee(kind, object)),
    }
}
