//! Value parsers of the flags that are neither durations nor booleans
//! (those are `component_base`'s): counts of at least one, a rate that
//! cannot be negative, a name that cannot be empty. Each error
//! completes clap's `invalid value 'X' for '--flag <type>': ...`.

use std::str::FromStr;

/// A whole number of at least 1: a count of workers, connections or
/// threads, where 0 would leave the work undone.
pub(super) fn at_least_one<T>(value: &str) -> Result<T, String>
where
    T: FromStr + PartialOrd + From<u8>,
{
    let number: T = value
        .parse()
        .map_err(|_| "not a whole number (1 or more)".to_string())?;
    if number < T::from(1) {
        return Err("must be 1 or more".to_string());
    }
    Ok(number)
}

/// A rate of requests a second: 0 or more (0: no client-side limit).
pub(super) fn non_negative_rate(value: &str) -> Result<f64, String> {
    match value.parse::<f64>() {
        Ok(rate) if rate.is_finite() && rate >= 0.0 => Ok(rate),
        _ => Err("must be a number of 0 or more (0: no limit)".to_string()),
    }
}

/// A name that cannot be empty.
pub(super) fn not_empty(value: &str) -> Result<String, String> {
    if value.trim().is_empty() {
        return Err("must not be empty".to_string());
    }
    Ok(value.to_string())
}

#[cfg(test)]
mod tests;
