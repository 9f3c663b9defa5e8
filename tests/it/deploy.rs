//! deploy/ renders with kustomize (when kubectl is on PATH), and the
//! Deployment's arguments are flags this binary accepts.

use std::collections::BTreeSet;
use std::process::Command;

use clap::Parser;
use pv_controller::Options;
use serde_json::Value;

/// The objects of deploy/, or `None` (with a message) when kubectl is missing.
fn render() -> Option<Vec<Value>> {
    render_dir("deploy")
}

/// The rendered objects of a kustomization under the crate's root, or
/// `None` (with a message) when kubectl is missing.
fn render_dir(directory: &str) -> Option<Vec<Value>> {
    let path = format!("{}/{directory}", env!("CARGO_MANIFEST_DIR"));
    let output = match Command::new("kubectl").args(["kustomize", &path]).output() {
        Ok(output) => output,
        Err(error) => {
            eprintln!("skipping: kubectl not found on PATH ({error})");
            return None;
        }
    };
    assert!(
        output.status.success(),
        "kubectl kustomize {directory}/ failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let text = String::from_utf8(output.stdout).unwrap();
    Some(serde_saphyr::from_multiple(&text).unwrap())
}

#[test]
fn kustomize_renders_every_object() {
    let Some(objects) = render() else { return };
    let mut kinds: Vec<&str> = objects.iter().filter_map(|o| o["kind"].as_str()).collect();
    kinds.sort();
    assert_eq!(
        kinds,
        [
            "ClusterRole",
            "ClusterRole",
            "ClusterRoleBinding",
            "ClusterRoleBinding",
            "ConfigMap",
            "Deployment",
            "FlowSchema",
            "Namespace",
            "PodDisruptionBudget",
            "PriorityLevelConfiguration",
            "PrometheusRule",
            "Role",
            "Role",
            "Role",
            "RoleBinding",
            "RoleBinding",
            "RoleBinding",
            "Service",
            "ServiceAccount",
            "ServiceMonitor"
        ]
    );
    for object in &objects {
        let kind = object["kind"].as_str().unwrap();
        let namespaced = !matches!(
            kind,
            "Namespace"
                | "ClusterRole"
                | "ClusterRoleBinding"
                | "FlowSchema"
                | "PriorityLevelConfiguration"
        );
        let recycler = object["metadata"]["name"] == "pv-controller-recycler";
        if namespaced {
            // The recycler's Role and binding are where its pods are.
            let namespace = if recycler { "default" } else { "pv-controller" };
            assert_eq!(object["metadata"]["namespace"], namespace, "{kind}");
        }
        if !namespaced {
            assert!(object["metadata"]["namespace"].is_null(), "{kind}");
        }
        for subject in object["subjects"].as_array().into_iter().flatten() {
            if subject["kind"] == "ServiceAccount" {
                // kube-prometheus' Prometheus is bound to discover targets here.
                let namespace = if subject["name"] == "prometheus-k8s" {
                    "monitoring"
                } else {
                    "pv-controller"
                };
                assert_eq!(subject["namespace"], namespace, "{kind}");
            }
        }
    }
}

#[test]
fn only_the_hostpath_provisioner_overlay_creates_volumes() {
    let Some(base) = render() else { return };
    let Some(overlay) = render_dir("deploy/hostpath-provisioner") else {
        return;
    };
    let creates_volumes = |objects: &[Value]| {
        objects
            .iter()
            .filter(|o| o["kind"] == "ClusterRole")
            .flat_map(|o| o["rules"].as_array().into_iter().flatten())
            .any(|rule| {
                let has = |key: &str, wanted: &str| {
                    rule[key]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .any(|v| v == wanted)
                };
                has("resources", "persistentvolumes") && has("verbs", "create")
            })
    };
    assert!(!creates_volumes(&base));
    assert!(creates_volumes(&overlay));
    let deployment = overlay.iter().find(|o| o["kind"] == "Deployment").unwrap();
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    let args: Vec<&str> = container["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    let options = Options::try_parse_from(std::iter::once("pv-controller").chain(args))
        .unwrap_or_else(|e| panic!("the overlay's args are refused: {e}"));
    let plugins = pv_controller::plugin_config(&options).unwrap();
    assert!(plugins.enable_host_path_provisioner);
    assert_eq!(
        container["volumeMounts"][0]["mountPath"],
        plugins.host_path_root.display().to_string(),
        "the provisioner's root is writable"
    );
    // The kubelet makes the hostPath directory root's, mode 0755: an init
    // container hands it to the user the controller runs as, with no
    // capability but CHOWN.
    let pod = &deployment["spec"]["template"]["spec"];
    let user = pod["securityContext"]["runAsUser"].as_i64().unwrap();
    let init = pod["initContainers"]
        .as_array()
        .and_then(|inits| inits.first())
        .expect("an init container owns the hostPath directory");
    let command: Vec<&str> = init["command"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    let root = plugins.host_path_root.display().to_string();
    assert_eq!(command, ["chown", &format!("{user}:{user}"), root.as_str()]);
    assert_eq!(init["volumeMounts"][0]["mountPath"], root);
    assert_eq!(
        init["securityContext"]["capabilities"],
        serde_json::json!({ "drop": ["ALL"], "add": ["CHOWN"] })
    );
}

#[test]
fn the_deployment_runs_two_hardened_replicas_with_valid_flags() {
    let Some(objects) = render() else { return };
    let deployment = objects.iter().find(|o| o["kind"] == "Deployment").unwrap();
    assert_eq!(deployment["spec"]["replicas"], 2);
    let pod = &deployment["spec"]["template"]["spec"];
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    let container = &pod["containers"][0];
    assert_eq!(container["securityContext"]["readOnlyRootFilesystem"], true);
    for (probe, path) in [("livenessProbe", "/livez"), ("readinessProbe", "/readyz")] {
        let get = &container[probe]["httpGet"];
        assert_eq!(get["path"], path);
        assert_eq!(get["scheme"], "HTTPS", "{probe} over the secure port");
        assert_eq!(get["port"], container["ports"][0]["name"], "{probe}");
    }
    assert!(container["resources"]["requests"]["memory"].is_string());
    let args: Vec<&str> = container["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    let options = Options::try_parse_from(std::iter::once("pv-controller").chain(args))
        .unwrap_or_else(|e| panic!("the Deployment's args are refused: {e}"));
    assert!(options.leader_elect());
    assert_eq!(
        options.insecure_address(),
        None,
        "no plain HTTP in the cluster"
    );
    let secure = options.secure_serving().expect("the secure port");
    assert_eq!(
        container["ports"][0]["containerPort"],
        secure.address.port(),
        "the probes' port is the secure port"
    );
}

#[test]
fn prometheus_scrapes_the_secure_port_with_its_token() {
    let Some(objects) = render() else { return };
    let service = objects.iter().find(|o| o["kind"] == "Service").unwrap();
    assert_eq!(service["spec"]["ports"][0]["port"], 10281);
    let monitor = objects
        .iter()
        .find(|o| o["kind"] == "ServiceMonitor")
        .unwrap();
    let endpoint = &monitor["spec"]["endpoints"][0];
    assert_eq!(endpoint["scheme"], "https");
    assert_eq!(endpoint["port"], service["spec"]["ports"][0]["name"]);
    assert_eq!(
        endpoint["bearerTokenFile"],
        "/var/run/secrets/kubernetes.io/serviceaccount/token"
    );
    let reader = objects
        .iter()
        .find(|o| o["metadata"]["name"] == "pv-controller-metrics-reader")
        .unwrap();
    assert_eq!(reader["rules"][0]["nonResourceURLs"][0], "/metrics");
    assert_eq!(reader["rules"][0]["verbs"][0], "get");
    let delegator = objects
        .iter()
        .find(|o| o["metadata"]["name"] == "pv-controller-auth-delegator")
        .unwrap();
    assert_eq!(delegator["roleRef"]["name"], "system:auth-delegator");
    assert_eq!(delegator["subjects"][0]["name"], "pv-controller");
}

#[test]
fn the_optional_network_policy_admits_the_monitoring_namespace_to_the_admin_port() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/deploy/network-policy.yaml"
    ))
    .unwrap();
    let policy: Value = serde_saphyr::from_str(&text).unwrap();
    assert_eq!(policy["kind"], "NetworkPolicy");
    assert_eq!(
        policy["spec"]["podSelector"]["matchLabels"]["app.kubernetes.io/name"],
        "pv-controller"
    );
    let rule = &policy["spec"]["ingress"][0];
    assert_eq!(rule["ports"][0]["port"], "https");
    assert_eq!(
        rule["from"][0]["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"],
        "monitoring"
    );
}

#[test]
fn the_shadow_overlay_reads_only_and_takes_no_lease() {
    let Some(objects) = render_dir("deploy/shadow") else {
        return;
    };
    let mut kinds: Vec<&str> = objects.iter().filter_map(|o| o["kind"].as_str()).collect();
    kinds.sort();
    assert_eq!(
        kinds,
        [
            "ClusterRole",
            "ClusterRole",
            "ClusterRoleBinding",
            "ClusterRoleBinding",
            "ConfigMap",
            "Deployment",
            "Namespace",
            "PodDisruptionBudget",
            "PrometheusRule",
            "Role",
            "RoleBinding",
            "Service",
            "ServiceAccount",
            "ServiceMonitor"
        ],
        "no lease Role, no FlowSchema"
    );
    let rule = objects
        .iter()
        .find(|o| o["kind"] == "PrometheusRule")
        .unwrap();
    let alerts: Vec<&str> = rule["spec"]["groups"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["rules"].as_array().unwrap())
        .map(|r| r["alert"].as_str().unwrap())
        .collect();
    assert_eq!(alerts, ["PVControllerShadowDiffers"], "no leader alerts");
    for object in &objects {
        let kind = object["kind"].as_str().unwrap();
        let name = object["metadata"]["name"].as_str().unwrap();
        assert!(
            name.ends_with("-shadow"),
            "{kind} {name} beside a normal install"
        );
        if !matches!(kind, "Namespace" | "ClusterRole" | "ClusterRoleBinding") {
            assert_eq!(
                object["metadata"]["namespace"], "pv-controller-shadow",
                "{kind}"
            );
        }
        for rule in object["rules"].as_array().into_iter().flatten() {
            for verb in rule["verbs"].as_array().unwrap() {
                assert!(
                    matches!(verb.as_str(), Some("get" | "list" | "watch")),
                    "{kind} {name} grants {verb}: {rule}"
                );
            }
        }
        if kind == "ClusterRoleBinding" {
            assert!(
                matches!(
                    object["roleRef"]["name"].as_str(),
                    Some("pv-controller-shadow" | "system:auth-delegator")
                ),
                "{object}"
            );
            assert_eq!(object["subjects"][0]["name"], "pv-controller-shadow");
            assert_eq!(object["subjects"][0]["namespace"], "pv-controller-shadow");
        }
    }
    let deployment = objects.iter().find(|o| o["kind"] == "Deployment").unwrap();
    let pod = &deployment["spec"]["template"]["spec"];
    assert_eq!(pod["serviceAccountName"], "pv-controller-shadow");
    let args: Vec<&str> = pod["containers"][0]["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    let options = Options::try_parse_from(std::iter::once("pv-controller").chain(args))
        .unwrap_or_else(|e| panic!("the shadow Deployment's args are refused: {e}"));
    assert!(options.shadow_config().is_some(), "--shadow");
    assert!(!options.leader_elect(), "no lease");
    let base = render().unwrap();
    let image = |objects: &[Value]| {
        objects.iter().find(|o| o["kind"] == "Deployment").unwrap()["spec"]["template"]["spec"]
            ["containers"][0]["image"]
            .clone()
    };
    assert_eq!(image(&objects), image(&base), "the same image");
}

#[test]
fn the_verified_tls_overlay_serves_a_certificate_prometheus_checks() {
    let Some(objects) = render_dir("deploy/verified-tls") else {
        return;
    };
    let find = |kind: &str, name: &str| {
        objects
            .iter()
            .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("no {kind} {name}"))
    };
    let service = objects.iter().find(|o| o["kind"] == "Service").unwrap();
    let service_dns = format!(
        "{}.{}.svc",
        service["metadata"]["name"].as_str().unwrap(),
        service["metadata"]["namespace"].as_str().unwrap()
    );
    let certificate = find("Certificate", "pv-controller-serving");
    let secret = certificate["spec"]["secretName"].as_str().unwrap();
    assert!(
        certificate["spec"]["dnsNames"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n == service_dns.as_str()),
        "the certificate names the Service: {certificate}"
    );
    let issuer = certificate["spec"]["issuerRef"]["name"].as_str().unwrap();
    assert!(find("Issuer", issuer)["spec"]["ca"]["secretName"].is_string());
    for object in objects
        .iter()
        .filter(|o| o["apiVersion"] == "cert-manager.io/v1")
    {
        assert_eq!(object["metadata"]["namespace"], "pv-controller", "{object}");
    }

    // The Deployment serves the Secret's files.
    let deployment = find("Deployment", "pv-controller");
    let pod = &deployment["spec"]["template"]["spec"];
    let container = &pod["containers"][0];
    let args: Vec<&str> = container["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    let options = Options::try_parse_from(std::iter::once("pv-controller").chain(args.clone()))
        .unwrap_or_else(|e| panic!("the overlay's args are refused: {e}"));
    assert!(options.secure_serving().is_some());
    let volume = pod["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["secret"]["secretName"] == secret)
        .expect("the serving Secret is mounted");
    let mount = container["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == volume["name"])
        .unwrap();
    let directory = mount["mountPath"].as_str().unwrap();
    for (flag, file) in [
        ("--tls-cert-file", "tls.crt"),
        ("--tls-private-key-file", "tls.key"),
    ] {
        assert!(
            args.contains(&format!("{flag}={directory}/{file}").as_str()),
            "{flag} names the Secret's {file}: {args:?}"
        );
    }

    // Prometheus checks the certificate against its CA and the Service's name.
    let monitor = find("ServiceMonitor", "pv-controller");
    let tls = &monitor["spec"]["endpoints"][0]["tlsConfig"];
    assert!(tls["insecureSkipVerify"].is_null(), "{tls}");
    assert_eq!(tls["ca"]["secret"]["name"], secret);
    assert_eq!(tls["ca"]["secret"]["key"], "ca.crt");
    assert_eq!(tls["serverName"], service_dns.as_str());
}

/// Every kustomization under deploy/ (the root and each overlay).
const OVERLAYS: [&str; 5] = [
    "deploy",
    "deploy/shadow",
    "deploy/verified-tls",
    "deploy/hostpath-provisioner",
    "deploy/dra-publish",
];

/// Every container image a rendering names.
fn images(objects: &[Value]) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for object in objects {
        let pod = &object["spec"]["template"]["spec"];
        for list in ["containers", "initContainers"] {
            for container in pod[list].as_array().into_iter().flatten() {
                found.insert(container["image"].as_str().unwrap().to_string());
            }
        }
    }
    found
}

/// The images are set in one place, deploy/settings/, for every overlay:
/// each renders the controller's image of the settings and no image the
/// settings do not name, and no kustomization but the settings names one.
#[test]
fn every_overlay_renders_the_one_image_of_the_settings() {
    let settings: Value = serde_saphyr::from_str(
        &std::fs::read_to_string(format!(
            "{}/deploy/settings/kustomization.yaml",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap(),
    )
    .unwrap();
    let named: BTreeSet<String> = settings["images"]
        .as_array()
        .unwrap()
        .iter()
        .map(|image| {
            format!(
                "{}:{}",
                image["newName"].as_str().unwrap(),
                image["newTag"].as_str().unwrap()
            )
        })
        .collect();
    let controller = &settings["images"][0];
    assert_eq!(controller["name"], "pv-controller");
    let expected = format!(
        "{}:{}",
        controller["newName"].as_str().unwrap(),
        controller["newTag"].as_str().unwrap()
    );
    for overlay in OVERLAYS {
        let text = std::fs::read_to_string(format!(
            "{}/{overlay}/kustomization.yaml",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap();
        let kustomization: Value = serde_saphyr::from_str(&text).unwrap();
        assert!(
            kustomization["images"].is_null(),
            "{overlay} sets an image of its own"
        );
        let Some(objects) = render_dir(overlay) else {
            return;
        };
        let rendered = images(&objects);
        assert!(rendered.contains(&expected), "{overlay}: {rendered:?}");
        assert!(rendered.is_subset(&named), "{overlay}: {rendered:?}");
    }
}

/// The ServiceMonitor honors the claim gauges' namespace label, and with
/// the PrometheusRule carries the label kube-prometheus-stack selects by
/// (set in deploy/settings/); kube-prometheus' Prometheus may discover the
/// Service's endpoints.
#[test]
fn prometheus_operators_find_the_monitor_and_the_rules() {
    let Some(objects) = render() else { return };
    for kind in ["ServiceMonitor", "PrometheusRule"] {
        let object = objects.iter().find(|o| o["kind"] == kind).unwrap();
        assert_eq!(
            object["metadata"]["labels"]["release"], "kube-prometheus-stack",
            "{kind}"
        );
    }
    let monitor = objects
        .iter()
        .find(|o| o["kind"] == "ServiceMonitor")
        .unwrap();
    assert_eq!(monitor["spec"]["endpoints"][0]["honorLabels"], true);
    let role = objects
        .iter()
        .find(|o| o["kind"] == "Role" && o["metadata"]["name"] == "pv-controller-prometheus")
        .unwrap();
    let resources: Vec<&str> = role["rules"][0]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap())
        .collect();
    assert_eq!(resources, ["services", "endpoints", "pods"]);
    let binding = objects
        .iter()
        .find(|o| o["kind"] == "RoleBinding" && o["metadata"]["name"] == "pv-controller-prometheus")
        .unwrap();
    assert_eq!(binding["roleRef"]["name"], role["metadata"]["name"]);
    assert_eq!(binding["subjects"][0]["name"], "prometheus-k8s");
    assert_eq!(binding["subjects"][0]["namespace"], "monitoring");
}

/// A drain takes one replica at a time; the controllers' requests are
/// classified into a priority level of their own, with
/// kube-controller-manager's share (workload-high's), not the service
/// accounts' workload-low; the components of older servers render the
/// same objects in the API versions they serve.
#[test]
fn a_disruption_budget_and_a_flow_schema_of_its_own() {
    let Some(objects) = render() else { return };
    let find = |kind: &str| {
        objects
            .iter()
            .find(|o| o["kind"] == kind)
            .unwrap_or_else(|| panic!("no {kind}"))
    };
    let deployment = find("Deployment");
    let budget = find("PodDisruptionBudget");
    assert_eq!(budget["apiVersion"], "policy/v1");
    assert_eq!(budget["spec"]["maxUnavailable"], 1);
    assert_eq!(
        budget["spec"]["selector"]["matchLabels"],
        deployment["spec"]["selector"]["matchLabels"]
    );
    let schema = find("FlowSchema");
    let level = find("PriorityLevelConfiguration");
    assert_eq!(
        schema["spec"]["priorityLevelConfiguration"]["name"],
        level["metadata"]["name"]
    );
    let subject = &schema["spec"]["rules"][0]["subjects"][0]["serviceAccount"];
    assert_eq!(
        subject["name"],
        deployment["spec"]["template"]["spec"]["serviceAccountName"]
    );
    assert_eq!(subject["namespace"], deployment["metadata"]["namespace"]);
    assert_eq!(level["spec"]["limited"]["nominalConcurrencyShares"], 40);
    let precedence = schema["spec"]["matchingPrecedence"].as_u64().unwrap();
    assert!(
        (800..9000).contains(&precedence),
        "after kube-controller-manager's, before service-accounts"
    );
    // Older servers, through the components (rendered from a scratch
    // kustomization beside the root one, as a user adds them).
    let scratch = format!(
        "{}/target/deploy-components-test",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::create_dir_all(&scratch).unwrap();
    for (components, flowcontrol, policy, shares) in [
        (
            &["flowcontrol-v1beta1", "policy-v1beta1"][..],
            "flowcontrol.apiserver.k8s.io/v1beta1",
            "policy/v1beta1",
            "assuredConcurrencyShares",
        ),
        (
            &["flowcontrol-v1beta2"][..],
            "flowcontrol.apiserver.k8s.io/v1beta2",
            "policy/v1",
            "assuredConcurrencyShares",
        ),
    ] {
        let listed: String = components
            .iter()
            .map(|c| format!("  - ../../deploy/components/{c}\n"))
            .collect();
        std::fs::write(
            format!("{scratch}/kustomization.yaml"),
            format!(
                "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - ../../deploy/base\ncomponents:\n  - ../../deploy/settings\n{listed}"
            ),
        )
        .unwrap();
        let Some(old) = render_dir("target/deploy-components-test") else {
            return;
        };
        for object in &old {
            match object["kind"].as_str().unwrap() {
                "FlowSchema" => assert_eq!(object["apiVersion"], flowcontrol),
                "PriorityLevelConfiguration" => {
                    assert_eq!(object["apiVersion"], flowcontrol);
                    assert_eq!(object["spec"]["limited"][shares], 40);
                    assert!(object["spec"]["limited"]["nominalConcurrencyShares"].is_null());
                }
                "PodDisruptionBudget" => assert_eq!(object["apiVersion"], policy),
                _ => {}
            }
        }
    }
}

/// The DRA example: a DaemonSet running dra-publish for its node's
/// devices from a ConfigMap, with exactly the RBAC it needs.
#[test]
fn the_dra_publish_example_publishes_each_node_s_devices() {
    let Some(objects) = render_dir("deploy/dra-publish") else {
        return;
    };
    let daemonset = objects.iter().find(|o| o["kind"] == "DaemonSet").unwrap();
    let pod = &daemonset["spec"]["template"]["spec"];
    let container = &pod["containers"][0];
    assert_eq!(container["command"][0], "/dra-publish");
    let args: Vec<&str> = container["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert!(args.contains(&"--node=$(NODE_NAME)"), "{args:?}");
    assert_eq!(
        container["env"][0]["valueFrom"]["fieldRef"]["fieldPath"],
        "spec.nodeName"
    );
    let devices = args
        .iter()
        .find_map(|a| a.strip_prefix("--devices="))
        .unwrap();
    let mount = container["volumeMounts"][0]["mountPath"].as_str().unwrap();
    assert!(devices.starts_with(mount), "{devices} under {mount}");
    let config_map = objects.iter().find(|o| o["kind"] == "ConfigMap").unwrap();
    assert_eq!(
        pod["volumes"][0]["configMap"]["name"],
        config_map["metadata"]["name"]
    );
    assert!(
        config_map["data"]["devices.yaml"]
            .as_str()
            .unwrap()
            .contains("pools:")
    );
    let role = objects.iter().find(|o| o["kind"] == "ClusterRole").unwrap();
    assert_eq!(role["rules"][0]["resources"][0], "resourceslices");
    let binding = objects
        .iter()
        .find(|o| o["kind"] == "ClusterRoleBinding")
        .unwrap();
    assert_eq!(binding["subjects"][0]["name"], pod["serviceAccountName"]);
    assert_eq!(
        binding["subjects"][0]["namespace"],
        daemonset["metadata"]["namespace"]
    );
}
