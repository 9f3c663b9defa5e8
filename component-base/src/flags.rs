//! Boolean flags as Go's flag package takes them: `--flag` alone is
//! true, `--flag=false` false; the value goes after `=`, never after a
//! space (a word after a space is an argument, not the flag's value).
//! Declare one with clap as
//! `#[arg(long, num_args = 0..=1, require_equals = true, default_value = "false",
//! default_missing_value = "true", value_parser = go_bool)]`.

/// A boolean as Go's `strconv.ParseBool` reads one (`1`, `t`, `T`,
/// `true`, `TRUE`, `True`, and their opposites).
pub fn go_bool(value: &str) -> Result<bool, String> {
    match value {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Ok(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Ok(false),
        _ => Err("not a boolean (true or false)".to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn booleans_read_as_go_reads_them() {
        for yes in ["1", "t", "T", "true", "TRUE", "True"] {
            assert_eq!(go_bool(yes), Ok(true), "{yes}");
        }
        for no in ["0", "f", "F", "false", "FALSE", "False"] {
            assert_eq!(go_bool(no), Ok(false), "{no}");
        }
        for not in ["yes", "on", ""] {
            assert!(go_bool(not).is_err(), "{not}");
        }
    }
}
