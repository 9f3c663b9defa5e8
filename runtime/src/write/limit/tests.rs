use super::*;

use futures::FutureExt;

fn limit() -> (WriteLimit, IntGauge) {
    let gauge = IntGauge::new("limit", "limit").unwrap();
    (WriteLimit::new(gauge.clone()), gauge)
}

/// Admits `n` writes, each of which must pass at once.
fn admit_now(limit: &WriteLimit, n: usize) -> Vec<Admitted> {
    (0..n)
        .map(|i| {
            limit
                .admit()
                .now_or_never()
                .unwrap_or_else(|| panic!("write {i} of {n} held back"))
        })
        .collect()
}

fn held_back(limit: &WriteLimit) -> bool {
    limit.admit().now_or_never().is_none()
}

const TOO_MANY: Ended = Ended::Overloaded(429);

#[test]
fn no_write_is_held_back_until_the_server_turns_one_away() {
    let (limit, gauge) = limit();
    let admitted = admit_now(&limit, 300);
    assert_eq!(limit.allowed(), None);
    assert_eq!(gauge.get(), 300, "the most in flight at once");
    for write in admitted {
        write.ended(Ended::Answered);
    }
    assert_eq!(limit.allowed(), None);
}

#[test]
fn a_refusal_halves_the_writes_in_flight_at_once_and_once_a_round() {
    let (limit, gauge) = limit();
    let mut round = admit_now(&limit, 40);
    round.pop().unwrap().ended(TOO_MANY);
    assert_eq!(limit.allowed(), Some(20));
    assert_eq!(gauge.get(), 20);
    // The others were sent before the cut: their refusals cut no more.
    for _ in 0..5 {
        round.pop().unwrap().ended(Ended::Overloaded(503));
    }
    assert_eq!(limit.allowed(), Some(20));
}

#[tokio::test(start_paused = true)]
async fn the_writes_in_flight_at_a_cut_tell_what_the_server_takes_for_a_while() {
    let (limit, gauge) = limit();
    let mut round = admit_now(&limit, 40);
    for _ in 0..30 {
        round.pop().unwrap().ended(TOO_MANY);
    }
    assert_eq!(limit.allowed(), Some(20), "halved at the first refusal");
    for write in round {
        write.ended(Ended::Answered);
    }
    assert_eq!(limit.allowed(), Some(10), "the server served ten of forty");
    assert_eq!(gauge.get(), 10);
    // Rounds answered do not grow it past what the server took...
    for _ in 0..5 {
        let round = admit_now(&limit, 10);
        assert!(held_back(&limit));
        for write in round {
            write.ended(Ended::Answered);
        }
    }
    assert_eq!(limit.allowed(), Some(10));
    // ... until it has refused nothing for a while.
    tokio::time::advance(CEILING_HELD).await;
    for _ in 0..2 {
        let allowed = limit.allowed().unwrap();
        for write in admit_now(&limit, allowed) {
            write.ended(Ended::Answered);
        }
    }
    assert_eq!(limit.allowed(), Some(11), "one more a round, about");
}

#[test]
fn the_limit_is_never_below_one_write() {
    let (limit, _) = limit();
    for _ in 0..10 {
        let write = admit_now(&limit, 1).pop().unwrap();
        write.ended(TOO_MANY);
    }
    assert_eq!(limit.allowed(), Some(1));
    let one = admit_now(&limit, 1);
    assert!(held_back(&limit));
    drop(one);
    admit_now(&limit, 1);
}

#[tokio::test(start_paused = true)]
async fn answered_writes_grow_the_limit_by_one_a_round_until_it_is_lifted() {
    let (limit, gauge) = limit();
    let mut first = admit_now(&limit, 16);
    first.pop().unwrap().ended(TOO_MANY);
    for write in first {
        write.ended(Ended::Answered);
    }
    assert_eq!(limit.allowed(), Some(8), "halved; the server took 15");
    tokio::time::advance(CEILING_HELD).await;
    let mut rounds = 0;
    while let Some(allowed) = limit.allowed() {
        let round = admit_now(&limit, allowed);
        assert!(held_back(&limit), "no more than {allowed} at once");
        for write in round {
            write.ended(Ended::Answered);
        }
        rounds += 1;
        assert!(rounds <= 16, "grows by about one a round");
    }
    assert!(
        rounds >= 8,
        "{rounds} rounds from 8 back to 16: one a round at most"
    );
    assert_eq!(gauge.get(), 16, "lifted: the most in flight at once");
    admit_now(&limit, 100);
}

#[test]
fn a_write_that_failed_apart_from_the_server_neither_cuts_nor_counts_as_served() {
    let (limit, _) = limit();
    for write in admit_now(&limit, 8) {
        write.ended(Ended::Failed);
    }
    assert_eq!(limit.allowed(), None);
    let mut round = admit_now(&limit, 8);
    round.pop().unwrap().ended(TOO_MANY);
    assert_eq!(limit.allowed(), Some(4));
    for _ in 0..4 {
        round.pop().unwrap().ended(Ended::Failed);
    }
    for write in round {
        write.ended(Ended::Answered);
    }
    assert_eq!(limit.allowed(), Some(3), "three of eight served");
}

#[tokio::test]
async fn a_write_held_back_goes_once_another_ends() {
    let (limit, _) = limit();
    for write in admit_now(&limit, 2) {
        write.ended(TOO_MANY);
    }
    assert_eq!(limit.allowed(), Some(1));
    let first = admit_now(&limit, 1).pop().unwrap();
    let mut waiting = std::pin::pin!(limit.admit());
    assert!(futures::poll!(waiting.as_mut()).is_pending());
    first.ended(Ended::Answered);
    assert!(futures::poll!(waiting.as_mut()).is_ready());
}

#[tokio::test(start_paused = true)]
async fn writes_held_back_all_go_once_the_limit_is_lifted() {
    let (limit, _) = limit();
    let mut first = admit_now(&limit, 2);
    first.pop().unwrap().ended(TOO_MANY);
    first.pop().unwrap().ended(Ended::Answered);
    assert_eq!(limit.allowed(), Some(1));
    let last = admit_now(&limit, 1).pop().unwrap();
    let mut one = std::pin::pin!(limit.admit());
    let mut two = std::pin::pin!(limit.admit());
    assert!(futures::poll!(one.as_mut()).is_pending());
    assert!(futures::poll!(two.as_mut()).is_pending());
    // Past the ceiling's hold, a round of one answered grows the limit
    // from one to two, the most ever in flight: it is lifted, and both
    // held writes go.
    tokio::time::advance(CEILING_HELD).await;
    last.ended(Ended::Answered);
    assert_eq!(limit.allowed(), None);
    assert!(futures::poll!(one.as_mut()).is_ready());
    assert!(futures::poll!(two.as_mut()).is_ready());
}
