//! deploy/ renders with kustomize (when kubectl is on PATH), and the
//! Deployment's arguments are flags this binary accepts.

use std::process::Command;

use clap::Parser;
use pv_controller::Options;
use serde::Deserialize;
use serde_json::Value;

/// The rendered objects, or `None` (with a message) when kubectl is missing.
fn render() -> Option<Vec<Value>> {
    let output = match Command::new("kubectl")
        .args(["kustomize", concat!(env!("CARGO_MANIFEST_DIR"), "/deploy")])
        .output()
    {
        Ok(output) => output,
        Err(error) => {
            eprintln!("skipping: kubectl not found on PATH ({error})");
            return None;
        }
    };
    assert!(
        output.status.success(),
        "kubectl kustomize deploy/ failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let text = String::from_utf8(output.stdout).unwrap();
    Some(
        serde_yaml_ng::Deserializer::from_str(&text)
            .map(|document| Value::deserialize(document).unwrap())
            .collect(),
    )
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
            "ClusterRoleBinding",
            "Deployment",
            "Namespace",
            "PrometheusRule",
            "Role",
            "RoleBinding",
            "Service",
            "ServiceAccount",
            "ServiceMonitor"
        ]
    );
    for object in &objects {
        let kind = object["kind"].as_str().unwrap();
        let namespaced = !matches!(kind, "Namespace" | "ClusterRole" | "ClusterRoleBinding");
        if namespaced {
            assert_eq!(object["metadata"]["namespace"], "pv-controller", "{kind}");
        }
    }
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
    assert_eq!(container["livenessProbe"]["httpGet"]["path"], "/livez");
    assert_eq!(container["readinessProbe"]["httpGet"]["path"], "/readyz");
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
    let port = options.metrics_address().rsplit(':').next().unwrap();
    assert_eq!(
        container["ports"][0]["containerPort"].to_string(),
        port,
        "the probes' port is the metrics port"
    );
}
