//! A cold start on the settled cluster the storm left: a second controller
//! process started on it must become ready and sync every object once
//! without a single write (a write on a settled object is a bug); the
//! time to ready, the time until every object was synced, CPU and peak
//! RSS say what a restart of a big cluster's controller costs.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::cluster::Server;
use crate::process::{Controller, Which};

/// How long a cold start may take before the bench gives up on it.
const LIMIT: Duration = Duration::from_secs(600);

/// Starts a controller on `server`'s settled cluster of `n` pairs and
/// reports the cold start.
pub(crate) async fn measure(server: &mut Server, n: usize, extra: &[String], log: &Path) -> Value {
    server.start_counting().await;
    let controller = Controller::start(Which::Ours, server.kubeconfig(), extra, log);
    let start = Instant::now();
    let Some(address) = admin_address(log, start).await else {
        return json!({ "error": "no admin address in the log" });
    };
    let mut ready = None;
    let mut synced_all = None;
    while start.elapsed() < LIMIT {
        if ready.is_none()
            && get(&address, "/readyz")
                .await
                .is_some_and(|r| r.starts_with("HTTP/1.1 200"))
        {
            ready = Some(start.elapsed());
        }
        if ready.is_some() {
            let metrics = get(&address, "/metrics").await.unwrap_or_default();
            if syncs(&metrics) >= 2.0 * n as f64 {
                synced_all = Some(start.elapsed());
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Writes a late sync might make count too.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let writes = server.writes().await;
    json!({
        "seconds_to_ready": ready.map(|d| d.as_secs_f64()),
        "seconds_to_every_object_synced": synced_all.map(|d| d.as_secs_f64()),
        "writes": if writes.known { json!(writes.volume + writes.claim) } else { Value::Null },
        "cpu_seconds": controller.cpu_seconds(),
        "peak_rss_mib": controller.peak_rss_mib(),
    })
}

/// The admin endpoints' address (`/metrics` and the health checks over
/// plain HTTP, as the bench starts the controller), from its log.
pub(crate) async fn admin_address(log: &Path, start: Instant) -> Option<String> {
    while start.elapsed() < LIMIT {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        let found = text
            .lines()
            .find(|l| l.contains("serving the admin endpoints") || l.contains("serving /metrics"))
            .and_then(|l| l.split("address=").nth(1))
            .map(|a| a.trim().to_string());
        if found.is_some() {
            return found;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    None
}

/// The answer to a plain HTTP GET of `path`, head and body.
pub(crate) async fn get(address: &str, path: &str) -> Option<String> {
    let mut stream = TcpStream::connect(address).await.ok()?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.ok()?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await.ok()?;
    Some(answer)
}

/// Syncs of claims and volumes that ended, by the controller's metrics.
fn syncs(metrics: &str) -> f64 {
    ["kind=\"claim\"", "kind=\"volume\""]
        .iter()
        .filter_map(|kind| series(metrics, "pv_controller_sync_duration_seconds_count", kind))
        .sum()
}

/// The sum of the series `name` whose labels contain `with` (all of them
/// when `with` is empty) in a Prometheus text exposition; `None` when
/// there is none.
pub(crate) fn series(metrics: &str, name: &str, with: &str) -> Option<f64> {
    let mut found = None;
    for line in metrics.lines() {
        let Some(rest) = line.strip_prefix(name) else {
            continue;
        };
        if !(rest.starts_with(' ') || rest.starts_with('{')) || !rest.contains(with) {
            continue;
        }
        if let Some(value) = line
            .rsplit_once(' ')
            .and_then(|(_, v)| v.parse::<f64>().ok())
        {
            *found.get_or_insert(0.0) += value;
        }
    }
    found
}
