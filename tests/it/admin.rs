//! The secure admin port on memapi, whose TokenReviews and
//! SubjectAccessReviews answer from a table the test sets: the health
//! paths need no token; `/metrics` is 401 without a token or with a forged
//! one, 403 for a user without the grant, 200 with it; a burst of scrapes
//! costs one review of each kind; a follower checks requests too (reviews
//! pass its closed write gate); a review that fails is a 500 that keeps
//! its cause to the log; and the plain-HTTP port is off unless asked for.

use std::net::SocketAddr;
use std::time::Duration;

use memapi::{MemApi, Reactor, Verb};
use pv_controller::{
    App, AppConfig, ClientOptions, Clients, DelegationConfig, LeaseConfig, SecureServing,
    ServingCertificate, ServingLimits, WriteGate,
};

pub(crate) use crate::https::https_get;

/// The secure port on a free loopback port with a self-signed certificate.
pub(crate) fn secure_serving() -> SecureServing {
    SecureServing {
        address: "127.0.0.1:0".parse().expect("address"),
        certificate: ServingCertificate::SelfSigned { names: vec![] },
        delegation: DelegationConfig::default(),
        limits: ServingLimits::default(),
    }
}

/// memapi with a scraper allowed `/metrics` and a user who is not.
fn cluster() -> MemApi {
    let api = MemApi::new();
    api.add_token(
        "scraper-token",
        "system:serviceaccount:monitoring:prometheus",
        &[],
    );
    api.add_token("nobody-token", "nobody", &[]);
    api.grant(
        "system:serviceaccount:monitoring:prometheus",
        "/metrics",
        "get",
    );
    api
}

fn clients(api: &MemApi) -> Clients {
    Clients::build(
        kube::client::ClientBuilder::new(api.service(), "default"),
        kube::client::ClientBuilder::new(api.service(), "default"),
        kube::client::ClientBuilder::new(api.service(), "default"),
        ClientOptions::default(),
    )
}

/// Runs the process until `stop` resolves; its secure address first.
async fn start(
    api: &MemApi,
    config: AppConfig,
) -> (
    SocketAddr,
    Option<SocketAddr>,
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<()>,
) {
    let app = App::start(clients(api), config).await.expect("starts");
    let secure = app.secure_address().expect("the secure port");
    let insecure = app.insecure_address();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        let _ = app
            .run(async move {
                let _ = stopped.await;
            })
            .await;
    });
    (secure, insecure, stop, task)
}

fn reviews(api: &MemApi) -> (u64, u64) {
    let requests = api.requests();
    (
        requests.count(Verb::Create, "tokenreviews", None),
        requests.count(Verb::Create, "subjectaccessreviews", None),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_secure_port_authenticates_and_authorizes_every_path_but_health() {
    let api = cluster();
    let config = AppConfig {
        insecure_address: None,
        secure: Some(secure_serving()),
        ..AppConfig::default()
    };
    let (address, insecure, stop, task) = start(&api, config).await;
    assert_eq!(insecure, None, "no plain HTTP unless asked");
    for path in ["/livez", "/healthz"] {
        assert_eq!(https_get(address, path, None).await.0, 200, "{path}");
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while https_get(address, "/readyz", None).await.0 != 200 {
        assert!(tokio::time::Instant::now() < deadline, "never ready");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(reviews(&api), (0, 0), "health needs no review");

    let (code, body) = https_get(address, "/metrics", None).await;
    assert_eq!(code, 401, "{body}");
    assert!(body.contains("\"reason\":\"Unauthorized\""), "{body}");
    assert_eq!(https_get(address, "/metrics", Some("forged")).await.0, 401);
    let (code, body) = https_get(address, "/metrics", Some("nobody-token")).await;
    assert_eq!(code, 403, "{body}");
    assert!(body.contains("cannot get path \\\"/metrics\\\""), "{body}");
    let (code, body) = https_get(address, "/metrics", Some("scraper-token")).await;
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("# TYPE pv_controller_leader gauge"));
    let before = reviews(&api);
    let burst = (0..100).map(|_| https_get(address, "/metrics", Some("scraper-token")));
    let answers = futures::future::join_all(burst).await;
    assert!(answers.iter().all(|(code, _)| *code == 200));
    assert_eq!(
        reviews(&api),
        before,
        "a burst of 100 scrapes within the cache time: no review"
    );
    let _ = stop.send(());
    task.await.expect("stopped");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_first_scrapes_makes_one_review_of_each_kind() {
    let api = cluster();
    let config = AppConfig {
        secure: Some(secure_serving()),
        ..AppConfig::default()
    };
    let (address, _, stop, task) = start(&api, config).await;
    let burst = (0..100).map(|_| https_get(address, "/metrics", Some("scraper-token")));
    let answers = futures::future::join_all(burst).await;
    assert!(answers.iter().all(|(code, _)| *code == 200));
    assert_eq!(reviews(&api), (1, 1));
    let _ = stop.send(());
    task.await.expect("stopped");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_checks_requests_through_its_closed_write_gate() {
    let api = cluster();
    let mut other = pv_controller::testing::LeaderElector::new(
        api.client(),
        LeaseConfig::new("kube-system", "pv-controller", "other"),
        WriteGate::default(),
    );
    assert!(other.try_acquire_or_renew().await.expect("the other leads"));
    let config = AppConfig {
        secure: Some(secure_serving()),
        election: Some(LeaseConfig::new("kube-system", "pv-controller", "follower")),
        ..AppConfig::default()
    };
    let (address, _, stop, task) = start(&api, config).await;
    let (code, body) = https_get(address, "/metrics", Some("scraper-token")).await;
    assert_eq!(code, 200, "{body}");
    assert!(
        body.contains("pv_controller_leader 0"),
        "a follower: {body}"
    );
    let _ = stop.send(());
    task.await.expect("stopped");
}

/// A SubjectAccessReview that fails is a 500 that names the path and
/// nothing of the cause (which is logged).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_review_is_a_500_without_the_internal_error() {
    let api = cluster();
    api.add_reactor(
        Reactor::on(Verb::Create, "subjectaccessreviews")
            .error_with(500, "etcdserver: leader changed on node 10.0.0.7")
            .always(),
    );
    let config = AppConfig {
        secure: Some(secure_serving()),
        ..AppConfig::default()
    };
    let (address, _, stop, task) = start(&api, config).await;
    let (code, body) = https_get(address, "/metrics", Some("scraper-token")).await;
    assert_eq!(code, 500, "{body}");
    assert!(
        body.contains(r#""message":"Internal Server Error: \"/metrics\"""#),
        "{body}"
    );
    assert!(!body.contains("etcdserver"), "{body}");
    let _ = stop.send(());
    task.await.expect("stopped");
}

/// The SubjectAccessReview is asked about the path the routes read, its
/// escapes decoded (as upstream authorizes Go's decoded `URL.Path`): a
/// grant of `/explain/team-a/*` covers `/explain/team-%61/x`, the same
/// claim, and nothing of another namespace, however written; an invalid
/// escape is a 400. Before, the raw path was asked about, so the same
/// claim written with an escape was refused, and a prefix rule could be
/// met by text the routes read as another namespace.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn authorization_sees_the_decoded_path() {
    let api = cluster();
    api.add_token("alice-token", "alice", &[]);
    api.grant("alice", "/explain/team-a/*", "get");
    let config = AppConfig {
        secure: Some(secure_serving()),
        ..AppConfig::default()
    };
    let (address, _, stop, task) = start(&api, config).await;
    for (path, code) in [
        ("/explain/team-a/x", 404),
        ("/explain/team-%61/x", 404),
        ("/explain/team-b/x", 403),
        ("/explain/team-%62/x", 403),
        ("/explain/%zz/x", 400),
    ] {
        let (answer, body) = https_get(address, path, Some("alice-token")).await;
        assert_eq!(answer, code, "{path}: {body}");
    }
    let _ = stop.send(());
    task.await.expect("stopped");
}
