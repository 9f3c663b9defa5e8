//! The secure admin port against clients that would hold it: connections
//! that never finish their headers are closed after the header timeout
//! while `/livez` keeps answering, an idle kept-alive connection too;
//! connections over the cap from the source holding most wait unserved
//! until one ends, while other addresses holding many idle connections
//! never delay the kubelet's probes; a request past its time limit is
//! answered 504, and a client that pipelines requests and never reads the
//! answers is disconnected; and made-up bearer tokens spend the review
//! client's rate, not the controllers', while a bind goes on. All in paused
//! time: the listener is a real loopback socket, whose data is there as
//! soon as it is written, so the clock moves only when every side waits.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use futures::FutureExt;
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use memapi::{MemApi, Reactor, Verb};
use pv_controller::{
    App, AppConfig, ClientOptions, Clients, ReviewClientOptions, SecureServing, ServingLimits,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;
use tokio_rustls::client::TlsStream;

use crate::admin::secure_serving;
use crate::harness::seed_pairs;
use crate::https::{https_get, tls_connect};

/// The review client's `User-Agent`, as the API server sees it.
const REVIEWS_AGENT: &str = concat!(
    "pv-controller/",
    env!("CARGO_PKG_VERSION"),
    "/delegated-auth"
);

fn clients(api: &MemApi, options: ClientOptions) -> Clients {
    let builder = || kube::client::ClientBuilder::new(api.service(), "default");
    Clients::build(builder(), builder(), builder(), options)
}

/// Runs the process with `secure` until the sender is dropped or sent to;
/// its secure address first.
async fn start(
    api: &MemApi,
    options: ClientOptions,
    secure: SecureServing,
) -> (
    SocketAddr,
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<()>,
) {
    let config = AppConfig {
        insecure_address: None,
        secure: Some(secure),
        ..AppConfig::default()
    };
    let app = App::start(clients(api, options), config)
        .await
        .expect("starts");
    let address = app.secure_address().expect("the secure port");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        let _ = app
            .run(async move {
                let _ = stopped.await;
            })
            .await;
    });
    (address, stop, task)
}

/// A connection whose request has begun and whose headers never end.
async fn unfinished(address: SocketAddr) -> TlsStream<TcpStream> {
    let mut tls = tls_connect(address).await;
    tls.write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nX-Slow: a")
        .await
        .expect("write");
    tls.flush().await.expect("flush");
    tls
}

/// Whether the server has closed `tls` (polled once: the events of the
/// socket are in, since paused time moves only when every side waits).
fn is_closed(tls: &mut TlsStream<TcpStream>) -> bool {
    let mut buffer = [0u8; 64];
    match tls.read(&mut buffer).now_or_never() {
        None => false,
        Some(Ok(read)) => read == 0,
        Some(Err(_)) => true,
    }
}

/// Waits until the server closes `tls` (at most `limit`); whether it did.
async fn closed_within(tls: &mut TlsStream<TcpStream>, limit: Duration) -> bool {
    let mut rest = Vec::new();
    tokio::time::timeout(limit, tls.read_to_end(&mut rest))
        .await
        .is_ok()
}

#[tokio::test(start_paused = true)]
async fn unfinished_headers_are_cut_off_after_the_header_timeout_and_livez_answers_throughout() {
    let api = MemApi::new();
    let limits = ServingLimits::default();
    let (address, stop, task) = start(&api, ClientOptions::default(), secure_serving()).await;
    let started = Instant::now();
    let mut slow = Vec::new();
    for _ in 0..200 {
        slow.push(unfinished(address).await);
    }
    // A kept-alive connection that has had its answer and stays idle.
    let mut idle = tls_connect(address).await;
    idle.write_all(b"GET /livez HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .await
        .expect("write");
    idle.flush().await.expect("flush");
    let mut answer = Vec::new();
    while !answer.ends_with(b"ok") {
        let mut buffer = [0u8; 256];
        let read = idle.read(&mut buffer).await.expect("the answer");
        assert_ne!(read, 0, "closed before answering");
        answer.extend_from_slice(&buffer[..read]);
    }
    assert!(answer.starts_with(b"HTTP/1.1 200"));

    // The clients trickle more header bytes; the server keeps waiting, up
    // to the header timeout, and answers /livez meanwhile.
    let almost = limits.read_header_timeout - Duration::from_secs(1);
    let step = almost / 4;
    for _ in 0..4 {
        tokio::time::sleep(step).await;
        assert_eq!(https_get(address, "/livez", None).await.0, 200);
        for tls in &mut slow {
            tls.write_all(b"a").await.expect("still open");
            tls.flush().await.expect("still open");
        }
    }
    assert!(started.elapsed() < limits.read_header_timeout);
    assert_eq!(
        slow.iter_mut()
            .map(is_closed)
            .filter(|closed| *closed)
            .count(),
        0,
        "none is closed before its header timeout"
    );
    assert!(!is_closed(&mut idle), "nor the idle one");

    let mut closed = 0;
    for tls in slow.iter_mut().chain(std::iter::once(&mut idle)) {
        closed += usize::from(closed_within(tls, Duration::from_secs(2)).await);
    }
    assert_eq!(closed, 201, "every one is closed at its header timeout");
    assert!(started.elapsed() <= limits.read_header_timeout + Duration::from_secs(2));
    assert_eq!(https_get(address, "/livez", None).await.0, 200);
    let _ = stop.send(());
    task.await.expect("stopped");
}

/// One address holds the cap: a further connection of its own waits
/// until one of them ends.
#[tokio::test(start_paused = true)]
async fn connections_over_the_cap_wait_unserved_until_one_ends() {
    let api = MemApi::new();
    let secure = SecureServing {
        limits: ServingLimits {
            max_connections: 4,
            ..ServingLimits::default()
        },
        ..secure_serving()
    };
    let (address, stop, task) = start(&api, ClientOptions::default(), secure).await;
    let mut held = Vec::new();
    for _ in 0..4 {
        held.push(unfinished(address).await);
    }
    let over = tokio::spawn(https_get(address, "/livez", None));
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(
        !over.is_finished(),
        "a fifth connection is not served while four are held"
    );
    drop(held.pop());
    let (code, body) = over.await.expect("answered");
    assert_eq!(code, 200, "served once a connection ended: {body}");
    let _ = stop.send(());
    task.await.expect("stopped");
}

#[tokio::test(start_paused = true)]
async fn a_request_past_its_time_limit_is_answered_with_a_504() {
    let api = MemApi::new();
    api.add_reactor(
        Reactor::on(Verb::Create, "tokenreviews")
            .delay(Duration::from_secs(3600))
            .always(),
    );
    let secure = SecureServing {
        limits: ServingLimits {
            request_timeout: Duration::from_secs(5),
            ..ServingLimits::default()
        },
        ..secure_serving()
    };
    let (address, stop, task) = start(&api, ClientOptions::default(), secure).await;
    let started = Instant::now();
    let (code, body) = https_get(address, "/metrics", Some("any-token")).await;
    assert_eq!(code, 504, "{body}");
    assert!(body.contains("\"reason\":\"Timeout\""), "{body}");
    assert_eq!(started.elapsed(), Duration::from_secs(5));
    let _ = stop.send(());
    task.await.expect("stopped");
}

fn bound_claims(api: &MemApi) -> usize {
    api.list::<PersistentVolumeClaim>()
        .iter()
        .filter(|claim| claim.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound"))
        .count()
}

/// A thousand made-up tokens: each is one TokenReview, sent by the review
/// client at its own rate (counted at the server by `User-Agent`), none by
/// the controllers' client; 500 pairs bind meanwhile.
#[tokio::test(start_paused = true)]
async fn made_up_tokens_spend_the_review_clients_rate_not_the_controllers() {
    const QPS: u64 = 50;
    const BURST: u64 = 100;
    const TOKENS: u64 = 1000;
    let api = MemApi::new();
    seed_pairs(&api, 500);
    let options = ClientOptions {
        reviews: ReviewClientOptions {
            qps: QPS as f64,
            burst: BURST as u32,
            ..ReviewClientOptions::default()
        },
        ..ClientOptions::default()
    };
    let (address, stop, task) = start(&api, options, secure_serving()).await;
    let started = Instant::now();
    let flood = tokio::spawn(async move {
        let asks = (0..TOKENS).map(|i| {
            let token = format!("made-up-{i}");
            async move { https_get(address, "/metrics", Some(&token)).await.0 }
        });
        futures::future::join_all(asks).await
    });
    let reviews = |api: &MemApi| api.requests().count(Verb::Create, "tokenreviews", None);
    let mut bound_at = None;
    loop {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let seconds = started.elapsed().as_secs_f64();
        let sent = reviews(&api);
        assert!(
            sent as f64 <= BURST as f64 + QPS as f64 * seconds,
            "{sent} reviews in {seconds} s: more than the review client's rate"
        );
        if bound_at.is_none() && bound_claims(&api) == 500 {
            bound_at = Some((seconds, sent));
        }
        if flood.is_finished() {
            break;
        }
    }
    let codes = flood.await.expect("the flood");
    assert!(codes.iter().all(|code| *code == 401), "every token refused");
    let requests = api.requests();
    assert_eq!(reviews(&api), TOKENS, "one review per token");
    assert_eq!(
        requests.count_by_agent(REVIEWS_AGENT),
        TOKENS,
        "all of them by the review client"
    );
    let (seconds, sent) = bound_at.expect("the 500 pairs bound");
    assert!(
        sent < TOKENS,
        "bound at {seconds} s, while the reviews went on ({sent} sent)"
    );
    let _ = stop.send(());
    task.await.expect("stopped");
}

/// A TCP connection to `address` from the loopback address `source`
/// (127.0.0.2 and on stand for other pods), opened and left idle: no TLS
/// handshake, no request.
async fn idle_from(source: IpAddr, address: SocketAddr) -> Option<TcpStream> {
    let socket = tokio::net::TcpSocket::new_v4().ok()?;
    socket.bind(SocketAddr::new(source, 0)).ok()?;
    socket.connect(address).await.ok()
}

/// Holds `count` idle connections from `source` to `address`, opening a
/// new one whenever the server closes one (10 ms later, so the clock moves).
async fn hold_idle(source: IpAddr, address: SocketAddr, count: usize) {
    let holders = (0..count).map(|_| async move {
        loop {
            if let Some(mut held) = idle_from(source, address).await {
                let mut byte = [0u8; 1];
                let _ = held.read(&mut byte).await;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    });
    futures::future::join_all(holders).await;
}

/// Other pods (other loopback addresses) hold several times the port's
/// connection cap in idle connections and reopen each as it is closed;
/// for a minute, every probe from the kubelet's address (127.0.0.1, once
/// a second each of `/livez` and `/readyz`, as the kubelet's 1 s probe
/// timeout) is answered within its second. Before, the connections over
/// the cap waited unaccepted in the listen backlog, the probes with them.
#[tokio::test(start_paused = true)]
async fn probes_are_answered_while_other_addresses_hold_many_idle_connections() {
    const CAP: usize = 16;
    const SOURCES: u8 = 4;
    const PER_SOURCE: usize = 25;
    let api = MemApi::new();
    let secure = SecureServing {
        limits: ServingLimits {
            max_connections: CAP,
            ..ServingLimits::default()
        },
        ..secure_serving()
    };
    let (address, stop, task) = start(&api, ClientOptions::default(), secure).await;
    let attackers: Vec<_> = (0..SOURCES)
        .map(|i| {
            tokio::spawn(hold_idle(
                IpAddr::from([127, 0, 0, 2 + i]),
                address,
                PER_SOURCE,
            ))
        })
        .collect();
    // Every place taken, many more waiting.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let mut answered = 0;
    for _ in 0..60 {
        for path in ["/livez", "/readyz"] {
            let started = Instant::now();
            let probe =
                tokio::time::timeout(Duration::from_secs(1), https_get(address, path, None));
            let (code, body) = probe.await.unwrap_or_else(|_| {
                panic!("the probe of {path} timed out after {answered} answers")
            });
            assert!(code == 200 || code == 503, "{path}: {code} {body}");
            assert!(started.elapsed() < Duration::from_secs(1));
            answered += 1;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    assert_eq!(answered, 120);
    for attacker in attackers {
        attacker.abort();
    }
    let _ = stop.send(());
    task.await.expect("stopped");
}

/// A client pipelines requests and never reads the answers: once its
/// socket's buffers are full, the answer's write waits, and the connection
/// is closed within the request limit of the last request's start. Before,
/// nothing timed the writing of an answer, and the connection was held.
#[tokio::test(start_paused = true)]
async fn a_client_that_never_reads_is_disconnected() {
    let api = MemApi::new();
    let limit = Duration::from_secs(5);
    let secure = SecureServing {
        limits: ServingLimits {
            request_timeout: limit,
            ..ServingLimits::default()
        },
        ..secure_serving()
    };
    let (address, stop, task) = start(&api, ClientOptions::default(), secure).await;
    let mut tls = tls_connect(address).await;
    let requests = b"GET /livez HTTP/1.1\r\nHost: localhost\r\n\r\n".repeat(1000);
    let started = Instant::now();
    let mut sent = 0usize;
    let cut = tokio::time::timeout(Duration::from_secs(600), async {
        loop {
            if tls.write_all(&requests).await.is_err() || tls.flush().await.is_err() {
                return;
            }
            sent += 1000;
        }
    })
    .await;
    assert!(
        cut.is_ok(),
        "still connected after {sent} requests and {:?}",
        started.elapsed()
    );
    assert!(sent > 1000, "the answers filled the buffers first: {sent}");
    assert!(
        started.elapsed() <= limit + Duration::from_secs(1),
        "closed within the limit: {:?}",
        started.elapsed()
    );
    assert_eq!(https_get(address, "/livez", None).await.0, 200);
    let _ = stop.send(());
    task.await.expect("stopped");
}
