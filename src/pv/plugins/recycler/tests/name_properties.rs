use proptest::prelude::*;

use super::*;

/// A DNS-1123 subdomain: dot-separated labels of lowercase letters,
/// digits and '-', each starting and ending with a letter or digit.
fn is_dns_subdomain(name: &str) -> bool {
    let alphanumeric = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    name.len() <= MAX_NAME_LEN
        && name.split('.').all(|label| {
            label.starts_with(alphanumeric)
                && label.ends_with(alphanumeric)
                && label.chars().all(|c| alphanumeric(c) || c == '-')
        })
}

/// Valid volume names, many near the length limit.
fn volume_name() -> impl Strategy<Value = String> {
    prop::collection::vec("[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", 1..8)
        .prop_map(|labels| labels.join("."))
        .prop_filter("a valid name", |name| name.len() <= MAX_NAME_LEN)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]

    #[test]
    fn the_pod_name_is_valid_bounded_and_deterministic(volume in volume_name()) {
        let name = pod_name(&volume);
        prop_assert!(is_dns_subdomain(&name), "{}", name);
        prop_assert_eq!(pod_name(&volume), name);
    }

    #[test]
    fn volumes_differing_past_the_cut_get_different_pods(
        stem in "[a-z0-9]{240,250}",
        tails in ("[a-z0-9]{1,3}", "[a-z0-9]{1,3}"),
    ) {
        let (one, two) = (format!("{stem}{}", tails.0), format!("{stem}{}", tails.1));
        prop_assume!(one != two);
        prop_assert_ne!(pod_name(&one), pod_name(&two));
    }
}
