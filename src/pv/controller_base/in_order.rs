//! Claims reserve their volumes in the order they left the queue, however
//! many workers sync them.
//!
//! Each claim worker holds a [`Turn`] from the queue; before its claim's
//! search it waits until every earlier turn has reserved (or passed), then
//! reserves and passes the turn on. So two claims that fit one volume get
//! it oldest first, exactly as one worker syncing them one by one would,
//! while the searches never run inside the queue's lock. A sync that
//! searches for no volume (its claim is bound, or names its volume) skips
//! its turn: it neither waits for the claims ahead nor holds up the ones
//! behind, so the turns a storm's own watch events queue cost nothing. A
//! turn whose
//! worker stops (its future dropped) counts as passed. A pass wakes only the
//! worker whose turn comes next, so a hundred workers cost no more a claim
//! than a few.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::Notify;

use crate::runtime::queue::Turn;

#[derive(Debug, Default)]
struct State {
    /// The turn whose holder may go now.
    next: u64,
    /// Later turns already passed, out of order.
    passed: BTreeSet<u64>,
    /// The workers waiting, by their turn.
    waiting: HashMap<u64, Arc<Notify>>,
}

/// The turnstile of one queue's workers.
#[derive(Debug, Default)]
pub(super) struct InOrder {
    state: Mutex<State>,
}

/// A turn that may go now; passed on when dropped.
pub(super) struct Going<'a> {
    in_order: &'a InOrder,
    turn: u64,
}

impl Drop for Going<'_> {
    fn drop(&mut self) {
        self.in_order.pass(self.turn);
    }
}

impl InOrder {
    fn lock(&self) -> MutexGuard<'_, State> {
        // Every change leaves the state whole, so a poisoned lock is used
        // as it is.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Waits until every turn before `turn` has passed; the turn passes
    /// when the returned guard is dropped.
    pub(super) async fn wait(&self, turn: Turn) -> Going<'_> {
        // Made first, so that a wait given up (the worker stopped) passes
        // the turn as well.
        let going = Going {
            in_order: self,
            turn: turn.0,
        };
        let woken = {
            let mut state = self.lock();
            if state.next >= turn.0 {
                return going;
            }
            Arc::clone(state.waiting.entry(turn.0).or_default())
        };
        loop {
            // A wake-up sent before this wait is kept for it.
            woken.notified().await;
            if self.lock().next >= turn.0 {
                return going;
            }
        }
    }

    /// Passes `turn` without waiting for the turns before it: for a sync
    /// that reserves nothing, so that it never waits on the claims ahead.
    pub(super) fn skip(&self, turn: Turn) {
        self.pass(turn.0);
    }

    fn pass(&self, turn: u64) {
        let mut state = self.lock();
        state.waiting.remove(&turn);
        if turn < state.next {
            return;
        }
        state.passed.insert(turn);
        loop {
            let next = state.next;
            if !state.passed.remove(&next) {
                break;
            }
            state.next = next + 1;
        }
        let next = state.waiting.get(&state.next).map(Arc::clone);
        drop(state);
        if let Some(next) = next {
            next.notify_one();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::future::Future;
    use std::pin::Pin;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::{Context, Poll};

    use super::*;

    #[tokio::test]
    async fn turns_go_in_order_whatever_order_they_arrive_in() {
        let in_order = Arc::new(InOrder::default());
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        for turn in [3, 1, 2, 0] {
            let (in_order, order) = (Arc::clone(&in_order), Arc::clone(&order));
            tasks.push(tokio::spawn(async move {
                let _going = in_order.wait(Turn(turn)).await;
                order.lock().expect("order").push(turn);
            }));
            tokio::task::yield_now().await;
        }
        for task in tasks {
            task.await.expect("task");
        }
        assert_eq!(*order.lock().expect("order"), [0, 1, 2, 3]);
    }

    /// Counts the polls of the future it wraps.
    struct Counted<F> {
        polls: Arc<AtomicUsize>,
        inner: Pin<Box<F>>,
    }

    impl<F: Future> Future for Counted<F> {
        type Output = F::Output;

        fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
            self.polls.fetch_add(1, Ordering::Relaxed);
            self.inner.as_mut().poll(cx)
        }
    }

    /// Sixty-four workers wait, the later turns first; each pass wakes the
    /// one worker whose turn comes next, not every worker still waiting
    /// (which made the cost of a claim grow with the number of workers).
    #[tokio::test]
    async fn a_pass_wakes_only_the_turn_that_comes_next() {
        const WAITING: u64 = 64;
        let in_order = Arc::new(InOrder::default());
        let polls = Arc::new(AtomicUsize::new(0));
        let first = in_order.wait(Turn(0)).await;
        let mut tasks = Vec::new();
        for turn in (1..=WAITING).rev() {
            let in_order = Arc::clone(&in_order);
            tasks.push(tokio::spawn(Counted {
                polls: Arc::clone(&polls),
                inner: Box::pin(async move { drop(in_order.wait(Turn(turn)).await) }),
            }));
        }
        for _ in 0..4 {
            tokio::task::yield_now().await;
        }
        let registered = polls.load(Ordering::Relaxed);
        assert_eq!(registered, 64, "every worker polled once and waiting");
        drop(first);
        for task in tasks {
            task.await.expect("task");
        }
        let woken = polls.load(Ordering::Relaxed) - registered;
        assert_eq!(woken, 64, "one wake-up a turn, {woken} polls in all");
    }

    /// A skipped turn neither waits for the turns before it nor holds up
    /// the ones after it.
    #[tokio::test]
    async fn a_skipped_turn_waits_for_nothing_and_holds_up_nothing() {
        let in_order = InOrder::default();
        let first = in_order.wait(Turn(0)).await;
        in_order.skip(Turn(1));
        drop(first);
        let third =
            tokio::time::timeout(std::time::Duration::from_secs(1), in_order.wait(Turn(2))).await;
        assert!(third.is_ok(), "turn 1 was skipped: passed");
    }

    #[tokio::test]
    async fn a_dropped_turn_counts_as_passed() {
        let in_order = InOrder::default();
        drop(in_order.wait(Turn(0)).await);
        {
            // Turn 2 waits for 1, then gives up.
            let waiting = in_order.wait(Turn(2));
            tokio::pin!(waiting);
            assert!(
                tokio::time::timeout(std::time::Duration::from_millis(10), &mut waiting)
                    .await
                    .is_err()
            );
        }
        drop(in_order.wait(Turn(1)).await);
        let third =
            tokio::time::timeout(std::time::Duration::from_secs(1), in_order.wait(Turn(3))).await;
        assert!(third.is_ok(), "turn 2 was dropped while waiting: passed");
    }
}
