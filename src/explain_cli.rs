//! `pv-controller explain NAMESPACE/CLAIM` (also `kubectl pv-controller
//! explain`, as a kubectl plugin): why a claim is Pending. By default it
//! reads the claim, every volume and the claim's StorageClass from the
//! cluster of the kubeconfig and applies the binder's rules, the very
//! decision code the controller runs, from anywhere kubectl works; with
//! `--admin-address` it asks a running controller's admin port instead
//! (`GET /explain/{namespace}/{claim}`, over HTTPS with a bearer token),
//! whose answer adds the claim's last sync. Either way it prints the
//! answer as kubectl prints objects: the claim's requirements, then a
//! table of the volumes of its class with the first rule each one fails.

use std::fmt::Write as _;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::Api;
use kube::api::ListParams;
use kube::config::{AuthInfo, KubeConfigOptions, Kubeconfig};
use serde_json::Value;

use crate::runtime::api_message::ApiMessage;
use crate::table::columns;

pub use crate::options::ExplainArgs;

/// Why `pv-controller explain` found no answer.
#[derive(Debug, thiserror::Error)]
pub enum ExplainError {
    /// The claim is not written `NAMESPACE/CLAIM` or `CLAIM`.
    #[error("{0:?} is not NAMESPACE/CLAIM or CLAIM")]
    Claim(String),
    /// No cluster configuration could be loaded.
    #[error("loading the cluster's configuration: {0}")]
    Config(String),
    /// An address is not a URL.
    #[error("{address:?} is not a URL such as https://127.0.0.1:10281")]
    Address {
        /// What was given.
        address: String,
    },
    /// The running controller could not be asked, or answered an error.
    #[error(
        "asking the controller at {address}: {}{}",
        code_of(source),
        ApiMessage(source)
    )]
    Admin {
        /// The admin address.
        address: String,
        /// The client's error: the controller's answer, or why there was none.
        #[source]
        source: kube::Error,
    },
    /// The cluster could not be read.
    #[error(
        "reading {claim} and the volumes from the cluster: {}",
        ApiMessage(source)
    )]
    Api {
        /// The claim asked about.
        claim: String,
        /// The client's error.
        #[source]
        source: kube::Error,
    },
    /// The answer is not the JSON the endpoint serves.
    #[error("the answer is not an explanation: {0}")]
    Body(#[from] serde_json::Error),
}

/// The HTTP code the controller answered with, followed by a space (the
/// command's user reads a 403 or a 404 first); nothing when it did not
/// answer.
fn code_of(error: &kube::Error) -> String {
    match error {
        kube::Error::Api(status) => format!("{} ", status.code),
        _ => String::new(),
    }
}

/// Explains the claim `args` name, from the cluster or from the running
/// controller `--admin-address` names.
pub async fn explain(args: &ExplainArgs) -> Result<Value, ExplainError> {
    let Some(address) = &args.admin_address else {
        let config = cluster_config(args).await?;
        let (namespace, name) = claim_key(&args.claim, args.namespace.as_deref(), &config)?;
        let client =
            kube::Client::try_from(config).map_err(|e| ExplainError::Config(e.to_string()))?;
        return read_cluster(client, &format!("{namespace}/{name}")).await;
    };
    // The cluster's configuration lends its credentials and namespace;
    // a controller on a loopback demo port needs neither.
    let cluster = match &args.token {
        Some(_) => None,
        None => cluster_config(args).await.ok(),
    };
    let fallback = kube::Config::new(http::Uri::from_static("http://localhost"));
    let (namespace, name) = claim_key(
        &args.claim,
        args.namespace.as_deref(),
        cluster.as_ref().unwrap_or(&fallback),
    )?;
    let admin = admin_config(args, address, cluster)?;
    let client = kube::Client::try_from(admin).map_err(|source| ExplainError::Admin {
        address: address.clone(),
        source,
    })?;
    ask_controller(client, address, &namespace, &name).await
}

/// The cluster's configuration, as kubectl finds it.
async fn cluster_config(args: &ExplainArgs) -> Result<kube::Config, ExplainError> {
    let fail = |error: &dyn std::fmt::Display| ExplainError::Config(error.to_string());
    let options = KubeConfigOptions {
        context: args.context.clone(),
        ..KubeConfigOptions::default()
    };
    let master = args
        .master
        .as_deref()
        .map(|url| {
            url.parse::<http::Uri>().map_err(|_| ExplainError::Address {
                address: url.to_string(),
            })
        })
        .transpose()?;
    let mut config = match (&args.kubeconfig, &master, &args.context) {
        (Some(path), _, _) => {
            let file = Kubeconfig::read_from(path).map_err(|e| fail(&e))?;
            kube::Config::from_custom_kubeconfig(file, &options)
                .await
                .map_err(|e| fail(&e))?
        }
        (None, Some(url), None) => kube::Config::new(url.clone()),
        (None, _, Some(_)) => kube::Config::from_kubeconfig(&options)
            .await
            .map_err(|e| fail(&e))?,
        (None, None, None) => kube::Config::infer().await.map_err(|e| fail(&e))?,
    };
    if let Some(url) = master {
        config.cluster_url = url;
    }
    Ok(config)
}

/// The claim's namespace and name: `NAMESPACE/CLAIM`, or `CLAIM` in
/// `--namespace` or the configuration's namespace.
fn claim_key(
    claim: &str,
    namespace: Option<&str>,
    config: &kube::Config,
) -> Result<(String, String), ExplainError> {
    let bad = || ExplainError::Claim(claim.to_string());
    let (namespace, name) = match claim.split_once('/') {
        Some((namespace, name)) => (namespace, name),
        None => (namespace.unwrap_or(&config.default_namespace), claim),
    };
    if namespace.is_empty() || name.is_empty() || name.contains('/') {
        return Err(bad());
    }
    Ok((namespace.to_string(), name.to_string()))
}

/// The configuration of the admin port's client: the cluster's
/// credentials (or `--token`) sent to `address`, its certificate checked
/// against `--certificate-authority`, or not at all.
fn admin_config(
    args: &ExplainArgs,
    address: &str,
    cluster: Option<kube::Config>,
) -> Result<kube::Config, ExplainError> {
    let url = address
        .parse::<http::Uri>()
        .ok()
        .filter(|url| url.scheme().is_some() && url.host().is_some())
        .ok_or_else(|| ExplainError::Address {
            address: address.to_string(),
        })?;
    let mut config = kube::Config::new(url);
    config.auth_info = match &args.token {
        Some(token) => serde_json::from_value::<AuthInfo>(serde_json::json!({ "token": token }))?,
        None => cluster.map(|config| config.auth_info).unwrap_or_default(),
    };
    config
        .root_cert_file
        .clone_from(&args.certificate_authority);
    config.accept_invalid_certs = args.insecure_skip_tls_verify;
    Ok(config)
}

/// Asks the controller behind `client` (its admin port, `address`) why
/// the claim is as it is.
pub async fn ask_controller(
    client: kube::Client,
    address: &str,
    namespace: &str,
    name: &str,
) -> Result<Value, ExplainError> {
    let request = http::Request::get(format!("/explain/{namespace}/{name}"))
        .header(http::header::ACCEPT, "application/json")
        .body(Vec::new())
        .map_err(|e| ExplainError::Address {
            address: format!("{address}: {e}"),
        })?;
    let text = client
        .request_text(request)
        .await
        .map_err(|source| ExplainError::Admin {
            address: address.to_string(),
            source,
        })?;
    Ok(serde_json::from_str(&text)?)
}

/// Reads the claim (`NAMESPACE/CLAIM`), every volume and the claim's
/// StorageClass from the cluster once, and explains the claim there by the
/// binder's rules (no controller needed; no last sync).
pub async fn read_cluster(client: kube::Client, claim: &str) -> Result<Value, ExplainError> {
    let (namespace, name) = claim
        .split_once('/')
        .filter(|(ns, name)| !ns.is_empty() && !name.is_empty() && !name.contains('/'))
        .ok_or_else(|| ExplainError::Claim(claim.to_string()))?;
    let api = |source: kube::Error| ExplainError::Api {
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
    let class_name = crate::pv::claim_class(&object).to_string();
    let class = if class_name.is_empty() {
        None
    } else {
        Api::<StorageClass>::all(client)
            .get_opt(&class_name)
            .await
            .map_err(api)?
    };
    let explanation = crate::pv::explain_listed(&object, &volumes, class.as_ref());
    Ok(serde_json::to_value(explanation)?)
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
    let mut lines = vec![vec![
        "VOLUME".to_string(),
        "CLASS".to_string(),
        "CAPACITY".to_string(),
        "VERDICT".to_string(),
    ]];
    for volume in &volumes {
        lines.push(vec![
            text(&volume["name"]),
            text(&volume["class"]),
            text(&volume["capacity"]),
            verdict(&volume["verdict"]),
        ]);
    }
    out.push_str(&columns(&lines));
    out
}

/// A verdict in a few words, from its JSON form.
fn verdict(verdict: &Value) -> String {
    serde_json::from_value::<crate::pv::Verdict>(verdict.clone())
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
