//! deploy/ renders with kustomize (when kubectl is on PATH), and the
//! Deployment's arguments are flags this binary accepts.

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
            "Namespace",
            "PrometheusRule",
            "Role",
            "Role",
            "RoleBinding",
            "RoleBinding",
            "Service",
            "ServiceAccount",
            "ServiceMonitor"
        ]
    );
    for object in &objects {
        let kind = object["kind"].as_str().unwrap();
        let namespaced = !matches!(kind, "Namespace" | "ClusterRole" | "ClusterRoleBinding");
        let recycler = object["metadata"]["name"] == "pv-controller-recycler";
        if namespaced {
            // The recycler's Role and binding are where its pods are.
            let namespace = if recycler { "default" } else { "pv-controller" };
            assert_eq!(object["metadata"]["namespace"], namespace, "{kind}");
        }
        for subject in object["subjects"].as_array().into_iter().flatten() {
            if subject["kind"] == "ServiceAccount" {
                assert_eq!(subject["namespace"], "pv-controller", "{kind}");
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
            "Service",
            "ServiceAccount",
            "ServiceMonitor"
        ],
        "no lease Role, no leader alerts"
    );
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
