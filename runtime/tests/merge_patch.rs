//! The merge patch the write door sends, as a property: for any two JSON
//! documents `a` and `b`, applying `diff(a, b)` to `a` as an independent
//! RFC 7386 implementation does (the `json_patch` crate's `merge`) gives
//! `b`; and the diff of a document with itself is nothing. Members whose
//! value is null are left out of the documents: a merge patch cannot set a
//! member to null (null deletes it), and the controllers' objects never
//! hold one. `MERGE_PATCH_CASES` sets the number of cases (default 2,000).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use proptest::prelude::*;
use pv_controller_runtime::merge_patch::diff;
use serde_json::Value;
use serde_json::value::to_raw_value;

fn cases() -> u32 {
    std::env::var("MERGE_PATCH_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2_000)
}

/// Member names from a small set, so two documents share many; some need
/// escaping in JSON.
fn name() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("a".to_string()),
        Just("b".to_string()),
        Just("metadata".to_string()),
        Just("quote\"d".to_string()),
        Just("back\\slash".to_string()),
        Just("é".to_string()),
        "[a-z]{1,3}",
    ]
}

/// Any JSON value but a null member of an object.
fn document() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        // Fractions whose decimal text is short: the encoding round-trips
        // them exactly (long ones lose their last digit in serde_json's
        // fast float parsing, whatever the diff does).
        (-4_000_000i32..4_000_000).prop_map(|n| Value::from(f64::from(n) / 4.0)),
        "[ -~]{0,8}".prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(prop_oneof![inner.clone(), Just(Value::Null)], 0..4)
                .prop_map(Value::Array),
            prop::collection::btree_map(name(), inner, 0..6)
                .prop_map(|members| Value::Object(members.into_iter().collect())),
        ]
    })
}

/// `diff(a, b)` applied to `a` by `json_patch::merge`.
fn patched(a: &Value, b: &Value) -> Value {
    let (before, after) = (to_raw_value(a).unwrap(), to_raw_value(b).unwrap());
    let mut target = a.clone();
    if let Some(patch) = diff(&before, &after) {
        let patch = serde_json::to_value(&patch).unwrap();
        json_patch::merge(&mut target, &patch);
    }
    target
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    #[test]
    fn applying_the_diff_gives_the_second_document(a in document(), b in document()) {
        prop_assert_eq!(patched(&a, &b), b);
    }

    #[test]
    fn a_document_differs_from_itself_in_nothing(a in document()) {
        let raw = to_raw_value(&a).unwrap();
        prop_assert!(diff(&raw, &raw).is_none());
    }

    /// Two objects that share members: the common case of an edit.
    #[test]
    fn an_edited_object_round_trips(
        a in prop::collection::btree_map(name(), document(), 0..8),
        changes in prop::collection::btree_map(name(), prop::option::of(document()), 0..4),
    ) {
        let before = Value::Object(a.clone().into_iter().collect());
        let mut edited = a;
        for (member, change) in changes {
            match change {
                Some(value) => edited.insert(member, value),
                None => edited.remove(&member),
            };
        }
        let after = Value::Object(edited.into_iter().collect());
        prop_assert_eq!(patched(&before, &after), after);
    }
}
