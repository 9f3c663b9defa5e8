//! The write limit's path through a storm (`--limit-path`): the
//! controller's `/metrics` read every [`PERIOD`] while the storm runs,
//! each reading one point: seconds since the controller started, the write
//! door's limit and the writes in flight (absent from a build without
//! them), writes and 429 answers a second since the reading before, and
//! the writes' mean latency by Little's law (writes in flight ÷ writes a
//! second).

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::cold::{admin_address, get, series};

/// How often the controller's metrics are read.
pub(crate) const PERIOD: Duration = Duration::from_millis(250);

/// The readings so far; reading stops when it is dropped.
pub(crate) struct LimitPath {
    points: Arc<Mutex<Vec<Value>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for LimitPath {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl LimitPath {
    /// Starts reading the metrics of the controller logging to `log`,
    /// started at `start`.
    pub(crate) fn start(log: PathBuf, start: Instant) -> Self {
        let points = Arc::new(Mutex::new(Vec::new()));
        let kept = Arc::clone(&points);
        let task = tokio::spawn(async move {
            let Some(address) = admin_address(&log, start).await else {
                eprintln!("limit path: no metrics address in the controller's log");
                return;
            };
            let mut ticker = tokio::time::interval(PERIOD);
            let mut before: Option<(Instant, f64, f64)> = None;
            loop {
                ticker.tick().await;
                let Some(metrics) = get(&address, "/metrics").await else {
                    continue;
                };
                let now = Instant::now();
                let writes = series(&metrics, "pv_controller_api_writes_total", "").unwrap_or(0.0);
                let refused = series(&metrics, "pv_controller_api_requests_total", "code=\"429\"")
                    .unwrap_or(0.0);
                let in_flight = series(&metrics, "pv_controller_api_writes_in_flight", "");
                let rates = before.map(|(then, written, turned_away)| {
                    let seconds = now.duration_since(then).as_secs_f64();
                    (
                        (writes - written) / seconds,
                        (refused - turned_away) / seconds,
                    )
                });
                before = Some((now, writes, refused));
                let latency_ms = match (in_flight, rates) {
                    (Some(in_flight), Some((rate, _))) if rate > 0.0 => {
                        Some(in_flight / rate * 1000.0)
                    }
                    _ => None,
                };
                kept.lock().expect("points").push(json!({
                    "t": now.duration_since(start).as_secs_f64(),
                    "limit": series(&metrics, "pv_controller_api_write_limit", ""),
                    "in_flight": in_flight,
                    "writes_per_second": rates.map(|(writes, _)| writes),
                    "refused_per_second": rates.map(|(_, refused)| refused),
                    "latency_ms": latency_ms,
                }));
            }
        });
        Self { points, task }
    }

    /// The points read so far.
    pub(crate) fn points(&self) -> Value {
        Value::Array(self.points.lock().expect("points").clone())
    }
}
