//! Durations in Go's syntax, as every duration flag of a Kubernetes
//! component takes them (`15s`, `1m30s`, `500ms`), and the value parsers
//! that refuse what a flag cannot work with: a period or a timeout of 0
//! would make a timer fire without end, or a request fail at once.
//!
//! The parsers return errors whose text completes clap's own
//! `invalid value '0' for '--flag <duration>': ...`, so the message names
//! the flag and what it accepts.

use std::time::Duration;

/// Why a duration was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason} (a duration such as 15s, 1m30s or 500ms)")]
pub struct DurationError {
    reason: &'static str,
}

impl DurationError {
    fn new(reason: &'static str) -> Self {
        Self { reason }
    }
}

/// The longest duration Go takes (an int64 of nanoseconds, about 292
/// years), in seconds: a flag past it is refused, so no deadline made from
/// a flag overflows a clock.
const MAX_SECONDS: f64 = 9_223_372_036.854_775;

/// Parses a duration in Go's syntax: a sequence of decimal numbers with
/// units `ns`, `us`, `µs`, `ms`, `s`, `m`, `h` (for example `1h2m3.5s`); a
/// bare `0` is zero.
pub fn parse(input: &str) -> Result<Duration, DurationError> {
    let text = input.trim();
    if text == "0" {
        return Ok(Duration::ZERO);
    }
    if text.is_empty() {
        return Err(DurationError::new("empty"));
    }
    let mut total = 0f64;
    let mut rest = text;
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if number_len == 0 {
            return Err(DurationError::new("a number is missing"));
        }
        let value: f64 = rest[..number_len]
            .parse()
            .map_err(|_| DurationError::new("not a number"))?;
        rest = &rest[number_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let seconds_per_unit = match &rest[..unit_len] {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            "" => return Err(DurationError::new("a unit is missing")),
            _ => return Err(DurationError::new("unknown unit")),
        };
        total += value * seconds_per_unit;
        rest = &rest[unit_len..];
    }
    if total > MAX_SECONDS {
        return Err(DurationError::new("longer than 2562047h"));
    }
    Duration::try_from_secs_f64(total).map_err(|_| DurationError::new("longer than 2562047h"))
}

/// Parses a duration that must be more than 0: a period, a timeout, a
/// lease's duration.
pub fn positive(input: &str) -> Result<Duration, DurationError> {
    let duration = parse(input)?;
    if duration.is_zero() {
        return Err(DurationError::new("must be more than 0"));
    }
    Ok(duration)
}

/// Writes `duration` in Go's syntax (`1m30s`, `500ms`, `0s`), as a flag's
/// default is shown.
pub fn format(duration: Duration) -> String {
    let mut nanos = duration.as_nanos();
    if nanos == 0 {
        return "0s".to_string();
    }
    if nanos < 1_000_000_000 {
        return match nanos {
            n if n % 1_000_000 == 0 => format!("{}ms", n / 1_000_000),
            n if n % 1_000 == 0 => format!("{}us", n / 1_000),
            n => format!("{n}ns"),
        };
    }
    let mut out = String::new();
    let hours = nanos / 3_600_000_000_000;
    nanos %= 3_600_000_000_000;
    let minutes = nanos / 60_000_000_000;
    nanos %= 60_000_000_000;
    if hours > 0 {
        out.push_str(&format!("{hours}h"));
    }
    if hours > 0 || minutes > 0 {
        out.push_str(&format!("{minutes}m"));
    }
    let seconds = nanos / 1_000_000_000;
    let fraction = nanos % 1_000_000_000;
    if fraction == 0 {
        out.push_str(&format!("{seconds}s"));
    } else {
        let digits = format!("{fraction:09}");
        out.push_str(&format!("{seconds}.{}s", digits.trim_end_matches('0')));
    }
    out
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn parses_go_durations() {
        assert_eq!(parse("15s").unwrap(), Duration::from_secs(15));
        assert_eq!(parse("1m30s").unwrap(), Duration::from_secs(90));
        assert_eq!(parse("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse("1h").unwrap(), Duration::from_secs(3600));
        assert_eq!(parse("1.5s").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse("0").unwrap(), Duration::ZERO);
        assert_eq!(
            parse("2562047h").unwrap(),
            Duration::from_secs(2_562_047 * 3600),
            "the longest Go takes, about 292 years"
        );
    }

    #[test]
    fn refuses_what_go_refuses() {
        for bad in [
            "",
            "15",
            "s",
            "1x",
            "1m30",
            "-1s",
            "2562048h",
            "9999999999999999h",
        ] {
            assert!(parse(bad).is_err(), "{bad:?} should be refused");
        }
    }

    #[test]
    fn a_positive_duration_is_more_than_zero() {
        assert_eq!(positive("1ms").unwrap(), Duration::from_millis(1));
        for zero in ["0", "0s", "0h0m", "0.0s"] {
            let error = positive(zero).unwrap_err();
            assert_eq!(
                error.to_string(),
                "must be more than 0 (a duration such as 15s, 1m30s or 500ms)",
                "{zero}"
            );
        }
    }

    #[test]
    fn formats_as_go_prints() {
        assert_eq!(format(Duration::ZERO), "0s");
        assert_eq!(format(Duration::from_secs(15)), "15s");
        assert_eq!(format(Duration::from_secs(90)), "1m30s");
        assert_eq!(format(Duration::from_secs(3600)), "1h0m0s");
        assert_eq!(format(Duration::from_millis(500)), "500ms");
        assert_eq!(format(Duration::from_millis(1500)), "1.5s");
    }

    proptest! {
        /// Whatever is written back reads back to the same duration, to
        /// the nanosecond, up to Go's limit.
        #[test]
        fn formats_and_parses_back(nanos in 0u64..=i64::MAX as u64 / 4) {
            let duration = Duration::from_nanos(nanos);
            let text = format(duration);
            let back = parse(&text).unwrap();
            let error = back.abs_diff(duration);
            // Parsing goes through an f64 of seconds: exact to the
            // microsecond below a day, to a part in 10^15 beyond.
            prop_assert!(error <= Duration::from_nanos(nanos / 1_000_000_000_000 + 1), "{text}: {back:?}");
        }

        /// Any text is parsed or refused, never a panic.
        #[test]
        fn never_panics(text in "\\PC{0,24}") {
            let _ = parse(&text);
        }
    }
}
