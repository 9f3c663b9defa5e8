//! memapi reactors (errors, drops, delays, probabilities), request
//! counters, and bad requests answered with Status bodies.

use crate::support::{code, pv, reason};
use futures::StreamExt;
use http_body_util::BodyExt;
use k8s_openapi::api::core::v1::PersistentVolume;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use memapi::{MemApi, MemApiConfig, Reactor, Verb};
use serde_json::{Value, json};
use std::time::Duration;
use tower::ServiceExt;

#[tokio::test]
async fn error_once_then_n_times_then_counters() {
    let mem = MemApi::new();
    mem.create(&pv("pv1", "1Gi")).unwrap();
    let pvs: Api<PersistentVolume> = Api::all(mem.client());
    mem.add_reactor(
        Reactor::on(Verb::Get, "persistentvolumes")
            .name("pv1")
            .error(503),
    );
    let err = pvs.get("pv1").await.unwrap_err();
    assert_eq!(reason(&err), "ServiceUnavailable");
    assert_eq!(code(err), 503);
    pvs.get("pv1").await.unwrap();

    mem.add_reactor(
        Reactor::on(Verb::Update, "persistentvolumes")
            .error(409)
            .times(2),
    );
    let v = pvs.get("pv1").await.unwrap();
    for _ in 0..2 {
        let err = pvs
            .replace("pv1", &PostParams::default(), &v)
            .await
            .unwrap_err();
        assert_eq!(reason(&err), "Conflict");
    }
    pvs.replace("pv1", &PostParams::default(), &v)
        .await
        .unwrap();

    let stats = mem.requests();
    assert_eq!(stats.count(Verb::Get, "persistentvolumes", None), 3);
    assert_eq!(stats.count(Verb::Update, "persistentvolumes", None), 3);
    assert_eq!(
        stats.count_code(Verb::Update, "persistentvolumes", None, 200),
        1
    );
    assert_eq!(stats.total_with_code(409), 2);
    assert_eq!(stats.log().len(), 6);
    assert_eq!(stats.log()[0].code, Some(503));
    mem.reset_requests();
    assert_eq!(mem.requests().total(), 0);
}

#[tokio::test]
async fn status_subresource_reactor_and_clear() {
    let mem = MemApi::new();
    let v = mem.create(&pv("pv1", "1Gi")).unwrap();
    let pvs: Api<PersistentVolume> = Api::all(mem.client());
    mem.add_reactor(
        Reactor::on(Verb::Update, "persistentvolumes")
            .subresource("status")
            .error(500)
            .always(),
    );
    let err = pvs
        .replace_status("pv1", &PostParams::default(), &v)
        .await
        .unwrap_err();
    assert_eq!(reason(&err), "InternalError");
    pvs.replace("pv1", &PostParams::default(), &v)
        .await
        .unwrap();
    mem.clear_reactors();
    pvs.replace_status("pv1", &PostParams::default(), &v)
        .await
        .unwrap();
    let stats = mem.requests();
    assert_eq!(
        stats.count(Verb::Update, "persistentvolumes", Some("status")),
        2
    );
    assert_eq!(stats.count(Verb::Update, "persistentvolumes", None), 1);
}

#[tokio::test]
async fn dropped_connection_is_a_service_error() {
    let mem = MemApi::new();
    let pvs: Api<PersistentVolume> = Api::all(mem.client());
    mem.add_reactor(Reactor::on(Verb::Create, "persistentvolumes").drop_connection());
    let err = pvs
        .create(&PostParams::default(), &pv("pv1", "1Gi"))
        .await
        .unwrap_err();
    assert!(!matches!(err, kube::Error::Api(_)), "{err:?}");
    assert!(mem.get::<PersistentVolume>(None, "pv1").is_none());
    assert_eq!(mem.requests().total_dropped(), 1);
    pvs.create(&PostParams::default(), &pv("pv1", "1Gi"))
        .await
        .unwrap();
}

#[tokio::test(start_paused = true)]
async fn delay_uses_tokio_time() {
    let mem = MemApi::new();
    mem.create(&pv("pv1", "1Gi")).unwrap();
    let pvs: Api<PersistentVolume> = Api::all(mem.client());
    mem.add_reactor(Reactor::any().delay(Duration::from_secs(60)));
    let start = tokio::time::Instant::now();
    pvs.get("pv1").await.unwrap();
    assert!(start.elapsed() >= Duration::from_secs(60));
}

#[tokio::test]
async fn probability_is_seeded_and_roughly_right() {
    let run = || async {
        let mem = MemApi::with_config(MemApiConfig {
            seed: 7,
            ..MemApiConfig::default()
        });
        mem.create(&pv("pv1", "1Gi")).unwrap();
        let pvs: Api<PersistentVolume> = Api::all(mem.client());
        mem.add_reactor(
            Reactor::on(Verb::Get, "persistentvolumes")
                .error(429)
                .probability(0.3),
        );
        let mut outcomes = Vec::new();
        for _ in 0..200 {
            outcomes.push(pvs.get("pv1").await.is_ok());
        }
        outcomes
    };
    let a = run().await;
    let b = run().await;
    assert_eq!(a, b);
    let failures = a.iter().filter(|ok| !**ok).count();
    assert!((30..90).contains(&failures), "{failures}");
}

#[tokio::test]
async fn after_commit_drop_stores_the_write_but_loses_the_answer() {
    let mem = MemApi::new();
    let v = mem.create(&pv("pv1", "1Gi")).unwrap();
    let pvs: Api<PersistentVolume> = Api::all(mem.client());
    let from = mem.resource_version().to_string();
    let mut watch = pvs
        .watch(&WatchParams::default(), &from)
        .await
        .unwrap()
        .boxed();
    mem.add_reactor(
        Reactor::on(Verb::Update, "persistentvolumes")
            .after_commit()
            .drop_connection(),
    );
    let mut labelled = v.clone();
    labelled.metadata.labels = Some([("a".to_string(), "1".to_string())].into());
    let rv = mem.resource_version();
    let err = pvs
        .replace("pv1", &PostParams::default(), &labelled)
        .await
        .unwrap_err();
    assert!(!matches!(err, kube::Error::Api(_)), "{err:?}");
    // The write happened: stored, seen by watchers, a new resourceVersion.
    assert_eq!(mem.resource_version(), rv + 1);
    let stored = mem.get::<PersistentVolume>(None, "pv1").unwrap();
    assert_eq!(stored.labels().get("a").map(String::as_str), Some("1"));
    match watch.next().await.unwrap().unwrap() {
        WatchEvent::Modified(o) => assert_eq!(o, stored),
        other => panic!("{other:?}"),
    }
    // A blind retry with the old resourceVersion now conflicts.
    let err = pvs
        .replace("pv1", &PostParams::default(), &labelled)
        .await
        .unwrap_err();
    assert_eq!(code(err), 409);
    let stats = mem.requests();
    let entry = &stats.log()[1];
    assert_eq!((entry.code, entry.lost_answer), (None, Some(200)));
    assert_eq!(stats.log()[2].lost_answer, None);
    assert_eq!(stats.total_lost_answers(), 1);
    assert_eq!(stats.total_dropped(), 1);
}

#[tokio::test]
async fn after_commit_error_on_create_patch_and_delete() {
    let mem = MemApi::new();
    let pvs: Api<PersistentVolume> = Api::all(mem.client());
    for verb in [Verb::Create, Verb::Patch, Verb::Delete] {
        mem.add_reactor(
            Reactor::on(verb, "persistentvolumes")
                .after_commit()
                .error(500),
        );
    }
    let err = pvs
        .create(&PostParams::default(), &pv("pv1", "1Gi"))
        .await
        .unwrap_err();
    assert_eq!(reason(&err), "InternalError");
    assert!(pvs.get("pv1").await.is_ok());
    let err = pvs
        .create(&PostParams::default(), &pv("pv1", "1Gi"))
        .await
        .unwrap_err();
    assert_eq!(reason(&err), "AlreadyExists");

    let p = json!({"metadata": {"labels": {"b": "2"}}});
    let err = pvs
        .patch("pv1", &PatchParams::default(), &Patch::Merge(p))
        .await
        .unwrap_err();
    assert_eq!(code(err), 500);
    assert_eq!(
        pvs.get("pv1")
            .await
            .unwrap()
            .labels()
            .get("b")
            .map(String::as_str),
        Some("2")
    );

    let err = pvs
        .delete("pv1", &DeleteParams::default())
        .await
        .unwrap_err();
    assert_eq!(code(err), 500);
    assert_eq!(code(pvs.get("pv1").await.unwrap_err()), 404);

    let stats = mem.requests();
    assert_eq!(stats.total_lost_answers(), 3);
    assert_eq!(
        stats.count_code(Verb::Create, "persistentvolumes", None, 500),
        1
    );
    let lost: Vec<_> = stats
        .log()
        .iter()
        .filter_map(|e| e.lost_answer.map(|l| (e.verb, e.code, l)))
        .collect();
    assert_eq!(
        lost,
        [
            (Verb::Create, Some(500), 201),
            (Verb::Patch, Some(500), 200),
            (Verb::Delete, Some(500), 200),
        ]
    );
}

#[tokio::test]
async fn after_commit_reactors_wait_for_a_successful_write() {
    let mem = MemApi::new();
    let v = mem.create(&pv("pv1", "1Gi")).unwrap();
    let pvs: Api<PersistentVolume> = Api::all(mem.client());
    mem.add_reactor(
        Reactor::on(Verb::Update, "persistentvolumes")
            .after_commit()
            .error(503),
    );
    // A failed write does not use the reactor up, and reads never match.
    let mut stale = v.clone();
    stale.metadata.resource_version = Some("1".into());
    assert_eq!(
        code(
            pvs.replace("pv1", &PostParams::default(), &stale)
                .await
                .unwrap_err()
        ),
        409
    );
    pvs.get("pv1").await.unwrap();
    let err = pvs
        .replace("pv1", &PostParams::default(), &v)
        .await
        .unwrap_err();
    assert_eq!(code(err), 503);
    pvs.replace("pv1", &PostParams::default(), &v)
        .await
        .unwrap();
    assert_eq!(mem.requests().total_lost_answers(), 1);
}

#[tokio::test(start_paused = true)]
async fn after_commit_delay_lets_watchers_see_the_write_first() {
    let mem = MemApi::new();
    let pvs: Api<PersistentVolume> = Api::all(mem.client());
    mem.add_reactor(
        Reactor::on(Verb::Create, "persistentvolumes")
            .after_commit()
            .delay(Duration::from_secs(30)),
    );
    let start = tokio::time::Instant::now();
    let creating = tokio::spawn({
        let pvs = pvs.clone();
        async move { pvs.create(&PostParams::default(), &pv("pv1", "1Gi")).await }
    });
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(mem.get::<PersistentVolume>(None, "pv1").is_some());
    assert!(!creating.is_finished());
    creating.await.unwrap().unwrap();
    assert!(start.elapsed() >= Duration::from_secs(30));
    assert_eq!(mem.requests().total_lost_answers(), 0);
}

/// Sends a raw request through the tower service; returns (code, body).
async fn raw(mem: &MemApi, method: &str, uri: &str, ct: &str, body: &str) -> (u16, Value) {
    let req = http::Request::builder()
        .method(method)
        .uri(uri)
        .header("content-type", ct)
        .body(kube::client::Body::from(body.as_bytes().to_vec()))
        .unwrap();
    let resp = mem.service().oneshot(req).await.unwrap();
    let code = resp.status().as_u16();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (code, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

#[tokio::test]
async fn bad_requests_get_status_bodies() {
    let mem = MemApi::new();
    mem.create(&pv("pv1", "1Gi")).unwrap();
    let rv = mem.resource_version();
    let json_ct = "application/json";
    let cases = [
        ("GET", "/api/v1/gadgets", json_ct, "", 404),
        (
            "POST",
            "/api/v1/persistentvolumes",
            json_ct,
            "{not json",
            400,
        ),
        ("POST", "/api/v1/persistentvolumes", json_ct, "[1,2]", 400),
        (
            "POST",
            "/api/v1/persistentvolumes",
            json_ct,
            r#"{"metadata":{}}"#,
            422,
        ),
        (
            "POST",
            "/api/v1/namespaces/a/persistentvolumeclaims",
            json_ct,
            r#"{"metadata":{"name":"c","namespace":"b"}}"#,
            400,
        ),
        (
            "PUT",
            "/api/v1/persistentvolumes/pv1",
            json_ct,
            r#"{"metadata":{"name":"other"}}"#,
            400,
        ),
        (
            "PATCH",
            "/api/v1/persistentvolumes/pv1",
            "application/merge-patch+json",
            "{oops",
            400,
        ),
        (
            "PATCH",
            "/api/v1/persistentvolumes/pv1",
            "application/json-patch+json",
            r#"{"op":1}"#,
            400,
        ),
        (
            "PATCH",
            "/api/v1/persistentvolumes/pv1",
            "text/plain",
            "{}",
            415,
        ),
        (
            "GET",
            "/api/v1/persistentvolumes/pv1/scale",
            json_ct,
            "",
            404,
        ),
        ("PUT", "/api/v1/persistentvolumes", json_ct, "{}", 405),
        ("GET", "/api/v1/persistentvolumes?limit=x", json_ct, "", 400),
        (
            "GET",
            "/api/v1/persistentvolumes?watch=1&resourceVersion=abc",
            json_ct,
            "",
            400,
        ),
    ];
    for (method, uri, ct, body, want) in cases {
        let (got, status) = raw(&mem, method, uri, ct, body).await;
        assert_eq!(got, want, "{method} {uri}: {status}");
        assert_eq!(status["kind"], "Status", "{method} {uri}");
        assert_eq!(status["status"], "Failure");
        assert_eq!(status["code"], json!(want));
    }
    assert_eq!(mem.resource_version(), rv);
    assert_eq!(mem.list::<PersistentVolume>().len(), 1);
}

#[tokio::test]
async fn a_path_outside_every_api_is_a_plain_404() {
    let mem = MemApi::new();
    for uri in ["/apis/nope.io/v1/things", "/apis/nope.io/v1", "/nowhere"] {
        let req = http::Request::get(uri)
            .body(kube::client::Body::from(Vec::new()))
            .unwrap();
        let resp = mem.service().oneshot(req).await.unwrap();
        assert_eq!(resp.status().as_u16(), 404, "{uri}");
        let bytes = resp.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(
            &bytes[..],
            b"404 page not found\n",
            "{uri}: as a real apiserver's mux"
        );
    }
}

#[tokio::test]
async fn discovery_documents() {
    let mem = MemApi::new();
    let (code, v) = raw(&mem, "GET", "/api/v1", "", "").await;
    assert_eq!(code, 200);
    let pv = v["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "persistentvolumes")
        .unwrap();
    assert_eq!(pv["shortNames"], json!(["pv"]));
    assert_eq!(pv["namespaced"], json!(false));
    let (_, groups) = raw(&mem, "GET", "/apis", "", "").await;
    let names: Vec<&str> = groups["groups"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|g| g["name"].as_str())
        .collect();
    assert_eq!(
        names,
        [
            "storage.k8s.io",
            "events.k8s.io",
            "resource.k8s.io",
            "authentication.k8s.io",
            "authorization.k8s.io",
            "coordination.k8s.io"
        ]
    );
    let (code, _) = raw(&mem, "GET", "/apis/storage.k8s.io/v1", "", "").await;
    assert_eq!(code, 200);
    let (_, version) = raw(&mem, "GET", "/version", "", "").await;
    assert_eq!(version["major"], "1");
}

#[tokio::test]
async fn throttle_answers_429_with_retry_after() {
    let mem = MemApi::new();
    mem.create(&pv("pv1", "1Gi")).unwrap();
    let id = mem.add_reactor(Reactor::on(Verb::Get, "persistentvolumes").throttle(3));
    let req = http::Request::builder()
        .uri("/api/v1/persistentvolumes/pv1")
        .body(kube::client::Body::empty())
        .unwrap();
    let resp = mem.service().oneshot(req).await.unwrap();
    assert_eq!(resp.status().as_u16(), 429);
    assert_eq!(
        resp.headers()
            .get(http::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok()),
        Some("3")
    );
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    let status: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(status["reason"], "TooManyRequests");
    assert_eq!(status["details"]["retryAfterSeconds"], 3);
    assert_eq!(mem.reactor_fired(id), Some(1));
    // Fired once: the next get goes through.
    let pvs: Api<PersistentVolume> = Api::all(mem.client());
    pvs.get("pv1").await.unwrap();
    assert_eq!(mem.requests().total_with_code(429), 1);
}

#[tokio::test]
async fn writes_only_reactors_leave_reads_alone_and_ids_count_and_remove() {
    let mem = MemApi::new();
    let pvs: Api<PersistentVolume> = Api::all(mem.client());
    let id = mem.add_reactor(Reactor::any().writes_only().error(500).always());
    let err = pvs
        .create(&PostParams::default(), &pv("pv1", "1Gi"))
        .await
        .unwrap_err();
    assert_eq!(code(err), 500);
    assert!(
        pvs.list(&Default::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    assert_eq!(pvs.get_opt("pv1").await.unwrap(), None);
    assert_eq!(mem.reactor_fired(id), Some(1), "reads do not fire it");

    let removed = mem.remove_reactor(id).expect("installed");
    assert_eq!(removed.fired(), 1);
    assert_eq!(mem.reactor_fired(id), None);
    assert!(mem.remove_reactor(id).is_none());
    pvs.create(&PostParams::default(), &pv("pv1", "1Gi"))
        .await
        .unwrap();
}

#[tokio::test(start_paused = true)]
async fn writes_past_the_in_flight_limit_are_answered_429_and_not_served() {
    let mem = MemApi::with_config(MemApiConfig {
        max_mutating_in_flight: Some(2),
        ..MemApiConfig::default()
    });
    for name in ["pv1", "pv2", "pv3"] {
        mem.create(&pv(name, "1Gi")).unwrap();
    }
    // Each write takes a second to serve, so three sent together overlap.
    mem.add_reactor(
        Reactor::any()
            .writes_only()
            .delay(Duration::from_secs(1))
            .always(),
    );
    let pvs: Api<PersistentVolume> = Api::all(mem.client());
    let label = |name: &'static str| {
        let pvs = pvs.clone();
        async move {
            let patch = json!({"metadata": {"labels": {"touched": "yes"}}});
            pvs.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
        }
    };
    let answers = tokio::join!(label("pv1"), label("pv2"), label("pv3"));
    let answers = [answers.0, answers.1, answers.2];
    let refused: Vec<u16> = answers
        .into_iter()
        .filter_map(|answer| answer.err().map(code))
        .collect();
    assert_eq!(
        refused,
        vec![429],
        "one of three writes past a limit of two"
    );
    let touched = ["pv1", "pv2", "pv3"]
        .iter()
        .filter(|name| {
            let stored = mem.get::<PersistentVolume>(None, name).unwrap();
            stored.labels().contains_key("touched")
        })
        .count();
    assert_eq!(touched, 2, "the refused write is not served");
    // Reads are not limited, and a write is served once a seat is free.
    let (read, fourth, fifth) = tokio::join!(pvs.get("pv1"), label("pv3"), label("pv1"));
    read.unwrap();
    fourth.unwrap();
    fifth.unwrap();
    assert_eq!(mem.requests().total_with_code(429), 1);
}
