//! Least privilege, checked: the process runs every controller on memapi,
//! elected, through binding, provisioning hand-off, delayed binding,
//! reclaim, a pod's ephemeral volume, events, leader election and a scrape
//! of the secure port (its TokenReview and SubjectAccessReview, which the
//! binding to `system:auth-delegator` grants); every
//! request it makes must be allowed by deploy/base/rbac.yaml, and every rule
//! there must be used by some request (or be listed below as needed on a
//! path the run does not take).

use std::collections::BTreeSet;
use std::time::Duration;

use crate::pod_harness::settle;
use clap::Parser;
use memapi::MemApi;
use pv_controller::App;
use pv_controller::AppConfig;
use pv_controller::ClientOptions;
use pv_controller::Clients;
use pv_controller::LeaseConfig;
use pv_controller::Options;
use pv_controller::ShadowConfig;
use pv_controller::pv;
use pv_controller::pv::Settings;
use pv_controller::pv::VolumePlugins;
use pv_controller::testing::stand_in_kubelet;
use serde::Deserialize;
use serde_json::Value;
use testkit::*;

/// Rules needed on paths this run does not take: creating volumes with the
/// opt-in in-process hostPath provisioner (--enable-hostpath-provisioner;
/// tests/provision.rs covers it). Remove an entry once the run exercises it.
const USED_BY_RECLAIM: &[(&str, &str, &str)] = &[("", "persistentvolumes", "create")];

/// Rules this run may or may not exercise, depending on timing: the
/// recycler's event watch follows its list, and the stand-in kubelet may
/// end the pod before the watch starts.
const MAYBE_USED: &[(&str, &str, &str)] = &[("", "events", "watch")];

/// One permission: API group, resource (`plural` or `plural/subresource`), verb.
type Permission = (String, String, String);

/// Every permission granted by the ClusterRoles and Roles of a YAML stream.
fn granted(yaml: &str) -> BTreeSet<Permission> {
    let mut permissions = BTreeSet::new();
    for document in serde_yaml_ng::Deserializer::from_str(yaml) {
        let object = Value::deserialize(document).unwrap();
        let kind = object["kind"].as_str().unwrap_or("");
        if kind == "ClusterRoleBinding" && object["roleRef"]["name"] == "system:auth-delegator" {
            // The bootstrap role's rules: what the secure port's reviews need.
            permissions.insert((
                "authentication.k8s.io".into(),
                "tokenreviews".into(),
                "create".into(),
            ));
            permissions.insert((
                "authorization.k8s.io".into(),
                "subjectaccessreviews".into(),
                "create".into(),
            ));
            continue;
        }
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

/// How the process runs: elected and writing, or in shadow mode.
#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Normal,
    Shadow,
}

/// Runs the controller through every kind of work it does today (elected,
/// or in shadow mode) and returns the server and the permissions its
/// requests needed.
async fn exercised(mode: Mode) -> (MemApi, BTreeSet<Permission>) {
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
    // An explicit empty class: the default class must not take this claim
    // away from the classless volume, whichever of the two syncs first.
    api.create(&claim("static", "uid-static", "1Gi").class("").build())
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

    // Released hostPath volumes: one deleted, one recycled by a pod that the
    // stand-in kubelet finishes.
    let scratch = std::env::temp_dir().join(format!("pv-controller-rbac-{}", std::process::id()));
    for (name, policy) in [("deleted", "Delete"), ("recycled", "Recycle")] {
        let released = volume(name, "1Gi")
            .bound_to(&format!("uid-gone-{name}"), &format!("gone-{name}"))
            .phase("Bound")
            .policy(policy)
            .host_path(&scratch.join(name).display().to_string())
            .build();
        api.create(&released).unwrap();
    }
    // A pod with an ephemeral volume: the ephemeral volume controller
    // creates its claim.
    let web = with_ephemeral_volume(
        pod("web", &[], "Pending", None),
        "cache",
        claim("template", "", "1Gi").class("external").build(),
    );
    api.create(&web).unwrap();
    seed_resource_claims(&api);
    let kubelet = tokio::spawn(stand_in_kubelet(api.client()));
    let options = Options::parse_from(["pv-controller"]);
    let plugins = options.plugin_config().unwrap();
    let clients = Clients::build(
        kube::client::ClientBuilder::new(api.service(), "default"),
        kube::client::ClientBuilder::new(api.service(), "default"),
        kube::client::ClientBuilder::new(api.service(), "default"),
        ClientOptions::default(),
    );
    let config = AppConfig {
        persistentvolume: pv::Config {
            resync_period: Duration::from_secs(2),
            settings: Settings {
                plugins: VolumePlugins::from_config(&plugins),
                ..Settings::default()
            },
            ..pv::Config::default()
        },
        election: Some(LeaseConfig::new("pv-controller", "pv-controller", "only")),
        secure: Some(crate::admin::secure_serving()),
        shadow: (mode == Mode::Shadow).then(|| ShadowConfig {
            window: Duration::from_secs(4),
        }),
        ..AppConfig::default()
    };
    api.add_token("scraper", "prometheus", &[]);
    api.grant("prometheus", "/metrics", "get");
    let app = App::start(clients, config).await.unwrap();
    let secure = app.secure_address().unwrap();
    let idle = app.idle_probe();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(app.run(async move {
        let _ = stopped.await;
    }));
    settle(&api, &idle).await;
    // A scrape of the secure port: its TokenReview and SubjectAccessReview.
    let (code, _) = crate::admin::https_get(secure, "/metrics", Some("scraper")).await;
    assert_eq!(code, 200);
    let _ = stop.send(());
    // Every controller writes its events before the process stops.
    running.await.unwrap().unwrap();
    kubelet.abort();
    let used = api
        .requests()
        .log()
        .iter()
        // The stand-in kubelet's own requests: it finishes recycler pods.
        .filter(|entry| {
            !(entry.resource == "pods"
                && entry.subresource.as_deref() == Some("status")
                && entry
                    .name
                    .as_deref()
                    .is_some_and(|name| name.starts_with("recycler-for-")))
        })
        .map(|entry| {
            let resource = match &entry.subresource {
                Some(sub) => format!("{}/{sub}", entry.resource),
                None => entry.resource.clone(),
            };
            (entry.group.clone(), resource, entry.verb.to_string())
        })
        .collect();
    (api, used)
}

#[tokio::test(start_paused = true)]
async fn every_request_is_allowed_and_every_rule_is_used() {
    let yaml = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/deploy/base/rbac.yaml"
    ))
    .unwrap();
    let granted = granted(&yaml);
    let (api, used) = exercised(Mode::Normal).await;
    assert!(
        api.get::<k8s_openapi::api::core::v1::PersistentVolume>(None, "deleted")
            .is_none()
    );
    assert!(
        api.get::<k8s_openapi::api::core::v1::PersistentVolumeClaim>(Some("default"), "web-cache")
            .is_some(),
        "the ephemeral volume's claim was made"
    );
    let expected_work = [
        ("", "persistentvolumes/status", "update"),
        ("", "persistentvolumes", "delete"),
        ("", "pods", "create"),
        ("", "pods", "delete"),
        ("", "events", "list"),
        ("", "events", "create"),
        ("", "events", "patch"),
        ("", "persistentvolumeclaims", "update"),
        ("", "persistentvolumeclaims", "create"),
        ("coordination.k8s.io", "leases", "update"),
        ("", "pods", "get"),
        ("", "pods/status", "patch"),
        ("resource.k8s.io", "resourceclaims", "create"),
        ("resource.k8s.io", "resourceclaims", "update"),
        ("resource.k8s.io", "resourceclaims", "delete"),
        ("resource.k8s.io", "resourceclaims/status", "update"),
        ("authentication.k8s.io", "tokenreviews", "create"),
        ("authorization.k8s.io", "subjectaccessreviews", "create"),
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
        "requests deploy/base/rbac.yaml does not allow: {not_allowed:?}"
    );
    let reclaim: BTreeSet<Permission> = USED_BY_RECLAIM
        .iter()
        .map(|(g, r, v)| (g.to_string(), r.to_string(), v.to_string()))
        .collect();
    let maybe: BTreeSet<Permission> = MAYBE_USED
        .iter()
        .map(|(g, r, v)| (g.to_string(), r.to_string(), v.to_string()))
        .collect();
    let unused: Vec<&Permission> = granted
        .difference(&used)
        .filter(|p| !reclaim.contains(*p) && !maybe.contains(*p))
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

/// The read-only rules of deploy/shadow/ (the ClusterRole's rules, as its
/// patch sets them) and the auth-delegator binding it keeps from the base.
fn shadow_grants() -> BTreeSet<Permission> {
    let patch = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/deploy/shadow/read-only-rbac.yaml"
    ))
    .unwrap();
    let operations: Vec<Value> = serde_yaml_ng::from_str(&patch).unwrap();
    assert_eq!(operations.len(), 1, "one patch: the rules, replaced");
    assert_eq!(operations[0]["path"], "/rules");
    let role = serde_json::json!({ "kind": "ClusterRole", "rules": operations[0]["value"] });
    let delegator = "kind: ClusterRoleBinding\nroleRef:\n  name: system:auth-delegator\n";
    let mut permissions = granted(&serde_yaml_ng::to_string(&role).unwrap());
    permissions.extend(granted(delegator));
    permissions
}

#[tokio::test(start_paused = true)]
async fn shadow_mode_reads_only_what_its_read_only_role_allows() {
    let granted = shadow_grants();
    let (api, used) = exercised(Mode::Shadow).await;
    assert!(
        api.get::<k8s_openapi::api::core::v1::PersistentVolume>(None, "deleted")
            .is_some(),
        "nothing was deleted"
    );
    assert!(
        api.get::<k8s_openapi::api::core::v1::PersistentVolumeClaim>(Some("default"), "web-cache")
            .is_none(),
        "no claim was made"
    );
    let writes: Vec<&Permission> = used
        .iter()
        .filter(|(_, _, verb)| !matches!(verb.as_str(), "get" | "list" | "watch"))
        .filter(|(_, resource, _)| {
            !matches!(resource.as_str(), "tokenreviews" | "subjectaccessreviews")
        })
        .collect();
    assert!(writes.is_empty(), "shadow mode wrote: {writes:?}");
    let not_allowed: Vec<&Permission> = used.difference(&granted).collect();
    assert!(
        not_allowed.is_empty(),
        "requests deploy/shadow/read-only-rbac.yaml does not allow: {not_allowed:?}"
    );
    for (group, resource, verb) in [
        ("", "persistentvolumes", "watch"),
        ("", "persistentvolumeclaims", "watch"),
        ("", "pods", "watch"),
        ("resource.k8s.io", "resourceclaims", "watch"),
        ("authorization.k8s.io", "subjectaccessreviews", "create"),
    ] {
        let permission = (group.to_string(), resource.to_string(), verb.to_string());
        assert!(used.contains(&permission), "not exercised: {permission:?}");
    }
}

#[test]
fn wildcards_and_unknown_rules_are_seen() {
    let permissions = granted(
        "kind: Role\nrules:\n- apiGroups: [\"\"]\n  resources: [pods, pods/log]\n  verbs: [get]\n",
    );
    assert_eq!(permissions.len(), 2);
    assert!(permissions.contains(&("".into(), "pods/log".into(), "get".into())));
}

/// Objects that give the ResourceClaim controller all its work: a pod whose
/// template needs a claim (create, pod status), a done pod whose allocated
/// claim is released, deallocated, unblocked and deleted, and a claim
/// reserved for a pod the watch never showed (looked up, then dropped).
fn seed_resource_claims(api: &MemApi) {
    let objects = serde_json::json!([
        { "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
          "metadata": { "name": "gpu", "namespace": "default" }, "spec": { "spec": {} } },
        { "apiVersion": "v1", "kind": "Pod",
          "metadata": { "name": "trainer", "namespace": "default", "uid": "uid-trainer" },
          "spec": { "containers": [ { "name": "c", "image": "busybox" } ],
                    "resourceClaims": [ { "name": "gpu", "resourceClaimTemplateName": "gpu" } ] } },
        { "apiVersion": "v1", "kind": "Pod",
          "metadata": { "name": "finished", "namespace": "default", "uid": "uid-finished" },
          "spec": { "nodeName": "node", "containers": [ { "name": "c", "image": "busybox" } ],
                    "resourceClaims": [ { "name": "gpu", "resourceClaimTemplateName": "gpu" } ] },
          "status": { "phase": "Succeeded",
                      "resourceClaimStatuses": [ { "name": "gpu", "resourceClaimName": "finished-gpu-x6zgt" } ] } },
        { "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
          "metadata": { "name": "finished-gpu-x6zgt", "namespace": "default",
                        "finalizers": [ "resource.kubernetes.io/delete-protection" ],
                        "annotations": { "resource.kubernetes.io/pod-claim-name": "gpu" },
                        "ownerReferences": [ { "apiVersion": "v1", "kind": "Pod", "name": "finished",
                                               "uid": "uid-finished", "controller": true } ] },
          "spec": {},
          "status": { "allocation": {},
                      "reservedFor": [ { "resource": "pods", "name": "finished", "uid": "uid-finished" } ] } },
        { "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
          "metadata": { "name": "shared", "namespace": "default" },
          "spec": {},
          "status": { "reservedFor": [ { "resource": "pods", "name": "ghost", "uid": "uid-ghost" } ] } },
    ]);
    for object in objects.as_array().into_iter().flatten() {
        let text = serde_json::to_string(object).unwrap();
        api.load_yaml(&text).unwrap();
    }
}
