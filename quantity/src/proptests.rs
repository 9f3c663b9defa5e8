//! Property tests of the parser: any string is answered without a panic;
//! quantities built from the grammar parse to the value computed
//! independently; what [`Amount`]'s `Display` prints parses back to the
//! same amount. `QUANTITY_CASES` sets the number of cases (default 20,000).

use proptest::prelude::*;

use super::Amount;

/// Suffixes with their value as `10^decimal * 2^binary`.
const SUFFIXES: [(&str, i32, u32); 17] = [
    ("", 0, 0),
    ("n", -9, 0),
    ("u", -6, 0),
    ("m", -3, 0),
    ("k", 3, 0),
    ("M", 6, 0),
    ("G", 9, 0),
    ("T", 12, 0),
    ("Ki", 0, 10),
    ("Mi", 0, 20),
    ("Gi", 0, 30),
    ("Ti", 0, 40),
    ("e3", 3, 0),
    ("E-2", -2, 0),
    ("e0", 0, 0),
    ("e+4", 4, 0),
    ("E-12", -12, 0),
];

fn cases() -> u32 {
    std::env::var("QUANTITY_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000)
}

/// The value in nano-units of `int.frac` times the suffix, rounded away
/// from zero, computed with plain integer arithmetic on small inputs.
fn reference(int: u64, frac: &str, decimal: i32, binary: u32) -> i128 {
    let frac_len = i32::try_from(frac.len()).unwrap_or(0);
    let digits: i128 = format!("{int}{frac}").parse().unwrap_or(0);
    let mut value = digits * (1i128 << binary);
    let exp = decimal - frac_len + 9;
    if exp >= 0 {
        value *= 10i128.pow(exp.unsigned_abs());
        value
    } else {
        let divisor = 10i128.pow(exp.unsigned_abs());
        (value + divisor - 1) / divisor
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: cases(),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn any_string_is_answered(input in any::<String>()) {
        let _ = Amount::parse(&input);
    }

    #[test]
    fn near_misses_are_answered(input in "[ +\\-]?[0-9]{0,40}(\\.[0-9]{0,40})?([a-zA-Z]{0,3}[+\\-]?[0-9]{0,25})? ?") {
        if let Ok(amount) = Amount::parse(&input) {
            prop_assert_eq!(Amount::parse(&amount.to_string()), Ok(amount));
        }
    }

    #[test]
    fn grammar_values_are_exact(
        int in 0u64..1_000_000,
        frac in "[0-9]{0,6}",
        suffix in 0..SUFFIXES.len(),
        negative in any::<bool>(),
    ) {
        let (text, decimal, binary) = SUFFIXES[suffix];
        let sign = if negative { "-" } else { "" };
        let dot = if frac.is_empty() { String::new() } else { format!(".{frac}") };
        let input = format!("{sign}{int}{dot}{text}");
        let magnitude = reference(int, &frac, decimal, binary);
        let expected = if negative { -magnitude } else { magnitude };
        let parsed = Amount::parse(&input);
        prop_assert_eq!(parsed.as_ref().map(|a| a.nanos()), Ok(expected), "{}", input);
        if let Ok(amount) = parsed {
            prop_assert_eq!(Amount::parse(&amount.to_string()), Ok(amount));
        }
    }
}
