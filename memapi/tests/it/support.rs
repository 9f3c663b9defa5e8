//! Small object and error helpers shared by memapi's integration tests.

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use serde_json::json;

/// A PV with a capacity and an NFS source.
pub(crate) fn pv(name: &str, size: &str) -> PersistentVolume {
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": { "name": name },
        "spec": {
            "capacity": { "storage": size },
            "accessModes": ["ReadWriteOnce"],
            "nfs": { "server": "nfs.example", "path": format!("/{name}") },
        },
    }))
    .unwrap()
}

/// A PVC asking for a size.
pub(crate) fn pvc(ns: &str, name: &str, size: &str) -> PersistentVolumeClaim {
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": { "name": name, "namespace": ns },
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "resources": { "requests": { "storage": size } },
        },
    }))
    .unwrap()
}

/// The HTTP code of a kube API error, or panics.
pub(crate) fn code(err: kube::Error) -> u16 {
    match err {
        kube::Error::Api(s) => s.code,
        other => panic!("not an API error: {other:?}"),
    }
}

/// The reason of a kube API error, or panics.
pub(crate) fn reason(err: &kube::Error) -> String {
    match err {
        kube::Error::Api(s) => s.reason.clone(),
        other => panic!("not an API error: {other:?}"),
    }
}

/// The Status of a kube API error, or panics.
pub(crate) fn status(err: kube::Error) -> kube::core::Status {
    match err {
        kube::Error::Api(s) => *s,
        other => panic!("not an API error: {other:?}"),
    }
}
