//! `pv-controller explain NAMESPACE/CLAIM`: asks a running controller's
//! secure admin port (`GET /explain/{namespace}/{claim}` over HTTPS, with a
//! bearer token: [`https`]) why a claim is Pending, or with `--kubeconfig`
//! reads the cluster once and applies the binder's rules itself, and
//! prints
//! the answer as kubectl prints objects: the claim's requirements, then a
//! table of the volumes of its class with the first rule each one fails.

use std::fmt::Write as _;

use crate::runtime::api_message::ApiMessage;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::Api;
use kube::api::ListParams;
use serde_json::Value;

mod https;

pub use https::AdminEndpoint;

/// Why `pv-controller explain` found no answer.
#[derive(Debug, thiserror::Error)]
pub enum ExplainError {
    /// The claim is not written `NAMESPACE/CLAIM`.
    #[error("{0:?} is not NAMESPACE/CLAIM")]
    Claim(String),
    /// The admin address is not `https://HOST:PORT`.
    #[error(
        "{0:?} is not the secure admin port's address, like https://127.0.0.1:10281 (the plain-HTTP port serves no /explain)"
    )]
    Address(String),
    /// The TLS connection cannot be set up as asked.
    #[error("TLS: {0}")]
    Tls(String),
    /// The admin endpoint could not be reached or read.
    #[error("asking {address}: {source}")]
    Io {
        /// The address asked.
        address: String,
        /// Why it failed.
        source: std::io::Error,
    },
    /// The controller answered with an error.
    #[error("{status}: {message}")]
    Answer {
        /// The HTTP status line.
        status: String,
        /// The controller's error message.
        message: String,
    },
    /// The cluster could not be read.
    #[error(
        "reading {claim} and the volumes from the cluster: {}",
        ApiMessage(source)
    )]
    Api {
        /// The claim asked about.
        claim: String,
        /// Why.
        source: kube::Error,
    },
    /// The answer is not the JSON the endpoint serves.
    #[error("the answer is not an explanation: {0}")]
    Body(#[from] serde_json::Error),
}

/// Reads the claim, every volume and the claim's StorageClass from the
/// cluster once, and explains the claim there by the binder's rules (no
/// controller needed; no last sync).
pub async fn read_cluster(client: kube::Client, claim: &str) -> Result<Value, ExplainError> {
    let (namespace, name) = split_claim(claim)?;
    let api = |source| ExplainError::Api {
        claim: claim.to_string(),
        source,
    };
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), namespace);
    let object = claims.get(name).await.map_err(api)?;
    let volumes = Api::<PersistentVolume>::all(client.clone())
        .list(&ListParams::default())
        .await
        .map_err(api)?
        .items;
    let class_name = crate::pv::objects::claim_class(&object).to_string();
    let class = if class_name.is_empty() {
        None
    } else {
        Api::<StorageClass>::all(client)
            .get_opt(&class_name)
            .await
            .map_err(api)?
    };
    let explanation = crate::pv::controller::explain_listed(&object, &volumes, class.as_ref());
    Ok(serde_json::to_value(explanation)?)
}

/// `NAMESPACE/CLAIM` split in two.
fn split_claim(claim: &str) -> Result<(&str, &str), ExplainError> {
    claim
        .split_once('/')
        .filter(|(ns, name)| !ns.is_empty() && !name.is_empty() && !name.contains('/'))
        .ok_or_else(|| ExplainError::Claim(claim.to_string()))
}

/// How long the controller has to answer.
const ANSWER_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// Asks the controller's secure admin port `admin` about `claim`
/// (`NAMESPACE/CLAIM`).
pub async fn fetch(admin: &AdminEndpoint, claim: &str) -> Result<Value, ExplainError> {
    let (namespace, name) = split_claim(claim)?;
    let (status, body) = admin.get(&format!("/explain/{namespace}/{name}")).await?;
    if status.split_whitespace().nth(1) != Some("200") {
        // The port's own refusals are a Kubernetes Status; the route's, an
        // `error` member.
        let message = serde_json::from_str::<Value>(&body)
            .ok()
            .and_then(|value| {
                value["error"]
                    .as_str()
                    .or_else(|| value["message"].as_str())
                    .map(str::to_string)
            })
            .unwrap_or(body);
        return Err(ExplainError::Answer { status, message });
    }
    Ok(serde_json::from_str(&body)?)
}

/// The explanation as kubectl would print it.
pub fn table(explanation: &Value) -> String {
    let text = |v: &Value| match v {
        Value::Null => "<none>".to_string(),
        Value::String(s) if s.is_empty() => "<none>".to_string(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let wanted = &explanation["requirements"];
    let modes = wanted["accessModes"]
        .as_array()
        .map(|modes| {
            modes
                .iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join(",")
        })
        .unwrap_or_default();
    let last_sync = match &explanation["lastSync"] {
        Value::Null => "<none>".to_string(),
        sync => format!("{} (at {})", text(&sync["outcome"]), text(&sync["at"])),
    };
    let rows = [
        ("Claim", text(&explanation["claim"])),
        ("Phase", text(&explanation["phase"])),
        ("StorageClass", text(&wanted["storageClass"])),
        ("Request", text(&wanted["request"])),
        (
            "Access Modes",
            if modes.is_empty() {
                "<none>".to_string()
            } else {
                modes
            },
        ),
        ("VolumeMode", text(&wanted["volumeMode"])),
        ("Selector", selector(&wanted["selector"])),
        (
            "VolumeAttributesClass",
            text(&wanted["volumeAttributesClass"]),
        ),
        ("Selected Node", text(&wanted["selectedNode"])),
        ("Volume", text(&wanted["volumeName"])),
        (
            "Binds on first consumer",
            text(&wanted["waitForFirstConsumer"]),
        ),
        ("Provisioner", text(&explanation["provisioner"])),
        ("Would bind", text(&explanation["chosen"])),
        ("Last sync", last_sync),
    ];
    let mut out = String::new();
    for (label, value) in rows {
        let _ = writeln!(out, "{:<25}{value}", format!("{label}:"));
    }
    if let Some(error) = explanation["error"].as_str() {
        let _ = writeln!(out, "{:<25}{error}", "Error:");
    }
    let volumes = explanation["volumes"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    out.push('\n');
    if volumes.is_empty() {
        out.push_str("No volumes of its class.\n");
        return out;
    }
    let mut lines = vec![[
        "VOLUME".to_string(),
        "CLASS".to_string(),
        "CAPACITY".to_string(),
        "VERDICT".to_string(),
    ]];
    for volume in &volumes {
        lines.push([
            text(&volume["name"]),
            text(&volume["class"]),
            text(&volume["capacity"]),
            verdict(&volume["verdict"]),
        ]);
    }
    let widths: Vec<usize> = (0..3)
        .map(|i| lines.iter().map(|l| l[i].len()).max().unwrap_or(0))
        .collect();
    for line in lines {
        let _ = writeln!(
            out,
            "{:<w0$}   {:<w1$}   {:<w2$}   {}",
            line[0],
            line[1],
            line[2],
            line[3],
            w0 = widths[0],
            w1 = widths[1],
            w2 = widths[2],
        );
    }
    out
}

/// A verdict in a few words, from its JSON form.
fn verdict(verdict: &Value) -> String {
    serde_json::from_value::<crate::pv::index::Verdict>(verdict.clone())
        .map(|v| v.describe())
        .unwrap_or_else(|_| verdict.to_string())
}

/// A label selector as kubectl prints one (`tier=gold,zone in (a,b)`).
fn selector(selector: &Value) -> String {
    if selector.is_null() {
        return "<none>".to_string();
    }
    let mut parts: Vec<String> = selector["matchLabels"]
        .as_object()
        .map(|labels| {
            labels
                .iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
                .collect()
        })
        .unwrap_or_default();
    for expression in selector["matchExpressions"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let values: Vec<&str> = expression["values"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        parts.push(format!(
            "{} {} ({})",
            expression["key"].as_str().unwrap_or_default(),
            expression["operator"]
                .as_str()
                .unwrap_or_default()
                .to_lowercase(),
            values.join(",")
        ));
    }
    parts.join(",")
}
