//! Exact parsing of Kubernetes resource quantities (`"1Gi"`, `"500M"`,
//! `"1.5e3"`, `"100m"`) into integers, so that capacities and requests are
//! compared as numbers and never as strings.
//!
//! The grammar and rounding follow apimachinery's `ParseQuantity`:
//!
//! - an optional sign, digits with an optional fraction (`"1."` and `".5"`
//!   are accepted, as upstream does), then a suffix;
//! - binary suffixes `Ki Mi Gi Ti Pi Ei`, decimal suffixes `n u m k M G T P E`
//!   (none means units), or a decimal exponent `e<int>` / `E<int>`;
//! - a non-zero amount smaller than one nano-unit is rounded away from zero to
//!   one nano-unit ("if you asked for some, you get some");
//! - an amount written with a binary suffix is capped at `2^63 - 1` units.
//!
//! Two deliberate differences: surrounding whitespace is trimmed (as
//! `Quantity`'s JSON decoding does) and a string without any digit (`"-"`,
//! `"."`) is an error, where upstream reads it as zero.
//!
//! A crate of its own because both sides of the workspace read quantities:
//! the controller (capacities and requests, when matching and binding) and
//! memapi (its validation and admission compare requests), and neither may
//! depend on the other.

use std::fmt;
use std::str::FromStr;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

/// Nano-units in one unit: the finest step a Kubernetes quantity can express.
const NANOS_PER_UNIT: i128 = 1_000_000_000;

/// Largest amount, in units, that upstream keeps for a binary-suffixed quantity.
const BINARY_CAP_UNITS: i128 = i64::MAX as i128;

/// A quantity string that could not be read, with the string as given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("quantity {input:?} {kind}")]
pub struct QuantityError {
    /// The string as given.
    pub input: String,
    /// What is wrong with it.
    pub kind: QuantityErrorKind,
}

/// What is wrong with a quantity string.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum QuantityErrorKind {
    /// The string is empty (or only whitespace).
    #[error("is empty")]
    Empty,
    /// The string does not have the shape `[sign]digits[.digits][suffix]`.
    #[error("is not a number with an optional suffix")]
    Malformed,
    /// The number is followed by something that is not a known suffix.
    #[error("has an unknown suffix")]
    UnknownSuffix,
    /// The amount is too large to be held exactly.
    #[error("is too large")]
    Overflow,
}

/// An exact resource amount, held as a whole number of nano-units.
///
/// Ordering and equality are numeric: `"1Gi" > "1G"`, `"0.5Gi" == "512Mi"`,
/// `"1e3" == "1k"`, which is what upstream's `Quantity.Cmp` decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Amount {
    nanos: i128,
}

impl Amount {
    /// The zero amount: what upstream reads for a missing `storage` entry.
    pub const ZERO: Amount = Amount { nanos: 0 };

    /// Reads a quantity string exactly (see the module documentation).
    pub fn parse(input: &str) -> Result<Self, QuantityError> {
        parse(input)
    }

    /// Reads the string inside a k8s-openapi `Quantity`.
    pub fn from_quantity(quantity: &Quantity) -> Result<Self, QuantityError> {
        parse(&quantity.0)
    }

    /// The amount in nano-units, exactly.
    pub fn nanos(self) -> i128 {
        self.nanos
    }

    /// The amount in whole units (bytes, for storage), rounded up, so that a
    /// size derived from it is never smaller than what was asked for.
    pub fn bytes_ceil(self) -> i128 {
        let whole = self.nanos.div_euclid(NANOS_PER_UNIT);
        if self.nanos.rem_euclid(NANOS_PER_UNIT) == 0 {
            whole
        } else {
            whole + 1
        }
    }
}

impl FromStr for Amount {
    type Err = QuantityError;

    fn from_str(input: &str) -> Result<Self, Self::Err> {
        parse(input)
    }
}

/// Shows the exact amount in units, with a fraction only when there is one
/// (`1073741824`, `0.5`, `-0.001`), for messages and events.
impl fmt::Display for Amount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sign = if self.nanos < 0 { "-" } else { "" };
        let magnitude = self.nanos.unsigned_abs();
        let unit = NANOS_PER_UNIT.unsigned_abs();
        let (whole, fraction) = (magnitude / unit, magnitude % unit);
        if fraction == 0 {
            write!(f, "{sign}{whole}")
        } else {
            let digits = format!("{fraction:09}");
            write!(f, "{sign}{whole}.{}", digits.trim_end_matches('0'))
        }
    }
}

/// What a suffix multiplies the number by: `10^decimal * 2^binary`.
struct Scale {
    decimal: i64,
    binary: u32,
}

fn suffix_scale(suffix: &str) -> Option<Scale> {
    let decimal = |decimal| Some(Scale { decimal, binary: 0 });
    let binary = |binary| Some(Scale { decimal: 0, binary });
    match suffix {
        "" => decimal(0),
        "n" => decimal(-9),
        "u" => decimal(-6),
        "m" => decimal(-3),
        "k" => decimal(3),
        "M" => decimal(6),
        "G" => decimal(9),
        "T" => decimal(12),
        "P" => decimal(15),
        "E" => decimal(18),
        "Ki" => binary(10),
        "Mi" => binary(20),
        "Gi" => binary(30),
        "Ti" => binary(40),
        "Pi" => binary(50),
        "Ei" => binary(60),
        _ => exponent_scale(suffix),
    }
}

/// `e<int>` or `E<int>` with an optional sign on the integer.
fn exponent_scale(suffix: &str) -> Option<Scale> {
    let rest = suffix.strip_prefix(['e', 'E'])?;
    let digits = rest.strip_prefix(['+', '-']).unwrap_or(rest);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let decimal = rest.parse::<i64>().ok()?;
    Some(Scale { decimal, binary: 0 })
}

/// `10^exp` when it fits in a u128 (exp <= 38).
fn pow10(exp: u64) -> Option<u128> {
    u32::try_from(exp).ok().and_then(|e| 10u128.checked_pow(e))
}

fn parse(input: &str) -> Result<Amount, QuantityError> {
    let error = |kind| QuantityError {
        input: input.to_owned(),
        kind,
    };
    let malformed = || error(QuantityErrorKind::Malformed);
    let overflow = || error(QuantityErrorKind::Overflow);
    let text = input.trim();
    if text.is_empty() {
        return Err(error(QuantityErrorKind::Empty));
    }

    let (negative, unsigned) = match (text.strip_prefix('-'), text.strip_prefix('+')) {
        (Some(rest), _) => (true, rest),
        (None, Some(rest)) => (false, rest),
        (None, None) => (false, text),
    };
    let int_len = unsigned.bytes().take_while(u8::is_ascii_digit).count();
    let (int_digits, after_int) = unsigned.split_at(int_len);
    let (frac_digits, suffix) = match after_int.strip_prefix('.') {
        Some(after_dot) => {
            let frac_len = after_dot.bytes().take_while(u8::is_ascii_digit).count();
            after_dot.split_at(frac_len)
        }
        None => ("", after_int),
    };
    if int_digits.is_empty() && frac_digits.is_empty() {
        return Err(malformed());
    }
    let scale = suffix_scale(suffix).ok_or_else(|| error(QuantityErrorKind::UnknownSuffix))?;

    // The value is mantissa * 10^(scale.decimal - fraction digits) * 2^binary;
    // trailing zeros of the fraction carry no value and are dropped first.
    let frac_digits = frac_digits.trim_end_matches('0');
    let mut mantissa: u128 = 0;
    for digit in int_digits.bytes().chain(frac_digits.bytes()) {
        mantissa = mantissa
            .checked_mul(10)
            .and_then(|m| m.checked_add(u128::from(digit - b'0')))
            .ok_or_else(overflow)?;
    }
    if mantissa == 0 {
        return Ok(Amount::ZERO);
    }
    let scaled = mantissa
        .checked_mul(1u128 << scale.binary)
        .ok_or_else(overflow)?;
    let frac_len = i64::try_from(frac_digits.len()).map_err(|_| overflow())?;
    let nano_exp = scale
        .decimal
        .checked_sub(frac_len)
        .and_then(|e| e.checked_add(9))
        .ok_or_else(overflow)?;

    let mut nanos: u128 = if nano_exp >= 0 {
        pow10(nano_exp.unsigned_abs())
            .and_then(|p| scaled.checked_mul(p))
            .ok_or_else(overflow)?
    } else {
        match pow10(nano_exp.unsigned_abs()) {
            // Round away from zero to the next nano-unit, as upstream does.
            Some(divisor) => scaled.div_ceil(divisor),
            // The divisor exceeds any u128, so the value is below one nano-unit.
            None => 1,
        }
    };
    let cap = (BINARY_CAP_UNITS * NANOS_PER_UNIT).unsigned_abs();
    if scale.binary > 0 && nanos > cap {
        nanos = cap;
    }
    let magnitude = i128::try_from(nanos).map_err(|_| overflow())?;
    Ok(Amount {
        nanos: if negative { -magnitude } else { magnitude },
    })
}

#[cfg(test)]
mod proptests;

#[cfg(test)]
mod tests {
    use super::*;

    fn amount(s: &str) -> Amount {
        match Amount::parse(s) {
            Ok(a) => a,
            Err(e) => panic!("{s:?} should parse: {e}"),
        }
    }

    #[test]
    fn reads_suffixes_exactly() {
        let cases: &[(&str, i128)] = &[
            ("0", 0),
            ("1", NANOS_PER_UNIT),
            ("1Ki", 1024 * NANOS_PER_UNIT),
            ("1Gi", (1 << 30) * NANOS_PER_UNIT),
            ("1.5Gi", 1_610_612_736 * NANOS_PER_UNIT),
            ("1G", 1_000_000_000 * NANOS_PER_UNIT),
            ("1k", 1000 * NANOS_PER_UNIT),
            ("100m", 100_000_000),
            ("1u", 1000),
            ("1n", 1),
            ("1e3", 1000 * NANOS_PER_UNIT),
            ("1E3", 1000 * NANOS_PER_UNIT),
            ("1e+3", 1000 * NANOS_PER_UNIT),
            ("15e-1", 1_500_000_000),
            ("-2k", -2000 * NANOS_PER_UNIT),
            ("+2k", 2000 * NANOS_PER_UNIT),
            (".5", 500_000_000),
            ("1.", NANOS_PER_UNIT),
            (" 1Ki ", 1024 * NANOS_PER_UNIT),
            ("1.000000", NANOS_PER_UNIT),
            ("000012", 12 * NANOS_PER_UNIT),
        ];
        for (input, nanos) in cases {
            assert_eq!(amount(input).nanos(), *nanos, "{input}");
        }
    }

    #[test]
    fn compares_numerically() {
        assert!(amount("1Gi") > amount("1G"));
        assert!(amount("500Mi") < amount("1Gi"));
        assert_eq!(amount("0.5Gi"), amount("512Mi"));
        assert_eq!(amount("1e3"), amount("1k"));
        assert!(amount("10G") > amount("9G"));
        assert!(amount("800E") > amount("200E"));
        assert!(amount("950E") > amount("800E"));
        assert!(amount("-1") < amount("0"));
    }

    #[test]
    fn rounds_below_a_nano_away_from_zero() {
        assert_eq!(amount("0.1n"), amount("1n"));
        assert_eq!(amount("1.5n").nanos(), 2);
        assert_eq!(amount("-0.1n").nanos(), -1);
        assert_eq!(amount("1e-40").nanos(), 1);
        assert_eq!(amount("0e-40"), Amount::ZERO);
    }

    #[test]
    fn caps_binary_suffixes_like_upstream() {
        assert_eq!(amount("16Ei"), amount("9223372036854775807"));
        assert!(amount("7Ei") < amount("16Ei"));
        assert!(amount("16E") > amount("16Ei"));
    }

    #[test]
    fn rounds_bytes_up() {
        assert_eq!(amount("1Gi").bytes_ceil(), 1 << 30);
        assert_eq!(amount("100m").bytes_ceil(), 1);
        assert_eq!(amount("-100m").bytes_ceil(), 0);
        assert_eq!(Amount::ZERO.bytes_ceil(), 0);
    }

    #[test]
    fn displays_exact_units() {
        assert_eq!(amount("1Ki").to_string(), "1024");
        assert_eq!(amount("0.5").to_string(), "0.5");
        assert_eq!(amount("-1m").to_string(), "-0.001");
    }

    #[test]
    fn rejects_bad_input() {
        use QuantityErrorKind::*;
        let cases = [
            ("", Empty),
            ("   ", Empty),
            ("abc", Malformed),
            ("-", Malformed),
            (".", Malformed),
            ("+", Malformed),
            ("--1", Malformed),
            ("Gi", Malformed),
            ("1K", UnknownSuffix),
            ("1Q", UnknownSuffix),
            ("1.2.3", UnknownSuffix),
            ("1e", UnknownSuffix),
            ("1e+", UnknownSuffix),
            ("1 Gi", UnknownSuffix),
            ("1gi", UnknownSuffix),
            ("1e40", Overflow),
            ("1000000000000000000000000000000000000000000", Overflow),
            ("1e99999999999", Overflow),
        ];
        for (bad, kind) in cases {
            assert_eq!(
                Amount::parse(bad),
                Err(QuantityError {
                    input: bad.into(),
                    kind
                }),
                "{bad:?}"
            );
        }
        let message = Amount::parse("1Q").err().map(|e| e.to_string());
        assert_eq!(
            message.as_deref(),
            Some("quantity \"1Q\" has an unknown suffix")
        );
    }

    #[test]
    fn reads_k8s_openapi_quantities() {
        let q = Quantity("2Mi".into());
        assert_eq!(Amount::from_quantity(&q), Ok(amount("2048Ki")));
        assert_eq!("3k".parse::<Amount>(), Ok(amount("3000")));
    }
}
