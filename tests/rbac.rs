//! Least privilege, checked: the controller runs on memapi through binding,
//! provisioning hand-off, delayed binding, events and leader election; every
//! request it makes must be allowed by deploy/rbac.yaml, and every rule
//! there must be used by some request (or be listed below as needed by the
//! reclaim work).

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::builders::*;
use common::harness::settle;
use pv_controller::controller_base::{BaseConfig, ControllerBase};
use pv_controller::leader::{LeaderElector, LeaseConfig};
use pv_controller::memapi::MemApi;
use serde::Deserialize;
use serde_json::Value;

/// Rules the recycler and deleter of the reclaim work need and this build
/// does not exercise yet: the recycler pod (create, get, delete) and the
/// deletion of a reclaimed volume. Remove each entry once a test covers it.
const USED_BY_RECLAIM: &[(&str, &str, &str)] = &[
    ("", "pods", "create"),
    ("", "pods", "get"),
    ("", "pods", "delete"),
    ("", "persistentvolumes", "delete"),
];

/// One permission: API group, resource (`plural` or `plural/subresource`), verb.
type Permission = (String, String, String);

/// Every permission granted by the ClusterRoles and Roles of a YAML stream.
fn granted(yaml: &str) -> BTreeSet<Permission> {
    let mut permissions = BTreeSet::new();
    for document in serde_yaml_ng::Deserializer::from_str(yaml) {
        let object = Value::deserialize(document).unwrap();
        let kind = object["kind"].as_str().unwrap_or("");
        if kind != "ClusterRole" && kind != "Role" {
            continue;
        }
        for rule in object["rules"].as_array().unwrap() {
            let list = |key: &str| -> Vec<String> {
                rule[key]
                    .as_array()
                    .unwrap_or_else(|| panic!("rule without {key}: {rule}"))
                    .iter()
                    .map(|v| v.as_str().unwrap().to_string())
                    .collect()
            };
            for group in list("apiGroups") {
                for resource in list("resources") {
                    for verb in list("verbs") {
                        assert!(
                            group != "*" && resource != "*" && verb != "*",
                            "no wildcards: {rule}"
                        );
                        permissions.insert((group.clone(), resource.clone(), verb));
                    }
                }
            }
        }
    }
    permissions
}

/// Runs the controller, elected, through every kind of work it does today
/// and returns the permissions its requests needed.
async fn exercised() -> BTreeSet<Permission> {
    let api = MemApi::new();
    api.create(&storage_class(
        "external",
        "example.com/external",
        "Immediate",
    ))
    .unwrap();
    api.create(&default_class(storage_class(
        "default",
        "example.com/default",
        "Immediate",
    )))
    .unwrap();
    api.create(&storage_class(
        "late",
        "example.com/late",
        "WaitForFirstConsumer",
    ))
    .unwrap();
    api.create(&volume("static", "1Gi").build()).unwrap();
    api.create(&claim("static", "uid-static", "1Gi").build())
        .unwrap();
    api.create(
        &claim("external", "uid-external", "1Gi")
            .class("external")
            .build(),
    )
    .unwrap();
    let mut unclassed = claim("unclassed", "uid-unclassed", "1Gi").build();
    unclassed.spec.as_mut().unwrap().storage_class_name = None;
    api.create(&unclassed).unwrap();
    api.create(&claim("late", "uid-late", "1Gi").class("late").build())
        .unwrap();
    api.create(&pod("user", &["late"], "Pending", None))
        .unwrap();
    api.create(
        &volume("released", "1Gi")
            .bound_to("uid-gone", "gone")
            .phase("Bound")
            .build(),
    )
    .unwrap();

    let base = ControllerBase::new(
        api.client(),
        BaseConfig {
            resync_period: Duration::from_secs(2),
            ..BaseConfig::default()
        },
    )
    .unwrap();
    let idle = base.idle_probe();
    let elector = LeaderElector::new(
        api.client(),
        LeaseConfig::new("pv-controller", "pv-controller", "only"),
    );
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(base.run_elected(elector, async move {
        let _ = stopped.await;
    }));
    settle(&api, &idle).await;
    let _ = stop.send(());
    running.await.unwrap().unwrap();

    api.requests()
        .log()
        .iter()
        .map(|entry| {
            let resource = match &entry.subresource {
                Some(sub) => format!("{}/{sub}", entry.resource),
                None => entry.resource.clone(),
            };
            (entry.group.clone(), resource, entry.verb.to_string())
        })
        .collect()
}

#[tokio::test(start_paused = true)]
async fn every_request_is_allowed_and_every_rule_is_used() {
    let yaml =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/rbac.yaml")).unwrap();
    let granted = granted(&yaml);
    let used = exercised().await;
    let expected_work = [
        ("", "persistentvolumes/status", "update"),
        ("", "persistentvolumeclaims", "update"),
        ("events.k8s.io", "events", "patch"),
        ("coordination.k8s.io", "leases", "update"),
    ];
    for (group, resource, verb) in expected_work {
        let permission = (group.to_string(), resource.to_string(), verb.to_string());
        assert!(
            used.contains(&permission),
            "the run did not exercise {permission:?}"
        );
    }

    let not_allowed: Vec<&Permission> = used.difference(&granted).collect();
    assert!(
        not_allowed.is_empty(),
        "requests deploy/rbac.yaml does not allow: {not_allowed:?}"
    );
    let reclaim: BTreeSet<Permission> = USED_BY_RECLAIM
        .iter()
        .map(|(g, r, v)| (g.to_string(), r.to_string(), v.to_string()))
        .collect();
    let unused: Vec<&Permission> = granted
        .difference(&used)
        .filter(|p| !reclaim.contains(*p))
        .collect();
    assert!(unused.is_empty(), "rules no request used: {unused:?}");
    let stale: Vec<&Permission> = reclaim.intersection(&used).collect();
    assert!(
        stale.is_empty(),
        "now exercised, remove from USED_BY_RECLAIM: {stale:?}"
    );
    let ungranted: Vec<&Permission> = reclaim.difference(&granted).collect();
    assert!(
        ungranted.is_empty(),
        "reclaim allowance not in rbac.yaml: {ungranted:?}"
    );
}

#[test]
fn wildcards_and_unknown_rules_are_seen() {
    let permissions = granted(
        "kind: Role\nrules:\n- apiGroups: [\"\"]\n  resources: [pods, pods/log]\n  verbs: [get]\n",
    );
    assert_eq!(permissions.len(), 2);
    assert!(permissions.contains(&("".into(), "pods/log".into(), "get".into())));
}
