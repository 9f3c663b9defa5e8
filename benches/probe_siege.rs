//! The admin port under a siege: other addresses hold many idle
//! connections to a running controller's secure port, reopening each as
//! soon as it is closed, while probes from the kubelet's address (127.0.0.1)
//! ask `/livez` and `/readyz` with the kubelet's 1 s timeout. Prints the
//! probe failures, the slowest probe and the process's resident memory
//! before and at its highest (docs/reliability.md, "The admin port under
//! load").
//!
//! ```sh
//! cargo bench --bench probe_siege -- --address 127.0.0.1:10281 --pid PID \
//!     [--connections 3000] [--sources 30] [--seconds 60]
//! ```
//!
//! The sources are 127.0.0.2 and on (loopback addresses standing for other
//! pods); the connections are split evenly between them.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../tests/support/https.rs"]
mod https;

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::io::AsyncReadExt;

/// The command line.
struct Args {
    address: SocketAddr,
    pid: u32,
    connections: usize,
    sources: u8,
    seconds: u64,
}

fn args() -> Args {
    let mut args = Args {
        address: "127.0.0.1:10281".parse().unwrap(),
        pid: 0,
        connections: 3000,
        sources: 30,
        seconds: 60,
    };
    let mut words = std::env::args().skip(1);
    while let Some(word) = words.next() {
        let mut value = || words.next().expect("a value");
        match word.as_str() {
            "--address" => args.address = value().parse().expect("an address"),
            "--pid" => args.pid = value().parse().expect("a pid"),
            "--connections" => args.connections = value().parse().expect("a count"),
            "--sources" => args.sources = value().parse().expect("a count"),
            "--seconds" => args.seconds = value().parse().expect("seconds"),
            // What cargo bench passes.
            "--bench" => {}
            other => panic!("unknown argument {other}"),
        }
    }
    assert!(args.pid != 0, "--pid of the controller is needed");
    args
}

/// The process's resident memory, in KiB.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("the process runs");
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS")
}

/// Holds one idle connection from `source`, opening a new one as soon as
/// the server closes it; counts the connections opened.
async fn hold(source: IpAddr, address: SocketAddr, opened: Arc<AtomicU64>) {
    loop {
        let socket = tokio::net::TcpSocket::new_v4().expect("socket");
        socket.bind(SocketAddr::new(source, 0)).expect("bind");
        if let Ok(mut stream) = socket.connect(address).await {
            opened.fetch_add(1, Ordering::Relaxed);
            let mut byte = [0u8; 1];
            let _ = stream.read(&mut byte).await;
        } else {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args = args();
    let before = rss_kib(args.pid);
    let opened = Arc::new(AtomicU64::new(0));
    let per_source = args.connections / usize::from(args.sources);
    let mut holders = Vec::new();
    for source in 0..args.sources {
        let address = IpAddr::from([127, 0, 0, 2 + source]);
        for _ in 0..per_source {
            holders.push(tokio::spawn(hold(
                address,
                args.address,
                Arc::clone(&opened),
            )));
        }
    }
    let highest = Arc::new(AtomicU64::new(before));
    let sampler = {
        let highest = Arc::clone(&highest);
        let pid = args.pid;
        tokio::spawn(async move {
            loop {
                highest.fetch_max(rss_kib(pid), Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };
    // The siege settles before the first probe.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (mut probes, mut failures, mut slowest) = (0u32, 0u32, Duration::ZERO);
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(args.seconds) {
        for path in ["/livez", "/readyz"] {
            let asked = Instant::now();
            let answer = tokio::time::timeout(
                Duration::from_secs(1),
                tokio::spawn(https::https_get(args.address, path, None)),
            )
            .await;
            let took = asked.elapsed();
            probes += 1;
            slowest = slowest.max(took);
            match answer {
                Ok(Ok((200, _))) => {}
                other => {
                    failures += 1;
                    println!("probe {path} failed after {took:?}: {other:?}");
                }
            }
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    sampler.abort();
    for holder in holders {
        holder.abort();
    }
    let highest = highest.load(Ordering::Relaxed);
    println!(
        "connections held: {} from {} addresses ({} opened in all)",
        per_source * usize::from(args.sources),
        args.sources,
        opened.load(Ordering::Relaxed)
    );
    println!("probes: {probes}, failed: {failures}, slowest: {slowest:?}");
    println!(
        "resident memory: {:.1} MiB before, {:.1} MiB at the highest, +{:.1} MiB",
        before as f64 / 1024.0,
        highest as f64 / 1024.0,
        highest.saturating_sub(before) as f64 / 1024.0
    );
}
