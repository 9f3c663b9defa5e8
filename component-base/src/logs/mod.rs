//! Logging as a Kubernetes component logs: `--logging-format` (`text`, or
//! `json` lines shaped as kube-controller-manager's) and klog's `-v`
//! levels, on `tracing`.
//!
//! klog's levels, as the process maps them: errors, warnings and the
//! lines that say what the process is (its version, what it serves, its
//! leadership) at 0; every other informational line (a phase change, a
//! controller started) at 2; debug lines at 4; trace lines at 5 and above.
//! An informational line says it belongs at a lower level with a field
//! `v` (`tracing::info!(v = 0, ...)`). `RUST_LOG`, when set, wins over
//! `-v`.

mod json;
mod verbosity;

use std::io::IsTerminal;

use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

pub use json::KlogJson;
pub use verbosity::{Verbosity, klog_level};

/// How log lines are written (`--logging-format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LoggingFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line, shaped as kube-controller-manager's
    /// `--logging-format=json`: `ts` (milliseconds since the epoch), `caller`,
    /// `msg`, `v` (or `err` on errors), then the line's keys, objects as
    /// `{"name": ..., "namespace": ...}`.
    Json,
}

/// Why logging could not be set up: a subscriber was already installed.
#[derive(Debug, thiserror::Error)]
#[error("setting up logging: {0}")]
pub struct InitError(#[from] tracing_subscriber::util::TryInitError);

/// Logs to stderr in `format` at klog level `verbosity` (unless `RUST_LOG`
/// is set), text in colour only on a terminal without `NO_COLOR`.
pub fn init(format: LoggingFormat, verbosity: u8) -> Result<(), InitError> {
    let env = std::env::var_os("RUST_LOG").and_then(|_| EnvFilter::try_from_default_env().ok());
    let layer = match format {
        LoggingFormat::Text => tracing_subscriber::fmt::layer()
            .with_ansi(colours(
                std::io::stderr().is_terminal(),
                std::env::var_os("NO_COLOR").as_deref(),
            ))
            .with_writer(std::io::stderr)
            .boxed(),
        LoggingFormat::Json => KlogJson::new(std::io::stderr).boxed(),
    };
    let layer = match env {
        Some(filter) => layer.with_filter(filter).boxed(),
        None => layer.with_filter(Verbosity::new(verbosity)).boxed(),
    };
    Ok(tracing_subscriber::registry().with(layer).try_init()?)
}

/// Whether to colour text logs written to a terminal or not (`terminal`),
/// with `NO_COLOR` as given: colours only on a terminal, and never when
/// `NO_COLOR` is set to a non-empty value (no-color.org).
pub fn colours(terminal: bool, no_color: Option<&std::ffi::OsStr>) -> bool {
    terminal && no_color.is_none_or(std::ffi::OsStr::is_empty)
}

#[cfg(test)]
mod tests {
    use std::ffi::OsStr;

    use super::*;

    #[test]
    fn text_is_coloured_only_on_a_terminal_without_no_color() {
        assert!(colours(true, None));
        assert!(!colours(false, None), "a pipe or a file");
        assert!(!colours(true, Some(OsStr::new("1"))), "NO_COLOR set");
        assert!(colours(true, Some(OsStr::new(""))), "NO_COLOR empty");
    }
}
