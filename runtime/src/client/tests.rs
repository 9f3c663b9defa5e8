//! The gate refuses writes unless open, closes by itself at its deadline,
//! and lets reads through; the timeout ends a request the server never
//! answers, but not a watch; the lease client is neither gated nor
//! limited; the review client has a rate and a 429 pause of its own.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::PersistentVolume;
use kube::Api;
use kube::api::PostParams;
use kube::client::ClientBuilder;
use memapi::{MemApi, Reactor, Verb};

use super::*;

fn clients(api: &MemApi, options: ClientOptions) -> Clients {
    Clients::build(
        ClientBuilder::new(api.service(), "default"),
        ClientBuilder::new(api.service(), "default"),
        ClientBuilder::new(api.service(), "default"),
        options,
    )
}

fn volume(name: &str) -> PersistentVolume {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": name},
        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                 "hostPath": {"path": "/tmp/x"}},
    }))
    .expect("volume")
}

#[tokio::test(start_paused = true)]
async fn writes_pass_only_while_the_gate_is_open() {
    let api = MemApi::new();
    let clients = clients(&api, ClientOptions::default());
    let volumes: Api<PersistentVolume> = Api::all(clients.controller.clone());
    let refused = volumes.create(&PostParams::default(), &volume("a")).await;
    assert!(refused.is_err(), "a closed gate refuses a create");
    assert!(
        volumes.list(&Default::default()).await.is_ok(),
        "reads pass"
    );
    assert_eq!(
        api.requests()
            .count(Verb::Create, "persistentvolumes", None),
        0
    );

    clients
        .gate
        .open_until(Instant::now() + Duration::from_secs(10));
    volumes
        .create(&PostParams::default(), &volume("b"))
        .await
        .expect("open gate lets the write through");
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert!(!clients.gate.is_open(), "the gate closes at its deadline");
    assert!(volumes.delete("b", &Default::default()).await.is_err());
    assert!(api.get::<PersistentVolume>(None, "b").is_some());

    clients.gate.open();
    tokio::time::sleep(Duration::from_secs(3600)).await;
    volumes
        .delete("b", &Default::default())
        .await
        .expect("an open gate stays open");
}

#[tokio::test(start_paused = true)]
async fn a_request_without_answer_times_out_but_a_watch_does_not() {
    let api = MemApi::new();
    api.add_reactor(
        Reactor::on(Verb::Get, "persistentvolumes")
            .delay(Duration::from_secs(3600))
            .always(),
    );
    let options = ClientOptions {
        request_timeout: Duration::from_secs(5),
        ..ClientOptions::default()
    };
    let clients = clients(&api, options);
    let volumes: Api<PersistentVolume> = Api::all(clients.controller.clone());
    let started = Instant::now();
    let error = volumes.get("a").await.expect_err("times out");
    assert!(error.to_string().contains("no answer within 5s"), "{error}");
    assert_eq!(started.elapsed(), Duration::from_secs(5));

    api.add_reactor(
        Reactor::on(Verb::Watch, "persistentvolumes")
            .delay(Duration::from_secs(20))
            .always(),
    );
    let watch = volumes.watch(&Default::default(), "0").await;
    assert!(watch.is_ok(), "a watch may take longer than the timeout");
}

#[tokio::test(start_paused = true)]
async fn the_lease_client_is_neither_gated_nor_limited() {
    let api = MemApi::new();
    let options = ClientOptions {
        qps: 1.0,
        burst: 1,
        ..ClientOptions::default()
    };
    let clients = clients(&api, options);
    let leases: Api<Lease> = Api::namespaced(clients.lease.clone(), "kube-system");
    let started = Instant::now();
    for name in ["a", "b", "c", "d"] {
        let lease: Lease =
            serde_json::from_value(serde_json::json!({"metadata": {"name": name}})).expect("lease");
        leases
            .create(&PostParams::default(), &lease)
            .await
            .expect("lease writes need no gate");
    }
    assert_eq!(started.elapsed(), Duration::ZERO, "and wait for no token");
}

#[tokio::test(start_paused = true)]
async fn every_answer_is_counted_by_client_method_and_code() {
    let api = MemApi::new();
    api.add_reactor(
        Reactor::on(Verb::List, "persistentvolumes")
            .error(403)
            .times(2),
    );
    api.add_reactor(
        Reactor::on(Verb::Get, "persistentvolumes")
            .delay(Duration::from_secs(3600))
            .always(),
    );
    let options = ClientOptions {
        request_timeout: Duration::from_secs(5),
        ..ClientOptions::default()
    };
    let clients = clients(&api, options);
    let volumes: Api<PersistentVolume> = Api::all(clients.controller.clone());
    for _ in 0..3 {
        let _ = volumes.list(&Default::default()).await;
    }
    assert!(volumes.get("a").await.is_err(), "no answer");
    let refused = volumes.create(&PostParams::default(), &volume("a")).await;
    assert!(refused.is_err(), "the closed gate sends nothing");
    let leases: Api<Lease> = Api::namespaced(clients.lease.clone(), "kube-system");
    let lease: Lease =
        serde_json::from_value(serde_json::json!({"metadata": {"name": "l"}})).expect("lease");
    leases
        .create(&PostParams::default(), &lease)
        .await
        .expect("lease");

    assert_eq!(clients.requests.with_code("403"), 2);
    assert_eq!(clients.requests.with_code("200"), 1);
    assert_eq!(clients.requests.with_code("error"), 1, "the timed-out get");
    assert_eq!(
        clients.requests.with_code("201"),
        1,
        "the lease, not the refused write"
    );
    let registry = prometheus::Registry::new();
    registry
        .register(Box::new(clients.requests.collector().expect("collector")))
        .expect("register");
    let mut text = Vec::new();
    prometheus::Encoder::encode(
        &prometheus::TextEncoder::new(),
        &registry.gather(),
        &mut text,
    )
    .expect("encode");
    let text = String::from_utf8(text).expect("utf-8");
    for line in [
        r#"pv_controller_api_requests_total{client="controller",code="403",method="GET"} 2"#,
        r#"pv_controller_api_requests_total{client="controller",code="200",method="GET"} 1"#,
        r#"pv_controller_api_requests_total{client="controller",code="error",method="GET"} 1"#,
        r#"pv_controller_api_requests_total{client="lease",code="201",method="POST"} 1"#,
    ] {
        assert!(text.contains(line), "{line} missing:\n{text}");
    }
}

#[tokio::test]
async fn both_clients_name_the_controller_as_their_user_agent() {
    use tower::ServiceExt;

    let api = MemApi::new();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let recording = || {
        let seen = Arc::clone(&seen);
        api.service()
            .map_request(move |request: Request<kube::client::Body>| {
                let agent = request
                    .headers()
                    .get(http::header::USER_AGENT)
                    .and_then(|value| value.to_str().ok())
                    .unwrap_or("")
                    .to_owned();
                seen.lock().expect("seen").push(agent);
                request
            })
    };
    let clients = Clients::build(
        ClientBuilder::new(recording(), "default"),
        ClientBuilder::new(recording(), "default"),
        ClientBuilder::new(recording(), "default"),
        ClientOptions::default(),
    );
    let volumes: Api<PersistentVolume> = Api::all(clients.controller.clone());
    volumes.list(&Default::default()).await.expect("list");
    let leases: Api<Lease> = Api::namespaced(clients.lease.clone(), "default");
    leases.list(&Default::default()).await.expect("list");
    let seen = seen.lock().expect("seen").clone();
    assert_eq!(seen.len(), 2, "{seen:?}");
    for agent in &seen {
        assert!(agent.starts_with("pv-controller/"), "{agent}");
    }
}

/// Reviews wait for the review client's own tokens (here 2 a second,
/// bursts of 2), a 429 on a review pauses that client alone, and the API
/// server sees them come from the review client's `User-Agent`.
#[tokio::test(start_paused = true)]
async fn reviews_have_a_rate_and_a_pause_of_their_own() {
    use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};

    let api = MemApi::new();
    api.add_reactor(
        Reactor::on(Verb::Create, "tokenreviews")
            .throttle(30)
            .times(1),
    );
    let options = ClientOptions {
        reviews: ReviewClientOptions {
            qps: 2.0,
            burst: 2,
            ..ReviewClientOptions::default()
        },
        ..ClientOptions::default()
    };
    let clients = clients(&api, options);
    let reviews: Api<TokenReview> = Api::all(clients.reviews.clone());
    let review = TokenReview {
        spec: TokenReviewSpec {
            token: Some("made-up".to_string()),
            audiences: None,
        },
        ..TokenReview::default()
    };
    let started = Instant::now();
    let throttled = reviews.create(&PostParams::default(), &review).await;
    assert!(throttled.is_err(), "the server's 429");
    let volumes: Api<PersistentVolume> = Api::all(clients.controller.clone());
    volumes.list(&Default::default()).await.expect("list");
    assert_eq!(
        started.elapsed(),
        Duration::ZERO,
        "the controllers' client is not paused"
    );
    for _ in 0..4 {
        reviews
            .create(&PostParams::default(), &review)
            .await
            .expect("review");
    }
    assert_eq!(
        started.elapsed(),
        Duration::from_secs(31),
        "30 s of pause, then a burst of 2 and 2 more at 2 a second"
    );
    let requests = api.requests();
    assert_eq!(requests.count(Verb::Create, "tokenreviews", None), 5);
    assert_eq!(requests.count_by_agent(REVIEWS_USER_AGENT), 5);
}
