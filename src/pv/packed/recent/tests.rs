use super::*;

#[test]
fn recent_keeps_the_last_objects_by_key() {
    let recent: Recent<String, u32> = Recent::default();
    recent.put("a".to_owned(), Arc::new(1));
    recent.put("a".to_owned(), Arc::new(2));
    assert_eq!(recent.get("a").as_deref(), Some(&2));
    recent.forget("a");
    assert_eq!(recent.get("a"), None);
    for i in 0..=RECENT {
        recent.put(i.to_string(), Arc::new(u32::try_from(i).expect("small")));
    }
    assert_eq!(recent.get("0"), None, "the oldest is dropped");
    assert_eq!(recent.get("1").as_deref(), Some(&1));
    assert_eq!(recent.len(), RECENT);
}

#[test]
fn a_key_put_again_is_dropped_by_its_last_put() {
    let recent: Recent<String, u32> = Recent::new(3);
    recent.put("a".to_owned(), Arc::new(1));
    recent.put("b".to_owned(), Arc::new(2));
    recent.put("a".to_owned(), Arc::new(3));
    recent.put("c".to_owned(), Arc::new(4));
    recent.put("d".to_owned(), Arc::new(5));
    assert_eq!(recent.get("b"), None, "b was put longest ago");
    assert_eq!(recent.get("a").as_deref(), Some(&3));
    for i in 0..1000 {
        recent.put("a".to_owned(), Arc::new(i));
    }
    assert_eq!(recent.len(), 3);
    assert!(recent.slots().order.len() <= 6, "stale stamps are dropped");
    assert_eq!(recent.get("c").as_deref(), Some(&4));
    assert_eq!(recent.get("d").as_deref(), Some(&5));
}
