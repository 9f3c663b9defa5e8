//! `/metrics` end to end: the controller runs on memapi until it settles,
//! then the admin router's output must parse as the Prometheus text format
//! and its `pv_collector_*` gauges must count the objects on the server.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::harness::{binder_only, clients, settle};
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use memapi::{MemApi, Verb};
use pv_controller::App;
use pv_controller::pv;
use testkit::*;

/// One sample: metric name, labels, value.
#[derive(Debug, Clone, PartialEq)]
struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
}

/// Parses the Prometheus text exposition format (version 0.0.4) strictly
/// enough to catch a malformed line: comments must be HELP or TYPE with a
/// valid name and type, every sample's family must have been TYPEd before it,
/// label values must be quoted with valid escapes, values must be numbers.
fn parse_exposition(text: &str) -> Result<Vec<Sample>, String> {
    let mut typed: BTreeMap<String, String> = BTreeMap::new();
    let mut samples = vec![];
    for (number, line) in text.lines().enumerate() {
        let fail = |why: &str| format!("line {}: {why}: {line:?}", number + 1);
        if line.is_empty() {
            continue;
        }
        if let Some(comment) = line.strip_prefix("# ") {
            let mut parts = comment.splitn(3, ' ');
            let keyword = parts.next().unwrap_or("");
            let name = parts.next().ok_or_else(|| fail("comment without a name"))?;
            if !valid_name(name) {
                return Err(fail("invalid metric name"));
            }
            match keyword {
                "HELP" => {}
                "TYPE" => {
                    let kind = parts.next().ok_or_else(|| fail("TYPE without a type"))?;
                    if !["counter", "gauge", "histogram", "summary", "untyped"].contains(&kind) {
                        return Err(fail("unknown type"));
                    }
                    typed.insert(name.to_string(), kind.to_string());
                }
                _ => return Err(fail("unknown comment")),
            }
            continue;
        }
        let (name, rest) = match line.find(['{', ' ']) {
            Some(at) => line.split_at(at),
            None => return Err(fail("no value")),
        };
        if !valid_name(name) {
            return Err(fail("invalid metric name"));
        }
        let family = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|suffix| {
                name.strip_suffix(suffix)
                    .filter(|base| typed.get(*base).is_some_and(|t| t == "histogram"))
            })
            .unwrap_or(name);
        if !typed.contains_key(family) {
            return Err(fail("sample before its TYPE"));
        }
        let mut labels = BTreeMap::new();
        let mut rest = rest;
        if let Some(body) = rest.strip_prefix('{') {
            let mut chars = body.char_indices().peekable();
            let end = loop {
                let Some((start, c)) = chars.next() else {
                    return Err(fail("unclosed labels"));
                };
                if c == '}' {
                    break start;
                }
                if c == ',' {
                    continue;
                }
                let eq = body[start..]
                    .find('=')
                    .ok_or_else(|| fail("label without ="))?
                    + start;
                let label = &body[start..eq];
                if !valid_name(label) || label.contains(':') {
                    return Err(fail("invalid label name"));
                }
                while chars.peek().is_some_and(|(at, _)| *at <= eq) {
                    chars.next();
                }
                if chars.next().map(|(_, c)| c) != Some('"') {
                    return Err(fail("unquoted label value"));
                }
                let mut value = String::new();
                loop {
                    match chars.next() {
                        Some((_, '"')) => break,
                        Some((_, '\\')) => match chars.next() {
                            Some((_, 'n')) => value.push('\n'),
                            Some((_, '\\')) => value.push('\\'),
                            Some((_, '"')) => value.push('"'),
                            _ => return Err(fail("bad escape")),
                        },
                        Some((_, c)) => value.push(c),
                        None => return Err(fail("unterminated label value")),
                    }
                }
                labels.insert(label.to_string(), value);
            };
            rest = &body[end + 1..];
        }
        let value = rest
            .strip_prefix(' ')
            .ok_or_else(|| fail("no space before the value"))?;
        let value = match value {
            "+Inf" => f64::INFINITY,
            "-Inf" => f64::NEG_INFINITY,
            "NaN" => f64::NAN,
            number => number.parse().map_err(|_| fail("value is not a number"))?,
        };
        samples.push(Sample {
            name: name.to_string(),
            labels,
            value,
        });
    }
    Ok(samples)
}

fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

#[test]
fn the_parser_refuses_malformed_lines() {
    let good = "# HELP x_total help text\n# TYPE x_total counter\nx_total{a=\"b\\\"c\"} 3\n";
    assert_eq!(parse_exposition(good).unwrap()[0].labels["a"], "b\"c");
    for bad in [
        "x_total 1\n",
        "# TYPE x counter\nx{a=b} 1\n",
        "# TYPE x counter\nx{a=\"b\"}1\n",
        "# TYPE x counter\nx one\n",
        "# TYPE x countr\n",
        "# TYPE 1x counter\n",
        "# TYPE x counter\nx{a=\"b\" 1\n",
    ] {
        assert!(parse_exposition(bad).is_err(), "{bad:?} should be refused");
    }
}

/// Sums the samples of `name` whose labels include `want`.
fn value(samples: &[Sample], name: &str, want: &[(&str, &str)]) -> f64 {
    samples
        .iter()
        .filter(|s| s.name == name)
        .filter(|s| {
            want.iter()
                .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
        })
        .map(|s| s.value)
        .sum()
}

fn phase<T: serde::Serialize>(object: &T) -> String {
    serde_json::to_value(object).unwrap()["status"]["phase"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

#[tokio::test(start_paused = true)]
async fn metrics_parse_and_count_the_objects() {
    let api = MemApi::new();
    api.create(&storage_class("gold", "example.com/gold", "Immediate"))
        .unwrap();
    api.create(&default_class(storage_class(
        "fast",
        "example.com/fast",
        "Immediate",
    )))
    .unwrap();
    for i in 0..3 {
        api.create(&volume(&format!("gold-{i}"), "1Gi").class("gold").build())
            .unwrap();
    }
    api.create(&volume("block", "1Gi").volume_mode("Block").build())
        .unwrap();
    for i in 0..2 {
        api.create(
            &claim(&format!("gold-{i}"), &format!("uid-g{i}"), "1Gi")
                .class("gold")
                .namespace("team-a")
                .build(),
        )
        .unwrap();
    }
    let mut unclassed = claim("no-class", "uid-n", "5Gi")
        .namespace("team-b")
        .build();
    unclassed.spec.as_mut().unwrap().storage_class_name = None;
    api.create(&unclassed).unwrap();

    let app = App::start(
        clients(&api),
        binder_only(pv::Config {
            resync_period: Duration::from_secs(5),
            ..pv::Config::default()
        }),
    )
    .await
    .unwrap();
    let idle = app.idle_probe();
    let metrics = app.metrics();
    let health = app.health();
    let recorder = app.recorder();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(app.run(async move {
        let _ = stopped.await;
    }));
    settle(&api, &idle).await;
    recorder.flush().await;
    assert!(health.readiness.is_ready());

    let text = crate::harness::scrape_metrics(metrics, health).await;
    let samples = parse_exposition(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    // Before the stop, which may still write events.
    let served_events = api.requests();
    let _ = stop.send(());
    running.await.unwrap().unwrap();

    let volumes = api.list::<PersistentVolume>();
    let claims = api.list::<PersistentVolumeClaim>();
    let class_of_volume = |v: &PersistentVolume| {
        v.spec
            .as_ref()
            .unwrap()
            .storage_class_name
            .clone()
            .unwrap_or_default()
    };
    for class in ["gold", ""] {
        let bound = volumes
            .iter()
            .filter(|v| class_of_volume(v) == class && phase(*v) == "Bound")
            .count();
        let unbound = volumes
            .iter()
            .filter(|v| class_of_volume(v) == class && phase(*v) != "Bound")
            .count();
        let labels = [("storage_class", class)];
        assert_eq!(
            value(&samples, "pv_collector_bound_pv_count", &labels),
            bound as f64
        );
        assert_eq!(
            value(&samples, "pv_collector_unbound_pv_count", &labels),
            unbound as f64
        );
    }
    assert_eq!(
        value(
            &samples,
            "pv_collector_bound_pv_count",
            &[("storage_class", "gold")]
        ),
        2.0
    );
    assert_eq!(
        value(
            &samples,
            "pv_collector_total_pv_count",
            &[("volume_mode", "Block")]
        ),
        1.0
    );
    assert_eq!(
        value(
            &samples,
            "pv_collector_total_pv_count",
            &[("plugin_name", "N/A")]
        ),
        volumes.len() as f64
    );
    for namespace in ["team-a", "team-b"] {
        let in_namespace =
            |c: &&PersistentVolumeClaim| c.metadata.namespace.as_deref() == Some(namespace);
        let bound = claims
            .iter()
            .filter(in_namespace)
            .filter(|c| phase(*c) == "Bound")
            .count();
        let unbound = claims
            .iter()
            .filter(in_namespace)
            .filter(|c| phase(*c) != "Bound")
            .count();
        let labels = [("namespace", namespace)];
        assert_eq!(
            value(&samples, "pv_collector_bound_pvc_count", &labels),
            bound as f64
        );
        assert_eq!(
            value(&samples, "pv_collector_unbound_pvc_count", &labels),
            unbound as f64
        );
    }
    assert_eq!(
        value(
            &samples,
            "pv_collector_unbound_pvc_count",
            &[
                ("namespace", "team-b"),
                ("storage_class", "fast"),
                ("volume_attributes_class", "")
            ]
        ),
        1.0,
        "the unclassed claim got the default class and waits for its provisioner"
    );
    assert_eq!(value(&samples, "retroactive_storageclass_total", &[]), 1.0);
    assert_eq!(
        value(&samples, "retroactive_storageclass_errors_total", &[]),
        0.0
    );

    let requests = api.requests();
    for (resource, subresource) in [
        ("persistentvolumes", ""),
        ("persistentvolumes", "status"),
        ("persistentvolumeclaims", ""),
        ("persistentvolumeclaims", "status"),
    ] {
        let served = requests.count(
            Verb::Patch,
            resource,
            (!subresource.is_empty()).then_some(subresource),
        );
        assert!(served > 0, "{resource}/{subresource} written");
        assert_eq!(
            value(
                &samples,
                "pv_controller_api_writes_total",
                &[("resource", resource), ("subresource", subresource)]
            ),
            served as f64,
            "{resource}/{subresource}: the counter matches the server's log"
        );
    }
    assert_eq!(
        value(&samples, "pv_controller_api_conflicts_total", &[]),
        0.0
    );
    let created = served_events.count_code(Verb::Create, "events", None, 201);
    assert!(created > 0, "events were written");
    for (outcome, served) in [
        ("created", created),
        (
            "patched",
            served_events.count_code(Verb::Patch, "events", None, 200),
        ),
    ] {
        assert_eq!(
            value(
                &samples,
                "pv_controller_events_total",
                &[("outcome", outcome)]
            ),
            served as f64,
            "{outcome} events: the counter matches the server's log"
        );
    }
    for lost in ["rejected", "failed", "dropped_queue_full"] {
        assert_eq!(
            value(&samples, "pv_controller_events_total", &[("outcome", lost)]),
            0.0,
            "no {lost} events"
        );
    }
    assert_eq!(
        value(
            &samples,
            "pv_controller_store_objects",
            &[("kind", "persistentvolume")]
        ),
        volumes.len() as f64
    );
    assert_eq!(value(&samples, "pv_controller_queue_depth", &[]), 0.0);
    assert!(
        value(
            &samples,
            "pv_controller_sync_duration_seconds_count",
            &[("kind", "claim")]
        ) >= 3.0
    );
    assert_eq!(value(&samples, "pv_controller_leader", &[]), 1.0);
}

/// GETs `path` from the admin server at `address` (plain HTTP/1.1).
async fn http_get(address: std::net::SocketAddr, path: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await.unwrap();
    answer
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_process_exports_the_answers_to_every_request_by_code() {
    let api = MemApi::new();
    api.add_reactor(memapi::Reactor::on(Verb::List, "nodes").error(403).times(1));
    let clients = pv_controller::Clients::build(
        kube::client::ClientBuilder::new(api.service(), "default"),
        kube::client::ClientBuilder::new(api.service(), "default"),
        kube::client::ClientBuilder::new(api.service(), "default"),
        pv_controller::ClientOptions::default(),
    );
    let app = pv_controller::App::start(clients, pv_controller::AppConfig::default())
        .await
        .unwrap();
    let address = app.insecure_address().expect("served over plain HTTP");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(app.run(async move {
        let _ = stopped.await;
    }));
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let samples = loop {
        let answer = http_get(address, "/metrics").await;
        let body = answer.split("\r\n\r\n").nth(1).unwrap_or_default();
        let samples = parse_exposition(body).unwrap_or_else(|e| panic!("{e}\n{body}"));
        let refused = value(
            &samples,
            "pv_controller_api_requests_total",
            &[("code", "403")],
        );
        let ready = http_get(address, "/readyz")
            .await
            .starts_with("HTTP/1.1 200");
        if refused > 0.0 && ready || std::time::Instant::now() > deadline {
            break samples;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let _ = stop.send(());
    running.await.unwrap().unwrap();
    assert_eq!(
        value(
            &samples,
            "pv_controller_api_requests_total",
            &[("client", "controller"), ("method", "GET"), ("code", "403")]
        ),
        1.0,
        "the refused list of nodes"
    );
    assert!(
        value(
            &samples,
            "pv_controller_api_requests_total",
            &[("client", "controller"), ("method", "GET"), ("code", "200")]
        ) >= 5.0,
        "the lists of the five watchers"
    );
}
