//! Server-side printing: `meta.k8s.io/v1` Tables for kubectl, which asks
//! for them with `Accept: application/json;as=Table;...`.
//!
//! PVs and PVCs get kubectl's usual columns; every other kind gets NAME
//! and AGE, as the real apiserver's default table does.

use super::object::{self, str_at, value_at};
use super::resources::ResourceKind;
use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};

/// Whether an Accept header asks for a Table.
pub(crate) fn wants_table(accept: &str) -> bool {
    accept.contains("as=Table")
}

/// A column: (header, type, format).
type Column = (&'static str, &'static str, &'static str);

const NAME: Column = ("Name", "string", "name");
const AGE: Column = ("Age", "string", "");

fn columns(kind: &ResourceKind) -> &'static [Column] {
    match (kind.group, kind.plural) {
        ("", "persistentvolumes") => &[
            NAME,
            ("Capacity", "string", ""),
            ("Access Modes", "string", ""),
            ("Reclaim Policy", "string", ""),
            ("Status", "string", ""),
            ("Claim", "string", ""),
            ("StorageClass", "string", ""),
            AGE,
        ],
        ("", "persistentvolumeclaims") => &[
            NAME,
            ("Status", "string", ""),
            ("Volume", "string", ""),
            ("Capacity", "string", ""),
            ("Access Modes", "string", ""),
            ("StorageClass", "string", ""),
            AGE,
        ],
        ("resource.k8s.io", "resourceslices") => &[
            NAME,
            ("Node", "string", ""),
            ("Driver", "string", ""),
            ("Pool", "string", ""),
            AGE,
        ],
        _ => &[NAME, AGE],
    }
}

/// kubectl's short access mode names, comma-joined.
fn access_modes(obj: &Value, path: &str) -> String {
    value_at(obj, path)
        .and_then(Value::as_array)
        .map(|modes| {
            modes
                .iter()
                .filter_map(Value::as_str)
                .map(|m| match m {
                    "ReadWriteOnce" => "RWO",
                    "ReadOnlyMany" => "ROX",
                    "ReadWriteMany" => "RWX",
                    "ReadWriteOncePod" => "RWOP",
                    other => other,
                })
                .collect::<Vec<_>>()
                .join(",")
        })
        .unwrap_or_default()
}

/// Age like kubectl prints it: 45s, 3m12s, 17m, 5h, 3d.
fn age(obj: &Value) -> String {
    let Some(created) =
        str_at(obj, "metadata.creationTimestamp").and_then(|t| t.parse::<Timestamp>().ok())
    else {
        return "<unknown>".to_string();
    };
    let secs = super::clock::now().as_second() - created.as_second();
    match secs.max(0) {
        s if s < 120 => format!("{s}s"),
        s if s < 600 => format!("{}m{}s", s / 60, s % 60),
        s if s < 3 * 3600 => format!("{}m", s / 60),
        s if s < 48 * 3600 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86400),
    }
}

fn cells(kind: &ResourceKind, obj: &Value) -> Vec<Value> {
    let s = |path: &str| json!(str_at(obj, path).unwrap_or_default());
    let name = json!(object::name(obj));
    match (kind.group, kind.plural) {
        ("", "persistentvolumes") => {
            let claim = match (
                str_at(obj, "spec.claimRef.namespace"),
                str_at(obj, "spec.claimRef.name"),
            ) {
                (Some(ns), Some(n)) => format!("{ns}/{n}"),
                (None, Some(n)) => n.to_string(),
                _ => String::new(),
            };
            vec![
                name,
                s("spec.capacity.storage"),
                json!(access_modes(obj, "spec.accessModes")),
                s("spec.persistentVolumeReclaimPolicy"),
                s("status.phase"),
                json!(claim),
                s("spec.storageClassName"),
                json!(age(obj)),
            ]
        }
        ("", "persistentvolumeclaims") => vec![
            name,
            s("status.phase"),
            s("spec.volumeName"),
            s("status.capacity.storage"),
            json!(access_modes(obj, "status.accessModes")),
            s("spec.storageClassName"),
            json!(age(obj)),
        ],
        ("resource.k8s.io", "resourceslices") => vec![
            name,
            s("spec.nodeName"),
            s("spec.driver"),
            s("spec.pool.name"),
            json!(age(obj)),
        ],
        _ => vec![name, json!(age(obj))],
    }
}

/// A Table of the objects. Rows carry the object's metadata (or the whole
/// object with `include_object`), which kubectl uses for namespaces.
pub(crate) fn table(
    kind: &ResourceKind,
    objs: &[&Value],
    list_meta: Option<Value>,
    include_object: bool,
) -> Value {
    let defs: Vec<Value> = columns(kind)
        .iter()
        .map(|(name, ty, format)| {
            json!({ "name": name, "type": ty, "format": format, "description": "", "priority": 0 })
        })
        .collect();
    let rows: Vec<Value> = objs
        .iter()
        .map(|obj| {
            let object = if include_object {
                (*obj).clone()
            } else {
                json!({
                    "kind": "PartialObjectMetadata",
                    "apiVersion": "meta.k8s.io/v1",
                    "metadata": value_at(obj, "metadata").cloned().unwrap_or(json!({})),
                })
            };
            json!({ "cells": cells(kind, obj), "object": object })
        })
        .collect();
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": list_meta.unwrap_or(json!({})),
        "columnDefinitions": defs,
        "rows": rows,
    })
}
