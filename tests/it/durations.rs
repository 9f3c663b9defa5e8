//! Go-style durations of the flags (`1h2m3.5s`, `500ms`), as a property,
//! through the flag parser itself: any text is taken or refused with a
//! message, never a panic; a duration written from components in Go's
//! units parses to their sum (to the nanosecond while the sum is within
//! what an f64 holds to the nanosecond, relatively close beyond).

use clap::Parser;
use proptest::prelude::*;
use pv_controller::Options;

/// `--kube-api-timeout` as the flags take `text`.
fn parsed(text: &str) -> Result<std::time::Duration, String> {
    Options::try_parse_from(["pv-controller", &format!("--kube-api-timeout={text}")])
        .map(|options| options.kube_api_timeout)
        .map_err(|error| error.to_string())
}

/// Components in Go's units, largest first, and their sum in nanoseconds.
fn written() -> impl Strategy<Value = (String, u128)> {
    let units: [(&str, u128); 7] = [
        ("h", 3_600_000_000_000),
        ("m", 60_000_000_000),
        ("s", 1_000_000_000),
        ("ms", 1_000_000),
        ("us", 1_000),
        ("µs", 1_000),
        ("ns", 1),
    ];
    prop::collection::vec((0usize..7, 1u64..100_000), 1..5).prop_map(move |parts| {
        let mut text = String::new();
        let mut total = 0u128;
        for (unit, count) in parts {
            let (name, nanos) = units[unit];
            text.push_str(&format!("{count}{name}"));
            total += u128::from(count) * nanos;
        }
        (text, total)
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]

    #[test]
    fn any_text_is_taken_or_refused_with_a_message(text in ".{0,24}") {
        if let Err(message) = parsed(&text) {
            prop_assert!(message.contains("--kube-api-timeout"), "{}", message);
        }
    }

    #[test]
    fn a_written_duration_parses_to_its_sum((text, total) in written()) {
        let duration = parsed(&text).map_err(TestCaseError::fail)?;
        let got = duration.as_nanos();
        // An f64 holds 53 bits: the sum to the nanosecond up to about 104
        // days, relatively close beyond.
        let tolerance = total >> 50;
        prop_assert!(got.abs_diff(total) <= tolerance, "{} parsed as {}ns, not {}ns", text, got, total);
    }

    #[test]
    fn a_fraction_of_a_unit_is_taken(whole in 1u64..10_000, tenths in 0u64..10) {
        let duration = parsed(&format!("{whole}.{tenths}s")).map_err(TestCaseError::fail)?;
        prop_assert_eq!(duration.as_millis(), u128::from(whole) * 1000 + u128::from(tenths) * 100);
    }
}
