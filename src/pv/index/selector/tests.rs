use super::*;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
        .collect()
}

fn expression(key: &str, operator: &str, values: &[&str]) -> LabelSelectorRequirement {
    LabelSelectorRequirement {
        key: key.to_string(),
        operator: operator.to_string(),
        values: Some(values.iter().map(ToString::to_string).collect()),
    }
}

/// In, NotIn, Exists, DoesNotExist and matchLabels, each with a label
/// that is there and one that is not, as upstream's selectors judge.
#[test]
fn each_operator_judges_as_upstream() {
    let selector = |expressions: Vec<LabelSelectorRequirement>| {
        Selector::compile(&LabelSelector {
            match_expressions: Some(expressions),
            match_labels: None,
        })
        .unwrap()
    };
    let ssd = labels(&[("disk", "ssd")]);
    let hdd = labels(&[("disk", "hdd")]);
    let none = labels(&[]);
    let cases = [
        (
            expression("disk", "In", &["ssd", "nvme"]),
            [true, false, false],
        ),
        (
            expression("disk", "NotIn", &["ssd", "nvme"]),
            [false, true, true],
        ),
        (expression("disk", "Exists", &[]), [true, true, false]),
        (
            expression("disk", "DoesNotExist", &[]),
            [false, false, true],
        ),
    ];
    for (requirement, expected) in cases {
        let compiled = selector(vec![requirement.clone()]);
        let judged = [&ssd, &hdd, &none].map(|l| compiled.matches_labels(Some(l)));
        assert_eq!(judged, expected, "{requirement:?}");
        assert_eq!(
            compiled.matches_labels(None),
            expected[2],
            "no labels at all: {requirement:?}"
        );
    }
    let by_label = Selector::compile(&LabelSelector {
        match_labels: Some([("disk".to_string(), "ssd".to_string())].into()),
        match_expressions: Some(vec![expression("zone", "NotIn", &["b"])]),
    })
    .unwrap();
    assert!(by_label.matches_labels(Some(&ssd)));
    assert!(!by_label.matches_labels(Some(&hdd)));
    assert!(!by_label.matches_labels(Some(&labels(&[("disk", "ssd"), ("zone", "b")]))));
    assert!(selector(vec![]).matches_labels(None), "empty: everything");
}

/// A selector is compiled once whichever claim, or version of a claim,
/// carries it: claims written from one template share it; another
/// selector is compiled on its own.
#[test]
fn a_selector_is_compiled_once_for_every_claim_that_carries_it() {
    let cache = SelectorCache::default();
    let values: Vec<String> = (0..1000).map(|i| format!("rack-{i}")).collect();
    let values: Vec<&str> = values.iter().map(String::as_str).collect();
    let compiled = |name: &str, uid: &str, version: &str, values: &[&str]| {
        let mut claim = testkit::claim(name, uid, "1Gi")
            .selector_expression("rack", "In", values)
            .build();
        claim.metadata.resource_version = Some(version.into());
        cache.of(&claim).unwrap().unwrap()
    };
    let first = compiled("a", "uid-a", "7", &values);
    let newer = compiled("a", "uid-a", "8", &values);
    let other = compiled("b", "uid-b", "9", &values);
    assert!(Arc::ptr_eq(&first, &newer), "a new version of the claim");
    assert!(
        Arc::ptr_eq(&first, &other),
        "another claim, the same selector"
    );
    assert_eq!(cache.len(), 1);
    assert!(first.matches_labels(Some(&labels(&[("rack", "rack-999")]))));
    assert!(!first.matches_labels(Some(&labels(&[("rack", "rack-1000")]))));
    let fewer = compiled("c", "uid-c", "10", &values[..10]);
    assert!(
        !Arc::ptr_eq(&first, &fewer),
        "another selector, compiled anew"
    );
    assert!(!fewer.matches_labels(Some(&labels(&[("rack", "rack-999")]))));
    assert_eq!(cache.len(), 2);
}

/// Selectors with any operators and values against any labels: compiling
/// never panics, refuses exactly what upstream's `LabelSelectorAsSelector`
/// refuses, and a compiled selector matches as a plain reading of the
/// requirements does.
mod properties;
