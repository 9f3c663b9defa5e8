use std::collections::{HashMap, VecDeque};

use super::shrink_when_sparse;

#[test]
fn a_map_emptied_key_by_key_gives_its_table_back() {
    let mut map: HashMap<u32, u32> = (0..100_000).map(|i| (i, i)).collect();
    let full = map.capacity();
    for i in 0..99_990 {
        map.remove(&i);
        shrink_when_sparse(map.len(), map.capacity(), |to| map.shrink_to(to));
    }
    assert_eq!(map.len(), 10);
    assert!(
        map.capacity() <= 2 * super::SMALLEST,
        "{} of {full} slots kept",
        map.capacity()
    );
    assert_eq!(map.get(&99_995), Some(&99_995), "what is left stays");
}

#[test]
fn a_busy_or_small_collection_is_left_alone() {
    let mut deque: VecDeque<u32> = (0..10_000).collect();
    let full = deque.capacity();
    for _ in 0..5_000 {
        deque.pop_front();
        shrink_when_sparse(deque.len(), deque.capacity(), |to| deque.shrink_to(to));
    }
    assert_eq!(deque.capacity(), full, "half full: kept");
    let mut small: VecDeque<u32> = VecDeque::with_capacity(1000);
    small.push_back(1);
    shrink_when_sparse(small.len(), small.capacity(), |to| small.shrink_to(to));
    assert!(small.capacity() >= 1000, "small: kept");
}
