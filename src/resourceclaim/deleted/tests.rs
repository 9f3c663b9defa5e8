use super::DeletedPods;

#[test]
fn the_oldest_uid_is_forgotten_when_full() {
    let deleted = DeletedPods::new(2);
    deleted.add("a");
    deleted.add("b");
    deleted.add("a");
    deleted.add("c");
    assert!(!deleted.contains("a"));
    assert!(deleted.contains("b") && deleted.contains("c"));
}
