use super::*;

#[test]
fn objects_are_counted_under_their_tallies_until_they_leave() {
    let mut census = Census::default();
    let a = census.enter("a");
    let a2 = census.enter("a");
    let b = census.enter("b");
    assert_eq!(a, a2);
    let mut counts = census.counts();
    counts.sort_unstable();
    assert_eq!(counts, [("a", 2), ("b", 1)]);

    census.leave(a);
    census.leave(b);
    assert_eq!(census.counts(), [("a", 1)]);
    // b's slot is free again, and taken by the next new tally.
    let c = census.enter("c");
    assert_eq!(c, b);
    census.leave(a2);
    assert_eq!(census.counts(), [("c", 1)]);
    assert_eq!(census.ids.len(), 1, "tallies of no object are forgotten");
}
