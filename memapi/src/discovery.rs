//! Discovery documents (`/version`, `/api`, `/apis`, `/api/v1`,
//! `/apis/{group}/{version}`), built from the kinds table, so kubectl can
//! map `pv`, `pvc`, `sc`... to URLs; plus a minimal OpenAPI v3 that only
//! tells kubectl the server takes `fieldValidation` (so `kubectl create`
//! does not need schemas; memapi itself does not validate fields).

use super::resources::{self, KINDS};
use serde_json::{Value, json};

const VERBS: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

/// `/version`
pub(crate) fn version() -> Value {
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
pub(crate) fn core_versions() -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [
            { "clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1" }
        ],
    })
}

/// `/apis`: the named groups, but those `withheld` names (`group/version`).
pub(crate) fn groups(withheld: &std::collections::BTreeSet<String>) -> Value {
    let groups: Vec<Value> = resources::groups()
        .into_iter()
        .filter(|(group, version)| !withheld.contains(&format!("{group}/{version}")))
        .map(|(group, version)| {
            let gv = json!({ "groupVersion": format!("{group}/{version}"), "version": version });
            json!({ "name": group, "versions": [gv.clone()], "preferredVersion": gv })
        })
        .collect();
    json!({ "kind": "APIGroupList", "apiVersion": "v1", "groups": groups })
}

/// `/api/v1` or `/apis/{group}/{version}`: the resources of one group version.
pub(crate) fn resource_list(group: &str, version: &str) -> Value {
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

/// The URL prefix of a group version: `api/v1` or `apis/{group}/{version}`.
fn gv_prefix(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// `/openapi/v3`: where each group version's document lives.
pub(crate) fn openapi_index() -> Value {
    let mut paths = serde_json::Map::new();
    let gvs = std::iter::once(("", "v1")).chain(resources::groups());
    for (group, version) in gvs {
        let prefix = gv_prefix(group, version);
        paths.insert(
            prefix.clone(),
            json!({ "serverRelativeURL": format!("/openapi/v3/{prefix}?hash=memapi") }),
        );
    }
    json!({ "paths": paths })
}

/// `/openapi/v3/{prefix}`: one PATCH operation per kind, carrying the
/// group-version-kind extension and the `fieldValidation` parameter.
pub(crate) fn openapi(group: &str, version: &str) -> Value {
    let mut paths = serde_json::Map::new();
    for k in KINDS
        .iter()
        .filter(|k| k.group == group && k.version == version)
    {
        let scope = if k.namespaced {
            "namespaces/{namespace}/"
        } else {
            ""
        };
        let path = format!(
            "/{}/{scope}{}/{{name}}",
            gv_prefix(group, version),
            k.plural
        );
        paths.insert(
            path,
            json!({
                "patch": {
                    "x-kubernetes-group-version-kind": {
                        "group": k.group, "version": k.version, "kind": k.kind
                    },
                    "parameters": [
                        { "name": "fieldValidation", "in": "query", "schema": { "type": "string" } }
                    ],
                    "responses": { "200": { "description": "OK" } }
                }
            }),
        );
    }
    json!({
        "openapi": "3.0.0",
        "info": { "title": "memapi", "version": version },
        "paths": paths,
    })
}
