//! Least privilege, checked: the process runs every controller on memapi,
//! elected, through binding, provisioning hand-off, in-process hostPath
//! provisioning, delayed binding, reclaim (recycle and delete), a pod's
//! ephemeral volume, resource claims, events, leader election and a scrape
//! of the secure port (its TokenReview and SubjectAccessReview, which the
//! binding to `system:auth-delegator` grants). It runs as its
//! ServiceAccount on a server that authorizes every request by the rules
//! deploy/ renders (with the hostPath provisioner's overlay) and enforces
//! OwnerReferencesPermissionEnforcement: no request may be refused, and
//! every rule must be used by some request (or be listed below as needed
//! on a path the run does not take). The first write of each kind the
//! process writes meets a 409, so the write path's re-read of the object
//! after a conflict is taken for every kind.

use std::time::Duration;

use crate::process::settle;
use clap::Parser;
use memapi::{MemApi, MemApiConfig, Reactor, RequestLogEntry, Verb};
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
use serde_json::Value;
use testkit::*;

/// Rules this run may or may not exercise, depending on timing: the
/// stand-in kubelet may end the recycler pod before the recycler lists
/// and watches the pod's events (tests/it/recycle.rs relays them); the
/// recycler's get of a pod of its name happens only when one already
/// exists.
const MAYBE_USED: &[(&str, &str, &str)] = &[
    ("", "events", "list"),
    ("", "events", "watch"),
    ("", "pods", "get"),
];

/// Rules no request uses but an admission plugin asks for: the
/// ephemeral claims' blockOwnerDeletion
/// ([`without_pods_finalizers_the_ephemeral_claim_is_refused`]).
const USED_BY_ADMISSION: &[(&str, &str, &str)] = &[("", "pods/finalizers", "update")];

/// The writes (resource, subresource) whose first request is answered with
/// a 409 in the normal run: every kind the write door updates, so that its
/// re-read after a conflict is taken for each.
const CONFLICTED: &[(&str, Option<&str>)] = &[
    ("persistentvolumes", None),
    ("persistentvolumes", Some("status")),
    ("persistentvolumeclaims", None),
    ("resourceclaims", None),
    ("resourceclaims", Some("status")),
];

/// The namespace of the ServiceAccount the process runs as.
const NAMESPACE: &str = "pv-controller";

/// One grant of a rendered rule: where (`None`: every namespace and the
/// cluster scope), API group, resource (`plural` or `plural/subresource`),
/// verb, and the object names it is limited to (empty: any).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Grant {
    namespace: Option<String>,
    group: String,
    resource: String,
    verb: String,
    names: Vec<String>,
}

impl Grant {
    /// Whether a request of the log falls under this grant.
    fn covers(&self, entry: &RequestLogEntry) -> bool {
        let resource = match &entry.subresource {
            Some(sub) => format!("{}/{sub}", entry.resource),
            None => entry.resource.clone(),
        };
        self.namespace
            .as_ref()
            .is_none_or(|ns| entry.namespace.as_ref() == Some(ns))
            && self.group == entry.group
            && self.resource == resource
            && self.verb == entry.verb.to_string()
            && (self.names.is_empty()
                || entry.name.as_ref().is_some_and(|n| self.names.contains(n)))
    }
}

/// The objects of a kustomization under the crate's root as kubectl
/// renders it, or, without kubectl, `files` (relative to deploy/) read
/// as they are, with `pv-controller` as the namespace of every Role and
/// RoleBinding that names none and the JSON patches of `patches` (file,
/// ClusterRole name) applied: what the kustomization does to them.
fn rendered(directory: &str, files: &[&str], patches: &[(&str, &str)]) -> Vec<Value> {
    let root = env!("CARGO_MANIFEST_DIR");
    if let Ok(output) = std::process::Command::new("kubectl")
        .args(["kustomize", &format!("{root}/{directory}")])
        .output()
    {
        assert!(
            output.status.success(),
            "kubectl kustomize {directory} failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        return documents(&String::from_utf8(output.stdout).unwrap());
    }
    let mut objects: Vec<Value> = files
        .iter()
        .flat_map(|file| {
            documents(&std::fs::read_to_string(format!("{root}/deploy/{file}")).unwrap())
        })
        .collect();
    for object in &mut objects {
        let namespaced = matches!(object["kind"].as_str(), Some("Role" | "RoleBinding"));
        if namespaced && object["metadata"]["namespace"].is_null() {
            object["metadata"]["namespace"] = NAMESPACE.into();
        }
    }
    for (file, role) in patches {
        let text = std::fs::read_to_string(format!("{root}/deploy/{file}")).unwrap();
        let operations: Vec<Value> = serde_saphyr::from_str(&text).unwrap();
        let target = objects
            .iter_mut()
            .find(|o| o["kind"] == "ClusterRole" && o["metadata"]["name"] == *role)
            .unwrap();
        for operation in operations {
            match (operation["op"].as_str(), operation["path"].as_str()) {
                (Some("add"), Some("/rules/-")) => target["rules"]
                    .as_array_mut()
                    .unwrap()
                    .push(operation["value"].clone()),
                (Some("replace"), Some("/rules")) => target["rules"] = operation["value"].clone(),
                other => panic!("patch {other:?} of {file} not understood"),
            }
        }
    }
    objects
}

fn documents(text: &str) -> Vec<Value> {
    serde_saphyr::from_multiple::<Value>(text)
        .unwrap()
        .into_iter()
        .filter(|value| !value.is_null())
        .collect()
}

/// The rules deploy/hostpath-provisioner/ renders: the base's and the
/// provisioner's create on volumes.
fn deployed() -> Vec<Value> {
    rendered(
        "deploy/hostpath-provisioner",
        &["base/rbac.yaml"],
        &[("hostpath-provisioner/create-volumes.yaml", "pv-controller")],
    )
}

/// The rules deploy/shadow/ renders.
fn dry_run_rules() -> Vec<Value> {
    let mut objects = rendered(
        "deploy/shadow",
        &["base/rbac.yaml"],
        &[("shadow/read-only-rbac.yaml", "pv-controller")],
    );
    if objects.iter().any(|o| o["kind"] == "Deployment") {
        return objects;
    }
    // Without kubectl: the shadow overlay's names, namespace and deletions.
    objects.retain(|o| o["kind"] == "ClusterRole" || o["kind"] == "ClusterRoleBinding");
    for object in &mut objects {
        let name = format!("{}-shadow", object["metadata"]["name"].as_str().unwrap());
        object["metadata"]["name"] = name.into();
        for subject in object["subjects"].as_array_mut().into_iter().flatten() {
            subject["name"] = "pv-controller-shadow".into();
            subject["namespace"] = "pv-controller-shadow".into();
        }
        if object["roleRef"]["name"] == "pv-controller" {
            object["roleRef"]["name"] = "pv-controller-shadow".into();
        }
    }
    objects
}

/// Every grant of the Roles and ClusterRoles of `objects` to the
/// ServiceAccount `namespace/name`, through their bindings.
fn granted(objects: &[Value], account: (&str, &str)) -> Vec<Grant> {
    let binds = |binding: &Value| {
        binding["subjects"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|s| {
                s["kind"] == "ServiceAccount"
                    && s["namespace"] == account.0
                    && s["name"] == account.1
            })
    };
    let mut grants = Vec::new();
    for binding in objects.iter().filter(|o| {
        matches!(
            o["kind"].as_str(),
            Some("RoleBinding" | "ClusterRoleBinding")
        ) && binds(o)
    }) {
        let namespace = binding["metadata"]["namespace"]
            .as_str()
            .map(str::to_string);
        let role_name = &binding["roleRef"]["name"];
        if role_name == "system:auth-delegator" {
            // The bootstrap role's rules: what the secure port's reviews need.
            for (group, resource) in [
                ("authentication.k8s.io", "tokenreviews"),
                ("authorization.k8s.io", "subjectaccessreviews"),
            ] {
                grants.push(Grant {
                    namespace: None,
                    group: group.into(),
                    resource: resource.into(),
                    verb: "create".into(),
                    names: vec![],
                });
            }
            continue;
        }
        let role = objects
            .iter()
            .find(|o| {
                o["kind"] == binding["roleRef"]["kind"]
                    && o["metadata"]["name"] == *role_name
                    && (o["kind"] == "ClusterRole"
                        || o["metadata"]["namespace"].as_str() == namespace.as_deref())
            })
            .unwrap_or_else(|| panic!("no role for {binding}"));
        for rule in role["rules"].as_array().unwrap() {
            let list = |key: &str| -> Vec<String> {
                rule[key]
                    .as_array()
                    .into_iter()
                    .flatten()
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
                        grants.push(Grant {
                            namespace: namespace.clone(),
                            group: group.clone(),
                            resource: resource.clone(),
                            verb,
                            names: list("resourceNames"),
                        });
                    }
                }
            }
        }
    }
    grants.sort();
    grants.dedup();
    grants
}

/// The rendered objects as YAML, for [`MemApi::load_rbac`].
fn yaml(objects: &[Value]) -> String {
    objects
        .iter()
        .map(|o| serde_saphyr::to_string(o).unwrap())
        .collect::<Vec<_>>()
        .join("---\n")
}

/// How the process runs: elected and writing, or in shadow mode.
#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Normal,
    Comparison,
}

/// Runs the controller through every kind of work it does today (elected,
/// or in shadow mode) as the ServiceAccount `account`, on a server that
/// authorizes its requests by the Roles and bindings of `rules` and
/// enforces OwnerReferencesPermissionEnforcement; returns the server and
/// the process's requests.
async fn exercised(
    mode: Mode,
    rules: &[Value],
    account: (&str, &str),
) -> (MemApi, Vec<RequestLogEntry>) {
    let api = MemApi::with_config(MemApiConfig {
        owner_references_permission_enforcement: true,
        ..MemApiConfig::default()
    });
    assert!(api.load_rbac(&yaml(rules)).unwrap() > 0);
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
    let scratch = std::env::temp_dir().join(format!(
        "pv-controller-rbac-{}-{}",
        std::process::id(),
        api.resource_version()
    ));
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
    // A claim of the in-process hostPath provisioner (the overlay's
    // create on volumes).
    api.create(&storage_class(
        "hostpath",
        "kubernetes.io/host-path",
        "Immediate",
    ))
    .unwrap();
    api.create(
        &claim("provisioned", "uid-provisioned", "1Gi")
            .class("hostpath")
            .build(),
    )
    .unwrap();
    seed_resource_claims(&api);
    if mode == Mode::Normal {
        for (resource, part) in CONFLICTED {
            let reactor = Reactor::on(Verb::Patch, resource).error(409);
            api.add_reactor(match part {
                Some(subresource) => reactor.subresource(subresource),
                None => reactor.main_resource(),
            });
        }
    }
    let kubelet = tokio::spawn(stand_in_kubelet(api.client()));
    let root = scratch.join("provisioned").display().to_string();
    let options = Options::parse_from([
        "pv-controller",
        "--enable-hostpath-provisioner=true",
        "--hostpath-provisioner-root",
        &root,
    ]);
    let plugins = pv_controller::plugin_config(&options).unwrap();
    let user = format!("system:serviceaccount:{}:{}", account.0, account.1);
    let clients = Clients::build(
        kube::client::ClientBuilder::new(api.service_as(&user, &[]), "default"),
        kube::client::ClientBuilder::new(api.service_as(&user, &[]), "default"),
        kube::client::ClientBuilder::new(api.service_as(&user, &[]), "default"),
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
        election: Some(LeaseConfig::new(account.0, "pv-controller", "only")),
        secure: Some(crate::admin::secure_serving()),
        shadow: (mode == Mode::Comparison).then(|| ShadowConfig {
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
    let _ = std::fs::remove_dir_all(&scratch);
    let used = api
        .requests()
        .log()
        .iter()
        .filter(|entry| entry.user.as_deref() == Some(user.as_str()))
        .cloned()
        .collect();
    (api, used)
}

/// The requests the server refused.
fn refused(used: &[RequestLogEntry]) -> Vec<String> {
    used.iter()
        .filter(|entry| entry.code == Some(403))
        .map(|entry| format!("{entry:?}"))
        .collect()
}

#[tokio::test(start_paused = true)]
async fn every_request_is_allowed_and_every_rule_is_used() {
    let rules = deployed();
    let (api, used) = exercised(Mode::Normal, &rules, (NAMESPACE, "pv-controller")).await;
    assert!(
        api.get::<k8s_openapi::api::core::v1::PersistentVolume>(None, "deleted")
            .is_none()
    );
    assert!(
        api.get::<k8s_openapi::api::core::v1::PersistentVolumeClaim>(Some("default"), "web-cache")
            .is_some(),
        "the ephemeral volume's claim was made"
    );
    assert!(
        api.get::<k8s_openapi::api::core::v1::PersistentVolume>(None, "pvc-uid-provisioned")
            .is_some(),
        "the hostPath provisioner made a volume"
    );
    assert_eq!(
        api.get::<k8s_openapi::api::core::v1::PersistentVolume>(None, "recycled")
            .and_then(|v| v.status)
            .and_then(|s| s.phase)
            .as_deref(),
        Some("Available"),
        "the volume was recycled"
    );
    assert_eq!(refused(&used), Vec::<String>::new(), "refused requests");
    // Each conflict was met, and the object read again after it.
    for (resource, part) in CONFLICTED {
        let conflicts = api.requests().count_code(Verb::Patch, resource, *part, 409);
        assert_eq!(conflicts, 1, "{resource} {part:?}: one 409");
        let reread = used.iter().any(|entry| {
            entry.resource == *resource && entry.verb == Verb::Get && entry.name.is_some()
        });
        assert!(reread, "{resource}: read again after its conflict");
    }
    let expected_work = [
        ("", "persistentvolumes/status", "patch"),
        ("", "persistentvolumes", "create"),
        ("", "persistentvolumes", "delete"),
        ("", "pods", "create"),
        ("", "pods", "delete"),
        ("", "events", "create"),
        ("", "events", "patch"),
        ("", "persistentvolumeclaims", "patch"),
        ("", "persistentvolumeclaims", "create"),
        ("coordination.k8s.io", "leases", "create"),
        ("coordination.k8s.io", "leases", "update"),
        ("", "pods", "get"),
        ("", "pods/status", "patch"),
        ("resource.k8s.io", "resourceclaims", "create"),
        ("resource.k8s.io", "resourceclaims", "patch"),
        ("resource.k8s.io", "resourceclaims", "delete"),
        ("resource.k8s.io", "resourceclaims/status", "patch"),
        ("authentication.k8s.io", "tokenreviews", "create"),
        ("authorization.k8s.io", "subjectaccessreviews", "create"),
    ];
    for (group, resource, verb) in expected_work {
        let done = used.iter().any(|entry| {
            let path = match &entry.subresource {
                Some(sub) => format!("{}/{sub}", entry.resource),
                None => entry.resource.clone(),
            };
            entry.group == group && path == resource && entry.verb.to_string() == verb
        });
        assert!(done, "the run did not exercise {group}/{resource} {verb}");
    }
    let maybe = |grant: &Grant| {
        MAYBE_USED
            .iter()
            .chain(USED_BY_ADMISSION)
            .any(|(g, r, v)| grant.group == *g && grant.resource == *r && grant.verb == *v)
    };
    let unused: Vec<Grant> = granted(&rules, (NAMESPACE, "pv-controller"))
        .into_iter()
        .filter(|grant| !used.iter().any(|entry| grant.covers(entry)) && !maybe(grant))
        .collect();
    assert!(unused.is_empty(), "rules no request used: {unused:?}");
}

/// The ephemeral volume controller owns each claim it makes by the pod
/// with blockOwnerDeletion: where OwnerReferencesPermissionEnforcement is
/// on, that needs update on pods/finalizers; without it the claim is
/// refused and never made.
#[tokio::test(start_paused = true)]
async fn without_pods_finalizers_the_ephemeral_claim_is_refused() {
    let mut rules = deployed();
    for role in rules.iter_mut().filter(|o| o["kind"] == "ClusterRole") {
        for rule in role["rules"].as_array_mut().into_iter().flatten() {
            if let Some(resources) = rule["resources"].as_array_mut() {
                resources.retain(|r| r != "pods/finalizers");
            }
        }
    }
    let (api, used) = exercised(Mode::Normal, &rules, (NAMESPACE, "pv-controller")).await;
    assert!(
        api.get::<k8s_openapi::api::core::v1::PersistentVolumeClaim>(Some("default"), "web-cache")
            .is_none(),
        "no claim without pods/finalizers"
    );
    let refused_creates = used
        .iter()
        .filter(|e| e.resource == "persistentvolumeclaims" && e.code == Some(403))
        .count();
    assert!(refused_creates > 0, "the claim's create was refused");
}

#[tokio::test(start_paused = true)]
async fn a_dry_run_reads_only_what_its_read_only_role_allows() {
    let rules = dry_run_rules();
    let account = ("pv-controller-shadow", "pv-controller-shadow");
    let (api, used) = exercised(Mode::Comparison, &rules, account).await;
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
    let writes: Vec<String> = used
        .iter()
        .filter(|e| !matches!(e.verb.to_string().as_str(), "get" | "list" | "watch"))
        .filter(|e| !matches!(e.resource.as_str(), "tokenreviews" | "subjectaccessreviews"))
        .map(|e| format!("{e:?}"))
        .collect();
    assert!(writes.is_empty(), "shadow mode wrote: {writes:?}");
    assert_eq!(refused(&used), Vec::<String>::new(), "refused requests");
    let grants = granted(&rules, account);
    assert!(
        grants.iter().all(
            |g| !matches!(g.verb.as_str(), "create" | "update" | "patch" | "delete")
                || matches!(g.resource.as_str(), "tokenreviews" | "subjectaccessreviews")
        ),
        "the shadow role writes nothing: {grants:?}"
    );
    for (group, resource, verb) in [
        ("", "persistentvolumes", "watch"),
        ("", "persistentvolumeclaims", "watch"),
        ("", "pods", "watch"),
        ("resource.k8s.io", "resourceclaims", "watch"),
        ("authorization.k8s.io", "subjectaccessreviews", "create"),
    ] {
        let done = used
            .iter()
            .any(|e| e.group == group && e.resource == resource && e.verb.to_string() == verb);
        assert!(done, "not exercised: {group}/{resource} {verb}");
    }
}

#[test]
fn wildcards_resource_names_and_namespaces_are_seen() {
    let objects = documents(
        "kind: Role\nmetadata:\n  name: r\n  namespace: a\nrules:\n- apiGroups: [\"\"]\n  resources: [pods, pods/log]\n  resourceNames: [p]\n  verbs: [get]\n---\nkind: RoleBinding\nmetadata:\n  name: r\n  namespace: a\nroleRef:\n  kind: Role\n  name: r\nsubjects:\n- kind: ServiceAccount\n  namespace: s\n  name: account\n",
    );
    let grants = granted(&objects, ("s", "account"));
    assert_eq!(grants.len(), 2);
    assert_eq!(grants[1].resource, "pods/log");
    assert_eq!(grants[1].namespace.as_deref(), Some("a"));
    assert_eq!(grants[1].names, ["p"]);
    assert!(granted(&objects, ("s", "other")).is_empty());
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

/// docs/operations.md's table of the ServiceAccount's rules lists exactly
/// the rules deploy/ renders (with the hostPath provisioner's overlay).
#[test]
fn the_documented_rules_are_the_rendered_ones() {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/operations.md"))
        .unwrap();
    let split = |cell: &str| -> Vec<String> {
        cell.split(',')
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .map(str::to_string)
            .collect()
    };
    let mut documented: Vec<Grant> = Vec::new();
    for line in text.lines().map(str::trim) {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        // | Granted by | Namespace | API group | Resources | Verbs | Names | Needed by |
        if cells.len() != 9 || !cells[1].starts_with("Cluster") && !cells[1].starts_with("Role ") {
            continue;
        }
        let group = if cells[3] == "core" { "" } else { cells[3] };
        for resource in split(cells[4]) {
            for verb in split(cells[5]) {
                documented.push(Grant {
                    namespace: Some(cells[2]).filter(|n| !n.is_empty()).map(str::to_string),
                    group: group.to_string(),
                    resource: resource.clone(),
                    verb,
                    names: split(cells[6]),
                });
            }
        }
    }
    documented.sort();
    documented.dedup();
    assert!(!documented.is_empty(), "no table found");
    assert_eq!(
        documented,
        granted(&deployed(), (NAMESPACE, "pv-controller"))
    );
}
