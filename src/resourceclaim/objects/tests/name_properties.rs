//! A generated claim's `generateName` for any pod and entry name: at most
//! [`MAX_GENERATE_NAME`] bytes, ending in '-', the same for the same
//! names; with the API server's random suffix, a valid name.

use proptest::prelude::*;

use super::*;

fn is_dns_subdomain(name: &str) -> bool {
    let alphanumeric = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    name.len() <= 253
        && name.split('.').all(|label| {
            label.starts_with(alphanumeric)
                && label.ends_with(alphanumeric)
                && label.chars().all(|c| alphanumeric(c) || c == '-')
        })
}

fn pod_name() -> impl Strategy<Value = String> {
    prop::collection::vec("[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", 1..8)
        .prop_map(|labels| labels.join("."))
        .prop_filter("a valid name", |name| name.len() <= 253)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]

    #[test]
    fn the_generate_name_is_bounded_and_makes_valid_names(
        pod in pod_name(),
        entry in "[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?",
        suffix in "[a-z0-9]{5}",
    ) {
        let prefix = generate_name(&pod, &entry);
        prop_assert!(prefix.len() <= MAX_GENERATE_NAME, "{}", prefix);
        prop_assert!(prefix.ends_with('-'));
        prop_assert_eq!(generate_name(&pod, &entry), prefix.clone());
        let name = format!("{prefix}{suffix}");
        prop_assert!(is_dns_subdomain(&name), "{}", name);
    }
}
