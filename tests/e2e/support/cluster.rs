//! The cluster set up for the controller: `deploy/`'s namespace,
//! ServiceAccount and RBAC applied with kubectl, and a kubeconfig that
//! impersonates that ServiceAccount, so every request the controller makes
//! is authorized as it would be in the cluster.

use std::path::Path;
use std::process::Stdio;

use anyhow::{Context as _, bail};
use serde_json::{Map, Value};
use tokio::io::AsyncWriteExt;

/// The kinds of `deploy/` applied: the ones that grant the controller its
/// rights (the Deployment, Service and monitoring objects are not).
const RBAC_KINDS: [&str; 6] = [
    "Namespace",
    "ServiceAccount",
    "ClusterRole",
    "ClusterRoleBinding",
    "Role",
    "RoleBinding",
];

/// Runs kubectl with `kubeconfig`, `stdin` on its standard input; its
/// standard output, or an error with its standard error.
pub(crate) async fn kubectl(
    kubeconfig: &Path,
    args: &[&str],
    stdin: Option<&str>,
) -> anyhow::Result<String> {
    let mut child = tokio::process::Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("running kubectl (the e2e suite needs it on PATH)")?;
    if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
        pipe.write_all(text.as_bytes())
            .await
            .context("kubectl's stdin")?;
    }
    let output = child
        .wait_with_output()
        .await
        .context("waiting for kubectl")?;
    if !output.status.success() {
        bail!(
            "kubectl {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// Applies `deploy/`'s namespace, ServiceAccount and RBAC as rendered by
/// `kubectl kustomize`; returns the ServiceAccount's namespace and name.
/// The replicas elect their leader on a Lease of their own name
/// ([`super::LEASE_NAME`]), so the leader-election Role grants it too, as
/// an operator who picks another `--leader-elect-resource-name` must.
/// Idempotent, and retried: concurrent runs apply the same objects.
pub(crate) async fn apply_deploy_rbac(kubeconfig: &Path) -> anyhow::Result<(String, String)> {
    let deploy = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy");
    let deploy = deploy.to_string_lossy();
    let rendered = kubectl(kubeconfig, &["kustomize", &deploy], None).await?;
    let mut kept = Vec::new();
    let mut account = None;
    for object in serde_saphyr::from_multiple::<Value>(&rendered)? {
        let kind = object["kind"].as_str().unwrap_or_default();
        if kind == "ServiceAccount" {
            account = Some((
                object["metadata"]["namespace"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                object["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            ));
        }
        if RBAC_KINDS.contains(&kind) {
            let mut object = object;
            grant_lease(&mut object, super::LEASE_NAME);
            kept.push(serde_saphyr::to_string(&object)?);
        }
    }
    let account = account.context("deploy/ renders no ServiceAccount")?;
    let manifests = kept.join("---\n");
    let mut last = anyhow::anyhow!("not applied");
    for _ in 0..5 {
        match kubectl(kubeconfig, &["apply", "-f", "-"], Some(&manifests)).await {
            Ok(_) => return Ok(account),
            Err(error) => last = error,
        }
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    }
    Err(last.context("applying deploy/'s RBAC"))
}

/// Adds `lease` to the Lease names a Role's rules grant by name.
fn grant_lease(object: &mut Value, lease: &str) {
    if object["kind"].as_str() != Some("Role") {
        return;
    }
    let Some(rules) = object["rules"].as_array_mut() else {
        return;
    };
    for rule in rules {
        let leases = rule["resources"]
            .as_array()
            .is_some_and(|resources| resources.iter().any(|r| r == "leases"));
        if let Some(names) = rule["resourceNames"].as_array_mut().filter(|_| leases) {
            names.push(lease.into());
        }
    }
}

/// Writes a copy of `kubeconfig` whose current user impersonates the
/// ServiceAccount `(namespace, name)` with its groups, as the API server
/// would authenticate its token. Relative file paths are made absolute.
pub(crate) fn write_impersonating_kubeconfig(
    kubeconfig: &Path,
    (namespace, name): &(String, String),
    to: &Path,
) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(kubeconfig)
        .with_context(|| format!("reading {}", kubeconfig.display()))?;
    let mut config: Value = serde_saphyr::from_str(&text)
        .with_context(|| format!("parsing {}", kubeconfig.display()))?;
    let base = kubeconfig.parent().unwrap_or(Path::new("."));
    absolute_paths(&mut config, base);
    let user = current_user(&config).context("the kubeconfig has no current context")?;
    let entry = config["users"]
        .as_array_mut()
        .and_then(|users| users.iter_mut().find(|u| u["name"].as_str() == Some(&user)))
        .and_then(|u| u.get_mut("user"))
        .and_then(Value::as_object_mut)
        .with_context(|| format!("the kubeconfig has no user {user:?}"))?;
    entry.insert(
        "as".into(),
        format!("system:serviceaccount:{namespace}:{name}").into(),
    );
    entry.insert(
        "as-groups".into(),
        Value::Array(vec![
            "system:serviceaccounts".into(),
            format!("system:serviceaccounts:{namespace}").into(),
            "system:authenticated".into(),
        ]),
    );
    write_private(to, &serde_saphyr::to_string(&config)?)
}

/// The user of the current context.
fn current_user(config: &Value) -> Option<String> {
    let context = config["current-context"].as_str()?;
    config["contexts"]
        .as_array()?
        .iter()
        .find(|c| c["name"].as_str() == Some(context))?["context"]["user"]
        .as_str()
        .map(str::to_string)
}

/// Makes the file paths of clusters and users absolute against `base`.
fn absolute_paths(config: &mut Value, base: &Path) {
    let fields = [
        ("clusters", "cluster", &["certificate-authority"][..]),
        (
            "users",
            "user",
            &["client-certificate", "client-key", "tokenFile"][..],
        ),
    ];
    for (list, inner, keys) in fields {
        let Some(entries) = config[list].as_array_mut() else {
            continue;
        };
        for entry in entries {
            let Some(map) = entry.get_mut(inner).and_then(Value::as_object_mut) else {
                continue;
            };
            absolute_in(map, keys, base);
        }
    }
}

fn absolute_in(map: &mut Map<String, Value>, keys: &[&str], base: &Path) {
    for key in keys {
        if let Some(Value::String(path)) = map.get_mut(*key)
            && Path::new(path.as_str()).is_relative()
        {
            *path = base.join(&*path).to_string_lossy().into_owned();
        }
    }
}

/// Writes `text` to `path`, readable by the owner only (it holds credentials).
fn write_private(path: &Path, text: &str) -> anyhow::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("writing {}", path.display()))?;
    file.write_all(text.as_bytes())
        .with_context(|| format!("writing {}", path.display()))
}
