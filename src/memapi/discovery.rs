//! Discovery documents (`/version`, `/api`, `/apis`, `/api/v1`,
//! `/apis/{group}/{version}`), built from the kinds table, so kubectl can
//! map `pv`, `pvc`, `sc`... to URLs.

use super::resources::{self, KINDS};
use serde_json::{Value, json};

const VERBS: &[&str] = &[
    "create", "delete", "get", "list", "patch", "update", "watch",
];

/// `/version`
pub fn version() -> Value {
    json!({
        "major": "1",
        "minor": "34",
        "gitVersion": "v1.34.0-memapi",
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2025-01-01T00:00:00Z",
        "goVersion": "go1.24",
        "compiler": "gc",
        "platform": "linux/amd64",
    })
}

/// `/api`: the core group's versions.
pub fn core_versions() -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [
            { "clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1" }
        ],
    })
}

/// `/apis`: the named groups.
pub fn groups() -> Value {
    let groups: Vec<Value> = resources::groups()
        .into_iter()
        .map(|(group, version)| {
            let gv = json!({ "groupVersion": format!("{group}/{version}"), "version": version });
            json!({ "name": group, "versions": [gv.clone()], "preferredVersion": gv })
        })
        .collect();
    json!({ "kind": "APIGroupList", "apiVersion": "v1", "groups": groups })
}

/// `/api/v1` or `/apis/{group}/{version}`: the resources of one group version.
pub fn resource_list(group: &str, version: &str) -> Value {
    let mut list = Vec::new();
    for k in KINDS
        .iter()
        .filter(|k| k.group == group && k.version == version)
    {
        list.push(json!({
            "name": k.plural,
            "singularName": k.kind.to_lowercase(),
            "namespaced": k.namespaced,
            "kind": k.kind,
            "verbs": VERBS,
            "shortNames": k.short_names,
        }));
        if k.has_status {
            list.push(json!({
                "name": format!("{}/status", k.plural),
                "singularName": "",
                "namespaced": k.namespaced,
                "kind": k.kind,
                "verbs": ["get", "patch", "update"],
            }));
        }
    }
    let group_version = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": list,
    })
}
