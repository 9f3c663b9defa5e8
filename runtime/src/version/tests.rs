use super::*;

fn meta(version: &str, uid: &str) -> ObjectMeta {
    ObjectMeta {
        resource_version: Some(version.to_string()),
        uid: Some(uid.to_string()),
        ..ObjectMeta::default()
    }
}

#[test]
fn versions_compare_as_numbers_across_incarnations() {
    assert_eq!(age(&meta("9", "a"), &meta("10", "a")), Age::Newer);
    assert_eq!(age(&meta("10", "a"), &meta("10", "a")), Age::Same);
    assert_eq!(age(&meta("10", "a"), &meta("9", "a")), Age::Older);
    // A late event of an earlier incarnation does not replace the
    // later one: its version is older.
    assert_eq!(age(&meta("12", "new"), &meta("8", "old")), Age::Older);
    assert_eq!(age(&meta("8", "old"), &meta("12", "new")), Age::Newer);
}

#[test]
fn a_version_that_is_not_a_number_is_replaced_by_what_comes_last() {
    assert_eq!(age(&meta("x", "a"), &meta("3", "a")), Age::Newer);
    assert_eq!(age(&meta("3", "a"), &meta("x", "a")), Age::Newer);
}
