//! klog's `-v`: which lines a level lets through (see the module above).

use std::fmt;

use tracing::field::{Field, Visit};
use tracing::level_filters::LevelFilter;
use tracing::subscriber::Interest;
use tracing::{Event, Level, Metadata};
use tracing_subscriber::layer::{Context, Filter};

/// The level of informational lines that carry no `v` field.
const DEFAULT_INFO_LEVEL: u8 = 2;
/// The level of debug lines.
const DEBUG_LEVEL: u8 = 4;
/// The level of trace lines.
const TRACE_LEVEL: u8 = 5;

/// The klog level of an event: its `v` field if it has one, else by its
/// `tracing` level (errors and warnings 0, information 2, debug 4, trace
/// 5).
pub fn klog_level(event: &Event<'_>) -> u8 {
    match *event.metadata().level() {
        Level::ERROR | Level::WARN => 0,
        Level::INFO => {
            let mut found = VField(None);
            event.record(&mut found);
            found.0.unwrap_or(DEFAULT_INFO_LEVEL)
        }
        Level::DEBUG => DEBUG_LEVEL,
        Level::TRACE => TRACE_LEVEL,
    }
}

/// Reads an event's `v` field.
struct VField(Option<u8>);

impl Visit for VField {
    fn record_u64(&mut self, field: &Field, value: u64) {
        if field.name() == "v" {
            self.0 = Some(u8::try_from(value).unwrap_or(u8::MAX));
        }
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        if field.name() == "v" {
            self.0 = Some(u8::try_from(value.max(0)).unwrap_or(u8::MAX));
        }
    }

    fn record_debug(&mut self, _: &Field, _: &dyn fmt::Debug) {}
}

/// The lines klog level `level` (`-v`) lets through: those of its level
/// and below. Spans always pass, so their fields reach the lines within.
#[derive(Debug, Clone, Copy)]
pub struct Verbosity {
    level: u8,
}

impl Verbosity {
    /// The filter of `-v level`.
    pub fn new(level: u8) -> Self {
        Self { level }
    }

    /// The most verbose `tracing` level that can pass.
    fn max_level(self) -> LevelFilter {
        match self.level {
            l if l >= TRACE_LEVEL => LevelFilter::TRACE,
            l if l >= DEBUG_LEVEL => LevelFilter::DEBUG,
            _ => LevelFilter::INFO,
        }
    }

    /// Whether information lines need their `v` field read: below the
    /// default level some of them pass and some do not.
    fn reads_v(self) -> bool {
        self.level < DEFAULT_INFO_LEVEL
    }
}

impl<S> Filter<S> for Verbosity {
    fn enabled(&self, metadata: &Metadata<'_>, _: &Context<'_, S>) -> bool {
        metadata.is_span() || *metadata.level() <= self.max_level()
    }

    fn callsite_enabled(&self, metadata: &'static Metadata<'static>) -> Interest {
        if metadata.is_span() {
            Interest::always()
        } else if *metadata.level() > self.max_level() {
            Interest::never()
        } else if *metadata.level() == Level::INFO && self.reads_v() {
            Interest::sometimes()
        } else {
            Interest::always()
        }
    }

    fn event_enabled(&self, event: &Event<'_>, _: &Context<'_, S>) -> bool {
        !self.reads_v() || klog_level(event) <= self.level
    }

    fn max_level_hint(&self) -> Option<LevelFilter> {
        Some(self.max_level())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use tracing_subscriber::Layer;
    use tracing_subscriber::layer::SubscriberExt;

    use super::*;

    /// Collects the messages of the events that pass.
    #[derive(Clone, Default)]
    struct Seen(Arc<Mutex<Vec<String>>>);

    impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Seen {
        fn on_event(&self, event: &Event<'_>, _: Context<'_, S>) {
            struct Message(String);
            impl Visit for Message {
                fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
                    if field.name() == "message" {
                        self.0 = format!("{value:?}");
                    }
                }
            }
            let mut message = Message(String::new());
            event.record(&mut message);
            self.0.lock().unwrap().push(message.0);
        }
    }

    fn seen_at(level: u8) -> Vec<String> {
        let seen = Seen::default();
        let subscriber =
            tracing_subscriber::registry().with(seen.clone().with_filter(Verbosity::new(level)));
        tracing::subscriber::with_default(subscriber, || {
            tracing::error!("error");
            tracing::warn!("warning");
            tracing::info!(v = 0, "version");
            tracing::info!(v = 1, "one");
            tracing::info!("phase change");
            tracing::debug!("debug");
            tracing::trace!("trace");
        });
        seen.0.lock().unwrap().clone()
    }

    #[test]
    fn each_level_lets_through_its_lines_and_those_below() {
        assert_eq!(seen_at(0), ["error", "warning", "version"]);
        assert_eq!(seen_at(1), ["error", "warning", "version", "one"]);
        assert_eq!(
            seen_at(2),
            ["error", "warning", "version", "one", "phase change"]
        );
        assert_eq!(seen_at(3), seen_at(2));
        assert_eq!(
            seen_at(4),
            [
                "error",
                "warning",
                "version",
                "one",
                "phase change",
                "debug"
            ]
        );
        assert_eq!(
            seen_at(5),
            [
                "error",
                "warning",
                "version",
                "one",
                "phase change",
                "debug",
                "trace"
            ]
        );
    }
}
