//! What deploy/ gives Prometheus and Grafana, against the process: the
//! dashboard (`deploy/base/grafana-dashboard.json`) has its data source as
//! a variable and every expression of its panels and variables parses as
//! PromQL; every alert of `deploy/base/prometheusrule.yaml` has unit tests
//! (`deploy/test/prometheusrule.test.yaml`, run by promtool in
//! `deploy/test/run-promtool.sh`) firing and silent; and every series the
//! dashboard, the alerts and their tests name is one the process exports,
//! read from live scrapes of the controllers on memapi: one process acting
//! (binding, a claim left Pending, released volumes deleted and recycled,
//! a delete that fails, a conflict, an ephemeral volume, a ResourceClaim
//! from a template), one in shadow mode (`--shadow`).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use clap::Parser;
use memapi::{MemApi, Reactor, Verb};
use promql_parser::parser::{self, Expr};
use promql_parser::util::{ExprVisitor, walk_expr};
use pv_controller::App;
use pv_controller::AppConfig;
use pv_controller::Options;
use pv_controller::ShadowConfig;
use pv_controller::pv;
use pv_controller::pv::Settings;
use pv_controller::pv::VolumePlugins;
use pv_controller::testing::stand_in_kubelet;
use serde_json::Value;
use testkit::*;

use crate::harness::clients;
use crate::process::settle;

fn dashboard() -> Value {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/deploy/base/grafana-dashboard.json"
    ))
    .unwrap();
    serde_json::from_str(&text).unwrap()
}

/// Every panel, those inside collapsed rows included.
fn panels(dashboard: &Value) -> Vec<&Value> {
    let mut all = Vec::new();
    for panel in dashboard["panels"].as_array().unwrap() {
        all.push(panel);
        all.extend(panel["panels"].as_array().into_iter().flatten());
    }
    all
}

/// Each PromQL expression of the dashboard with where it is: the panels'
/// targets, and the metric selector of each variable's `label_values`.
fn expressions(dashboard: &Value) -> Vec<(String, String)> {
    let mut found = Vec::new();
    for panel in panels(dashboard) {
        for target in panel["targets"].as_array().into_iter().flatten() {
            let expr = target["expr"].as_str().unwrap();
            found.push((
                format!("panel {:?}", panel["title"].as_str().unwrap_or("")),
                expr.to_string(),
            ));
        }
    }
    for variable in dashboard["templating"]["list"].as_array().unwrap() {
        if variable["type"] != "query" {
            continue;
        }
        let query = variable["query"]["query"].as_str().unwrap();
        let selector = query
            .strip_prefix("label_values(")
            .and_then(|rest| rest.rsplit_once(','))
            .map(|(selector, _)| selector)
            .unwrap_or_else(|| panic!("variable {}: not label_values: {query}", variable["name"]));
        found.push((
            format!("variable {}", variable["name"]),
            selector.to_string(),
        ));
    }
    found
}

/// The expression with Grafana's interval variables replaced by a
/// duration, as Grafana sends it (the other variables sit inside label
/// matchers' strings).
fn as_sent(expr: &str) -> String {
    expr.replace("$__rate_interval", "5m")
        .replace("$__interval", "1m")
        .replace("$__range", "1h")
}

/// The metric names an expression selects.
fn metric_names(expr: &Expr) -> BTreeSet<String> {
    struct Names(BTreeSet<String>);
    impl ExprVisitor for Names {
        type Error = String;
        fn pre_visit(&mut self, expr: &Expr) -> Result<bool, String> {
            let selector = match expr {
                Expr::VectorSelector(selector) => selector,
                Expr::MatrixSelector(matrix) => &matrix.vs,
                _ => return Ok(true),
            };
            let name = selector.name.clone().or_else(|| {
                selector
                    .matchers
                    .matchers
                    .iter()
                    .find(|m| m.name == "__name__")
                    .map(|m| m.value.clone())
            });
            self.0
                .insert(name.ok_or("a selector without a metric name")?);
            Ok(true)
        }
    }
    let mut names = Names(BTreeSet::new());
    walk_expr(&mut names, expr).unwrap();
    names.0
}

#[test]
fn the_data_source_is_a_variable_and_every_expression_parses() {
    let dashboard = dashboard();
    assert!(
        dashboard["schemaVersion"].as_u64().unwrap() >= 36,
        "Grafana 10's schema"
    );
    let variables = dashboard["templating"]["list"].as_array().unwrap();
    assert!(
        variables.iter().any(|v| v["name"] == "datasource"
            && v["type"] == "datasource"
            && v["query"] == "prometheus"),
        "a Prometheus data source variable"
    );
    let expressions = expressions(&dashboard);
    assert!(expressions.len() >= 20, "{expressions:?}");
    for panel in panels(&dashboard) {
        if panel["type"] == "row" {
            continue;
        }
        let title = &panel["title"];
        assert!(title.as_str().is_some_and(|t| !t.is_empty()));
        assert!(panel["description"].as_str().is_some(), "{title}");
        assert_eq!(panel["datasource"]["uid"], "${datasource}", "{title}");
        for target in panel["targets"].as_array().unwrap() {
            assert_eq!(target["datasource"]["uid"], "${datasource}", "{title}");
        }
    }
    for (place, expr) in expressions {
        let parsed = parser::parse(&as_sent(&expr))
            .unwrap_or_else(|e| panic!("{place}: {expr}\ndoes not parse as PromQL: {e}"));
        assert!(!metric_names(&parsed).is_empty(), "{place}: {expr}");
    }
}

#[test]
fn a_wrong_expression_or_a_missing_name_is_caught() {
    assert!(parser::parse("sum(rate(x[5m])").is_err());
    assert!(parser::parse(&as_sent("rate(x[$__rate_interval])")).is_ok());
    let parsed = parser::parse(
        "sum by (a) (rate(a_total{job=~\"$job\"}[5m])) / max(b) + max_over_time(c[1m:])",
    )
    .unwrap();
    assert_eq!(
        metric_names(&parsed),
        BTreeSet::from(["a_total".into(), "b".into(), "c".into()])
    );
}

/// A cluster on which every series of the dashboard gets a sample.
fn cluster() -> MemApi {
    let api = MemApi::new();
    api.create(&storage_class(
        "external",
        "example.com/external",
        "Immediate",
    ))
    .unwrap();
    api.create(&volume("static", "1Gi").build()).unwrap();
    api.create(&claim("static", "uid-static", "1Gi").class("").build())
        .unwrap();
    // Pending for good: its provisioner is someone else.
    api.create(
        &claim("external", "uid-external", "1Gi")
            .class("external")
            .build(),
    )
    .unwrap();
    // Released hostPath volumes: deleted, recycled by a pod the stand-in
    // kubelet finishes, and one the hostPath deleter refuses (not under
    // /tmp): a failed operation.
    let scratch =
        std::env::temp_dir().join(format!("pv-controller-dashboard-{}", std::process::id()));
    for (name, policy, path) in [
        ("deleted", "Delete", scratch.join("deleted")),
        ("recycled", "Recycle", scratch.join("recycled")),
        (
            "undeletable",
            "Delete",
            std::path::PathBuf::from("/srv/pv-controller-dashboard"),
        ),
    ] {
        let released = volume(name, "1Gi")
            .bound_to(&format!("uid-gone-{name}"), &format!("gone-{name}"))
            .phase("Bound")
            .policy(policy)
            .host_path(&path.display().to_string())
            .build();
        api.create(&released).unwrap();
    }
    // The ephemeral volume controller makes this pod's claim.
    let web = with_ephemeral_volume(
        pod("web", &[], "Pending", None),
        "cache",
        claim("template", "", "1Gi").class("external").build(),
    );
    api.create(&web).unwrap();
    // The ResourceClaim controller makes this pod's claim from a template.
    let objects = serde_json::json!([
        { "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
          "metadata": { "name": "gpu", "namespace": "default" }, "spec": { "spec": {} } },
        { "apiVersion": "v1", "kind": "Pod",
          "metadata": { "name": "trainer", "namespace": "default", "uid": "uid-trainer" },
          "spec": { "containers": [ { "name": "c", "image": "busybox" } ],
                    "resourceClaims": [ { "name": "gpu", "resourceClaimTemplateName": "gpu" } ] } },
    ]);
    for object in objects.as_array().into_iter().flatten() {
        api.load_yaml(&serde_json::to_string(object).unwrap())
            .unwrap();
    }
    // The first claim write meets a 409.
    api.add_reactor(Reactor::on(Verb::Patch, "persistentvolumeclaims").error(409));
    api
}

/// The series a process exports once it has settled on [`cluster`],
/// acting or in shadow mode, with the names of their labels.
async fn exported(shadow: bool) -> BTreeMap<String, BTreeSet<String>> {
    let api = cluster();
    let kubelet = tokio::spawn(stand_in_kubelet(api.client()));
    let plugins = pv_controller::plugin_config(&Options::parse_from(["pv-controller"])).unwrap();
    let config = AppConfig {
        persistentvolume: pv::Config {
            resync_period: Duration::from_secs(2),
            settings: Settings {
                plugins: VolumePlugins::from_config(&plugins),
                ..Settings::default()
            },
            ..pv::Config::default()
        },
        shadow: shadow.then(|| ShadowConfig {
            window: Duration::from_secs(4),
        }),
        ..AppConfig::default()
    };
    let app = App::start(clients(&api), config).await.unwrap();
    let idle = app.idle_probe();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let metrics = app.metrics();
    let health = app.health();
    let running = tokio::spawn(app.run(async move {
        let _ = stopped.await;
    }));
    settle(&api, &idle).await;
    // Past shadow mode's window, so that decisions are judged.
    tokio::time::sleep(Duration::from_secs(10)).await;
    settle(&api, &idle).await;
    let names = scrape_router(metrics, health).await;
    let _ = stop.send(());
    running.await.unwrap().unwrap();
    kubelet.abort();
    names
}

/// The names of the samples a scrape of `/metrics` shows (a histogram's
/// `_bucket`, `_sum` and `_count` as such), with their labels' names.
async fn scrape_router(
    metrics: std::sync::Arc<pv_controller::Metrics>,
    health: pv_controller::Health,
) -> BTreeMap<String, BTreeSet<String>> {
    let mut series: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let text = crate::harness::scrape_metrics(metrics, health).await;
    for line in text
        .lines()
        .filter(|line| !line.starts_with('#') && !line.is_empty())
    {
        let selector = line.rsplit_once(' ').map_or(line, |(selector, _)| selector);
        let parsed = parser::parse(selector)
            .unwrap_or_else(|e| panic!("a scraped line that is no selector ({e}): {line}"));
        let (name, labels) = selector_labels(&parsed);
        series.entry(name).or_default().extend(labels);
    }
    series
}

/// The metric name and label names of a plain selector.
fn selector_labels(expr: &Expr) -> (String, BTreeSet<String>) {
    let Expr::VectorSelector(selector) = expr else {
        panic!("not a selector: {expr}");
    };
    let labels = selector
        .matchers
        .matchers
        .iter()
        .map(|m| m.name.clone())
        .filter(|name| name != "__name__")
        .collect();
    (selector.name.clone().unwrap_or_default(), labels)
}

/// The labels Prometheus adds to every series of a target a
/// ServiceMonitor finds (the Prometheus Operator's relabelling).
const TARGET_LABELS: [&str; 7] = [
    "container",
    "endpoint",
    "instance",
    "job",
    "namespace",
    "pod",
    "service",
];

/// The label names a series with `own` labels has once scraped through
/// the ServiceMonitor's endpoint: the target's labels added; a label of
/// the series' own that a target label would clobber is kept when the
/// endpoint honors labels, renamed `exported_<name>` otherwise.
fn as_scraped(endpoint: &Value, own: &BTreeSet<String>) -> BTreeSet<String> {
    let honor = endpoint["honorLabels"] == true;
    let mut labels: BTreeSet<String> = TARGET_LABELS.iter().map(|l| (*l).to_string()).collect();
    for label in own {
        if honor || !TARGET_LABELS.contains(&label.as_str()) {
            labels.insert(label.clone());
        } else {
            labels.insert(format!("exported_{label}"));
        }
    }
    labels
}

#[test]
fn scraped_labels_follow_the_service_monitor() {
    let own = BTreeSet::from(["namespace".to_string(), "storage_class".to_string()]);
    let honored = as_scraped(&serde_json::json!({"honorLabels": true}), &own);
    assert!(honored.contains("namespace") && !honored.contains("exported_namespace"));
    let clobbered = as_scraped(&serde_json::json!({}), &own);
    assert!(clobbered.contains("exported_namespace"), "{clobbered:?}");
}

/// A YAML file of deploy/ as JSON values.
fn deploy_yaml(path: &str) -> Value {
    let text =
        std::fs::read_to_string(format!("{}/deploy/{path}", env!("CARGO_MANIFEST_DIR"))).unwrap();
    serde_saphyr::from_str(&text).unwrap()
}

/// Each alert of deploy/base/prometheusrule.yaml: its name and expression.
fn alerts() -> Vec<(String, String)> {
    let rule = deploy_yaml("base/prometheusrule.yaml");
    let mut alerts = Vec::new();
    for group in rule["spec"]["groups"].as_array().unwrap() {
        for rule in group["rules"].as_array().unwrap() {
            alerts.push((
                rule["alert"].as_str().unwrap().to_string(),
                rule["expr"].as_str().unwrap().to_string(),
            ));
        }
    }
    alerts
}

/// Every alert says what it means (`description`) and links its runbook,
/// a section of docs/troubleshooting.md that exists.
#[test]
fn every_alert_has_a_description_and_a_runbook() {
    let troubleshooting = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/docs/troubleshooting.md"
    ))
    .unwrap();
    let anchors: BTreeSet<String> = troubleshooting
        .lines()
        .filter_map(|line| line.strip_prefix("## "))
        .map(|heading| {
            heading
                .to_lowercase()
                .chars()
                .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-')
                .map(|c| if c == ' ' { '-' } else { c })
                .collect()
        })
        .collect();
    let rule = deploy_yaml("base/prometheusrule.yaml");
    for group in rule["spec"]["groups"].as_array().unwrap() {
        for rule in group["rules"].as_array().unwrap() {
            let alert = rule["alert"].as_str().unwrap();
            let annotations = &rule["annotations"];
            assert!(
                annotations["description"]
                    .as_str()
                    .is_some_and(|d| d.len() > 40),
                "{alert} has no description"
            );
            let url = annotations["runbook_url"].as_str().unwrap_or_default();
            let anchor = url
                .strip_prefix(
                    "https://github.com/example/pv-controller/blob/main/docs/troubleshooting.md#",
                )
                .unwrap_or_else(|| panic!("{alert}: runbook {url:?}"));
            assert_eq!(anchor, alert.to_lowercase(), "{alert}");
            assert!(anchors.contains(anchor), "{alert}: no section {anchor}");
        }
    }
}

#[test]
fn every_alert_is_tested_firing_and_silent() {
    let tests = deploy_yaml("test/prometheusrule.test.yaml");
    let mut firing = BTreeSet::new();
    let mut silent = BTreeSet::new();
    for case in tests["tests"].as_array().unwrap() {
        for check in case["alert_rule_test"].as_array().unwrap() {
            let name = check["alertname"].as_str().unwrap().to_string();
            if check["exp_alerts"]
                .as_array()
                .is_some_and(|a| !a.is_empty())
            {
                firing.insert(name);
            } else {
                silent.insert(name);
            }
        }
    }
    for (alert, _) in alerts() {
        assert!(firing.contains(&alert), "{alert} is never tested firing");
        assert!(silent.contains(&alert), "{alert} is never tested silent");
    }
}

/// Every series the dashboard, the alerts and their unit tests name is one
/// the process exports; each series the alerts' unit tests feed has the
/// labels a Prometheus Operator scrape through the ServiceMonitor gives it
/// (so the claim gauges keep their claim's namespace); and no selector of
/// the dashboard takes a claim gauge's namespace for the controller's.
#[tokio::test(start_paused = true)]
async fn every_series_the_dashboard_and_the_alerts_name_is_exported() {
    let mut series = exported(false).await;
    for (name, labels) in exported(true).await {
        series.entry(name).or_default().extend(labels);
    }
    // Prometheus' own series of each scrape target.
    series.insert("up".to_string(), BTreeSet::new());
    let exported_names: BTreeSet<String> = series.keys().cloned().collect();
    let monitor = deploy_yaml("base/servicemonitor.yaml");
    let endpoint = &monitor["spec"]["endpoints"][0];
    let tests = deploy_yaml("test/prometheusrule.test.yaml");
    let mut mislabelled = Vec::new();
    for case in tests["tests"].as_array().unwrap() {
        for input in case["input_series"].as_array().unwrap() {
            let parsed = parser::parse(input["series"].as_str().unwrap()).unwrap();
            let (name, labels) = selector_labels(&parsed);
            let Some(own) = series.get(&name) else {
                continue;
            };
            let scraped = as_scraped(endpoint, own);
            if labels != scraped {
                mislabelled.push(format!("{name}: fed {labels:?}, scraped {scraped:?}"));
            }
        }
    }
    assert!(
        mislabelled.is_empty(),
        "the alerts' tests feed series as no scrape labels them: {mislabelled:#?}"
    );
    let claim_gauges: BTreeSet<&String> = series
        .iter()
        .filter(|(_, labels)| labels.contains("namespace"))
        .map(|(name, _)| name)
        .collect();
    assert!(
        claim_gauges.contains(&"pv_collector_unbound_pvc_count".to_string()),
        "{claim_gauges:?}"
    );
    for (place, expr) in expressions(&dashboard()) {
        for gauge in &claim_gauges {
            assert!(
                !expr.contains(&format!(
                    "{gauge}{{job=~\"$job\", namespace=~\"$namespace\""
                )),
                "{place}: {expr} selects a claim gauge by the controller's namespace"
            );
        }
    }
    let mut named: Vec<(String, String)> = expressions(&dashboard());
    named.extend(
        alerts()
            .into_iter()
            .map(|(alert, expr)| (format!("alert {alert}"), expr)),
    );
    let tests = deploy_yaml("test/prometheusrule.test.yaml");
    for case in tests["tests"].as_array().unwrap() {
        for input in case["input_series"].as_array().unwrap() {
            let series = input["series"].as_str().unwrap().to_string();
            named.push(("an alert's unit test".to_string(), series));
        }
    }
    let mut missing = BTreeSet::new();
    for (place, expr) in named {
        let parsed = parser::parse(&as_sent(&expr)).unwrap();
        for name in metric_names(&parsed) {
            if !exported_names.contains(&name) {
                missing.insert(format!("{name} ({place})"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "series named that the process does not export: {missing:#?}\nexported: {exported_names:#?}"
    );
}
