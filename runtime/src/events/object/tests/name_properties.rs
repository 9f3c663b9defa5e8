use proptest::prelude::*;

use super::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]

    #[test]
    fn the_event_name_is_valid_bounded_and_deterministic(
        object in prop_oneof![
            prop::collection::vec("[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", 1..8)
                .prop_map(|labels| labels.join(".")),
            ".{0,300}",
        ],
        nanos in 0i64..i64::MAX,
    ) {
        let at = Timestamp::from_nanosecond(i128::from(nanos)).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let name = event_name(&object, "persistentvolume-controller", at);
        prop_assert!(is_dns_subdomain(&name), "{}", name);
        prop_assert_eq!(event_name(&object, "persistentvolume-controller", at), name);
    }
}
