//! JSON log lines shaped as kube-controller-manager's
//! (`--logging-format=json`, k8s.io/component-base/logs/json):
//!
//! ```json
//! {"ts":1700000000123.456,"caller":"claim.rs:120","msg":"claim entered phase","v":2,"PVC":{"name":"data","namespace":"demo"},"phase":"Bound"}
//! {"ts":1700000000124.001,"caller":"runner.rs:88","msg":"watch failed","err":"connection refused","kind":"persistentvolume"}
//! ```
//!
//! `ts` is milliseconds since the epoch; an informational line carries its
//! klog level `v`, an error line its error as `err` and no `v`. The keys of
//! the line's spans come first, then its own. The fields naming the
//! objects kube-controller-manager's persistentvolume-binder names are
//! written under its keys, as `klog.KObj` writes an object: `claim` as
//! `PVC` and `volume` as `PV`; those and `pod` and `node` as
//! `{"name": ..., "namespace": ...}` (`NAMESPACE/NAME`, or a name alone).
//! An `error` field is written as `err`.

use std::fmt;
use std::io::Write;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::Value;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::Layer;
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;

use super::verbosity::klog_level;

/// A layer writing each event as one JSON line to `W`'s writer.
#[derive(Debug)]
pub struct KlogJson<W> {
    make_writer: W,
}

impl<W> KlogJson<W> {
    /// Writes to what `make_writer` makes (stderr in the binaries).
    pub fn new(make_writer: W) -> Self {
        Self { make_writer }
    }
}

/// How a field is written.
enum Shape {
    /// As recorded.
    Plain,
    /// As `klog.KObj` writes an object.
    Object,
}

/// The key and shape a field is written with.
fn klog_key(name: &str) -> (&str, Shape) {
    match name {
        "claim" => ("PVC", Shape::Object),
        "volume" => ("PV", Shape::Object),
        "pod" | "node" => (name, Shape::Object),
        "error" => ("err", Shape::Plain),
        _ => (name, Shape::Plain),
    }
}

/// `NAMESPACE/NAME` (or a name alone) as `klog.KObj` writes it.
fn object(reference: &str) -> Value {
    match reference.split_once('/') {
        Some((namespace, name)) => serde_json::json!({"name": name, "namespace": namespace}),
        None => serde_json::json!({ "name": reference }),
    }
}

/// The fields of a span or an event, in order, the message apart.
#[derive(Default)]
struct Fields {
    message: Option<String>,
    pairs: Vec<(String, Value)>,
}

impl Fields {
    fn put(&mut self, field: &Field, value: Value) {
        let name = field.name();
        if name == "message" {
            self.message = Some(match value {
                Value::String(text) => text,
                other => other.to_string(),
            });
            return;
        }
        if name == "v" {
            // The level is written by the line itself.
            return;
        }
        let (key, shape) = klog_key(name);
        let value = match (shape, value) {
            (Shape::Object, Value::String(reference)) => object(&reference),
            (_, value) => value,
        };
        match self.pairs.iter_mut().find(|(k, _)| k == key) {
            Some(pair) => pair.1 = value,
            None => self.pairs.push((key.to_string(), value)),
        }
    }
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.put(field, Value::from(value));
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.put(field, Value::from(value));
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.put(field, Value::from(value));
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.put(field, Value::from(value));
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        self.put(field, Value::from(value));
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.put(field, Value::from(value.to_string()));
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.put(field, Value::from(format!("{value:?}")));
    }
}

impl<S, W> Layer<S> for KlogJson<W>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    W: for<'w> MakeWriter<'w> + 'static,
{
    fn on_new_span(&self, attributes: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut fields = Fields::default();
        attributes.record(&mut fields);
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(fields);
        }
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(id) {
            let mut extensions = span.extensions_mut();
            if let Some(fields) = extensions.get_mut::<Fields>() {
                values.record(fields);
            }
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let mut fields = Fields::default();
        if let Some(scope) = ctx.event_scope(event) {
            for span in scope.from_root() {
                if let Some(spanned) = span.extensions().get::<Fields>() {
                    fields.pairs.extend(spanned.pairs.iter().cloned());
                }
            }
        }
        let mut own = Fields::default();
        event.record(&mut own);
        for (key, value) in own.pairs {
            match fields.pairs.iter_mut().find(|(k, _)| *k == key) {
                Some(pair) => pair.1 = value,
                None => fields.pairs.push((key, value)),
            }
        }
        let line = line(
            SystemTime::now(),
            event,
            own.message.as_deref().unwrap_or_default(),
            &fields.pairs,
        );
        let mut writer = self.make_writer.make_writer();
        // A log line that cannot be written has nowhere to be reported.
        let _ = writer.write_all(line.as_bytes());
    }
}

/// One JSON line (with its newline).
fn line(now: SystemTime, event: &Event<'_>, message: &str, pairs: &[(String, Value)]) -> String {
    let millis = now
        .duration_since(UNIX_EPOCH)
        .map(|since| since.as_secs_f64() * 1000.0)
        .unwrap_or_default();
    let metadata = event.metadata();
    let file = metadata
        .file()
        .map(|path| path.rsplit('/').next().unwrap_or(path));
    let caller = match (file, metadata.line()) {
        (Some(file), Some(line)) => format!("{file}:{line}"),
        (Some(file), None) => file.to_string(),
        _ => metadata.target().to_string(),
    };
    let mut out = String::with_capacity(128);
    out.push_str("{\"ts\":");
    out.push_str(&Value::from(millis).to_string());
    out.push_str(",\"caller\":");
    out.push_str(&Value::from(caller).to_string());
    out.push_str(",\"msg\":");
    out.push_str(&Value::from(message).to_string());
    if *metadata.level() != Level::ERROR {
        out.push_str(",\"v\":");
        out.push_str(&klog_level(event).to_string());
    }
    for (key, value) in pairs {
        out.push(',');
        out.push_str(&Value::from(key.as_str()).to_string());
        out.push(':');
        out.push_str(&value.to_string());
    }
    out.push_str("}\n");
    out
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use tracing_subscriber::layer::SubscriberExt;

    use super::*;

    /// A writer into a shared buffer.
    #[derive(Clone, Default)]
    struct Buffer(Arc<Mutex<Vec<u8>>>);

    impl Write for Buffer {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl<'w> MakeWriter<'w> for Buffer {
        type Writer = Buffer;
        fn make_writer(&'w self) -> Buffer {
            self.clone()
        }
    }

    fn lines(log: impl FnOnce()) -> Vec<Value> {
        let buffer = Buffer::default();
        let subscriber = tracing_subscriber::registry().with(KlogJson::new(buffer.clone()));
        tracing::subscriber::with_default(subscriber, log);
        let text = String::from_utf8(buffer.0.lock().unwrap().clone()).unwrap();
        text.lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect()
    }

    #[test]
    fn an_information_line_is_shaped_as_kube_controller_managers() {
        let lines = lines(|| {
            let span = tracing::info_span!("sync", claim = "demo/data");
            let _entered = span.enter();
            tracing::info!(volume = "pv-1", phase = "Bound", "claim entered phase");
        });
        let line = &lines[0];
        let keys: Vec<&str> = line
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        let mut expected = vec!["ts", "caller", "msg", "v", "PVC", "PV", "phase"];
        expected.sort_unstable();
        let mut sorted = keys.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, expected, "{line}");
        assert!(
            line["ts"].as_f64().unwrap() > 1.6e12,
            "milliseconds: {line}"
        );
        assert!(line["caller"].as_str().unwrap().starts_with("json.rs:"));
        assert_eq!(line["msg"], "claim entered phase");
        assert_eq!(line["v"], 2);
        assert_eq!(
            line["PVC"],
            serde_json::json!({"name": "data", "namespace": "demo"})
        );
        assert_eq!(line["PV"], serde_json::json!({"name": "pv-1"}));
        assert_eq!(line["phase"], "Bound");
    }

    #[test]
    fn levels_and_errors_are_written_as_klog_writes_them() {
        let lines = lines(|| {
            tracing::info!(v = 0, version = "0.1.0", "starting");
            tracing::warn!(pod = "ns/recycler", "slow");
            tracing::debug!("detail");
            tracing::error!(error = "connection refused", "watch failed");
        });
        assert_eq!(lines[0]["v"], 0);
        assert_eq!(lines[0]["version"], "0.1.0");
        assert_eq!(lines[1]["v"], 0);
        assert_eq!(
            lines[1]["pod"],
            serde_json::json!({"name": "recycler", "namespace": "ns"})
        );
        assert_eq!(lines[2]["v"], 4);
        assert!(lines[3].get("v").is_none(), "{}", lines[3]);
        assert_eq!(lines[3]["err"], "connection refused");
        assert_eq!(lines[3]["msg"], "watch failed");
    }
}
