use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;
use proptest::prelude::*;

use super::*;

/// Keys and values from small sets, so that selectors and labels meet;
/// and anything else.
fn word() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("a".to_string()),
        Just("b".to_string()),
        Just(String::new()),
        ".{0,6}",
    ]
}

fn operator() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("In".to_string()),
        Just("NotIn".to_string()),
        Just("Exists".to_string()),
        Just("DoesNotExist".to_string()),
        ".{0,12}",
    ]
}

fn selector() -> impl Strategy<Value = LabelSelector> {
    let requirement = (
        word(),
        operator(),
        prop::option::of(prop::collection::vec(word(), 0..4)),
    )
        .prop_map(|(key, operator, values)| LabelSelectorRequirement {
            key,
            operator,
            values,
        });
    (
        prop::option::of(prop::collection::btree_map(word(), word(), 0..3)),
        prop::option::of(prop::collection::vec(requirement, 0..4)),
    )
        .prop_map(|(match_labels, match_expressions)| LabelSelector {
            match_labels,
            match_expressions,
        })
}

/// Whether upstream refuses the selector.
fn refused(selector: &LabelSelector) -> bool {
    selector.match_expressions.iter().flatten().any(|e| {
        let values = e.values.as_deref().unwrap_or_default();
        match e.operator.as_str() {
            "In" | "NotIn" => values.is_empty(),
            "Exists" | "DoesNotExist" => !values.is_empty(),
            _ => true,
        }
    })
}

/// The requirements read plainly, one by one.
fn reference(selector: &LabelSelector, labels: Option<&Labels>) -> bool {
    let label = |key: &str| labels.and_then(|l| l.get(key));
    selector
        .match_labels
        .iter()
        .flatten()
        .all(|(k, v)| label(k) == Some(v))
        && selector.match_expressions.iter().flatten().all(|e| {
            let values = e.values.as_deref().unwrap_or_default();
            let label = label(&e.key);
            match e.operator.as_str() {
                "In" => label.is_some_and(|l| values.contains(l)),
                "NotIn" => label.is_none_or(|l| !values.contains(l)),
                "Exists" => label.is_some(),
                _ => label.is_none(),
            }
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]

    #[test]
    fn a_compiled_selector_matches_as_its_requirements_read(
        selector in selector(),
        labels in prop::option::of(prop::collection::btree_map(word(), word(), 0..4)),
    ) {
        match Selector::compile(&selector) {
            Err(_) => prop_assert!(refused(&selector)),
            Ok(compiled) => {
                prop_assert!(!refused(&selector));
                prop_assert_eq!(
                    compiled.matches_labels(labels.as_ref()),
                    reference(&selector, labels.as_ref())
                );
            }
        }
    }
}
