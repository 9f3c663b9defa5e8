use super::*;

#[test]
fn a_long_message_is_cut_to_the_event_limit_at_a_character() {
    let short = "no persistent volumes available".to_string();
    assert_eq!(bounded(short.clone()), short);
    let long = format!("{}é{}", "a".repeat(1021), "b".repeat(500));
    let cut = bounded(long);
    assert!(cut.len() <= EVENT_MESSAGE_LIMIT, "{}", cut.len());
    assert!(cut.ends_with('…'));
}
