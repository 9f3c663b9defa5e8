//! Embedded mode (`--embedded-cluster FILE`): the controller runs against an
//! in-memory API server seeded from a YAML file, served on a loopback port
//! so kubectl can watch it. Each phase change is logged; with
//! `--exit-when-settled` the run ends once nothing has changed for a while,
//! printing the volumes and claims as a table.
//!
//! This is the README's first command: a way to see the controller's
//! behaviour in seconds without a cluster. An embedded cluster has no nodes,
//! so a stand-in kubelet marks every new pod that runs to completion
//! Succeeded without running it: recycler pods "finish" at once (nothing is
//! scrubbed).

use std::collections::HashMap;
use std::future::Future;
use std::path::PathBuf;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Event;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::resource::v1::ResourceClaim;
use kube::api::{Patch, PatchParams};
use kube::client::ClientBuilder;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, watcher};
use kube::{Api, Client, Resource, ResourceExt};
use memapi::{MemApi, MemApiError};
use serde::de::DeserializeOwned;

use crate::app::{App, AppConfig, AppError};
use crate::kinds::pod::PodPhase;
use crate::runtime::client::{ClientOptions, Clients};
use crate::runtime::keys::ObjectKey;
use crate::runtime::server::{DelegationConfig, SecureServing, ServingCertificate, ServingLimits};
use crate::runtime::supervisor::{Supervised, TaskStopped};
use crate::runtime::workload::IdleProbe;
use crate::table::columns;

/// The user the demo's token stands for.
const DEMO_USER: &str = "embedded-demo";

/// A token for the demo's admin port, made anew at each run: 128 bits
/// from the process's random hasher keys, so another user of the machine
/// cannot guess it.
fn demo_token() -> String {
    use std::hash::{BuildHasher, Hasher};
    let half = || {
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_u8(0);
        hasher.finish()
    };
    format!("{:016x}{:016x}", half(), half())
}

/// How often settling is checked.
const SETTLE_POLL: Duration = Duration::from_millis(100);

/// What to run in embedded mode.
#[derive(Clone, Debug)]
pub struct EmbeddedConfig {
    /// The YAML file of objects to seed the in-memory cluster with.
    pub file: PathBuf,
    /// Stop once the controller is idle and no volume or claim changed for
    /// `quiet_period`.
    pub exit_when_settled: bool,
    /// How long nothing must change to count as settled (a few resync
    /// periods, so that a resync had its chance to act).
    pub quiet_period: Duration,
    /// The controller process to run against the in-memory cluster.
    pub app: AppConfig,
    /// How the controller's client is limited (the flags').
    pub client: ClientOptions,
}

/// Why embedded mode could not run.
#[derive(Debug, thiserror::Error)]
pub enum EmbeddedError {
    /// The cluster file could not be read.
    #[error("reading {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The cluster file's objects were refused, or the server could not listen.
    #[error(transparent)]
    MemApi(#[from] MemApiError),
    /// The controller failed.
    #[error(transparent)]
    App(#[from] AppError),
    /// A task of the demo (the in-memory server's listener, the stand-in
    /// kubelet, the log of phase changes) ended.
    #[error(transparent)]
    TaskStopped(#[from] TaskStopped),
}

/// Seeds the in-memory cluster, serves it, runs the controller until
/// `shutdown` (or until settled, when asked), and returns the final table.
pub async fn run(
    config: EmbeddedConfig,
    shutdown: impl Future<Output = ()>,
) -> Result<String, EmbeddedError> {
    let text = std::fs::read_to_string(&config.file).map_err(|source| EmbeddedError::Read {
        path: config.file.clone(),
        source,
    })?;
    let api = MemApi::new();
    let seeded = api.load_yaml(&text)?;
    let (address, listener) = api.serve(([127, 0, 0, 1], 0).into()).await?;
    println!(
        "embedded cluster: {seeded} objects from {} at http://{address}",
        config.file.display()
    );
    println!("  kubectl --server http://{address} get pv,pvc -A");
    println!(
        "  why a claim is Pending: pv-controller explain NAMESPACE/CLAIM --server http://{address}"
    );
    // The demo's own tasks: the first to end stops the run with an error,
    // as a controller's task does.
    let mut tasks = Supervised::default();
    tasks.watch("in-memory API server's listener", listener);
    tasks.spawn("log of phase changes", log_transitions(api.client()));
    tasks.spawn("stand-in kubelet", stand_in_kubelet(api.client()));
    let clients = Clients::build(
        ClientBuilder::new(api.service(), "default"),
        ClientBuilder::new(api.service(), "default"),
        ClientBuilder::new(api.service(), "default"),
        config.client,
    );
    // The secure port (a free loopback one unless the flags name one),
    // and a token of the demo's own that may read every admin path.
    let token = demo_token();
    api.add_token(&token, DEMO_USER, &[]);
    for path in ["/metrics", "/explain/*", "/shadow"] {
        api.grant(DEMO_USER, path, "get");
    }
    let mut app_config = config.app;
    if app_config.secure.is_none() {
        app_config.secure = Some(SecureServing {
            address: ([127, 0, 0, 1], 0).into(),
            certificate: ServingCertificate::SelfSigned { names: Vec::new() },
            delegation: DelegationConfig::default(),
            limits: ServingLimits::default(),
        });
    }
    let app = App::start(clients, app_config).await?;
    if let Some(address) = app.insecure_address() {
        println!("  metrics: http://{address}/metrics");
    }
    if let Some(address) = app.secure_address() {
        println!("  admin port: https://{address} (bearer token {token})");
        println!(
            "  the controller's own view: pv-controller explain NAMESPACE/CLAIM --admin-address https://{address} --token {token} --insecure-skip-tls-verify"
        );
    }
    let idle = app.idle_probe();
    let settled = {
        let api = api.clone();
        async move {
            if config.exit_when_settled {
                wait_settled(&api, &idle, config.quiet_period).await;
                tracing::info!("settled");
            } else {
                std::future::pending::<()>().await;
            }
        }
    };
    let mut stopped = None;
    let result = app
        .run(async {
            tokio::select! {
                () = shutdown => {}
                () = settled => {}
                ended = tasks.stopped() => stopped = Some(ended),
            }
        })
        .await;
    tasks.stop_all().await;
    result?;
    if let Some(ended) = stopped {
        return Err(ended.into());
    }
    Ok(format!(
        "{}\n{}\n{}",
        render_table(
            &api.list::<PersistentVolume>(),
            &api.list::<PersistentVolumeClaim>(),
        ),
        render_resource_claims(&api.list::<ResourceClaim>()),
        render_events(&api.list::<Event>())
    ))
}

/// Plays the kubelet of a cluster without nodes: every pod that runs to
/// completion (restartPolicy Never or OnFailure, as recycler pods) and
/// appears without a final phase is marked Succeeded, so recycler pods end.
/// Long-running pods (restartPolicy Always, the default: a pod with an
/// ephemeral volume or a ResourceClaim in the demo) are left Pending, so
/// their claims stay.
pub async fn stand_in_kubelet(client: Client) {
    let pods: Api<Pod> = Api::all(client.clone());
    let mut stream = std::pin::pin!(
        watcher(pods, watcher::Config::default())
            .default_backoff()
            .applied_objects()
    );
    while let Some(item) = stream.next().await {
        let Ok(pod) = item else { continue };
        let ended = PodPhase::of(&pod).is_some_and(PodPhase::is_terminal);
        let runs_to_completion = pod
            .spec
            .as_ref()
            .and_then(|spec| spec.restart_policy.as_deref())
            .is_some_and(|policy| policy == "Never" || policy == "OnFailure");
        if !runs_to_completion || ended || pod.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let namespace = pod.namespace().unwrap_or_default();
        let name = pod.name_any();
        let finished = serde_json::json!({"status": {"phase": PodPhase::Succeeded.to_string()}});
        let result = Api::<Pod>::namespaced(client.clone(), &namespace)
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(&finished))
            .await;
        match result {
            Ok(_) => {
                tracing::info!(pod = %format!("{namespace}/{name}"), "stand-in kubelet: pod Succeeded");
            }
            Err(error) => {
                tracing::warn!(pod = %format!("{namespace}/{name}"), %error, "stand-in kubelet could not finish the pod");
            }
        }
    }
}

/// Waits until the controller is idle and no volume or claim has changed
/// (same resourceVersions) for `quiet`. Events are ignored: a repeated event
/// only bumps its count and says nothing new.
///
/// The loop of every settled run: the embedded mode's `--exit-when-settled`
/// and the tests' scenario harness. The volumes and claims are listed (every
/// object decoded) only after the server recorded some write, so a quiet
/// period costs nothing however many objects the cluster holds.
pub async fn wait_settled(api: &MemApi, idle: &IdleProbe, quiet: Duration) {
    let mut written = api.resource_version();
    let mut last = fingerprint(api);
    let mut quiet_since = tokio::time::Instant::now();
    loop {
        tokio::time::sleep(SETTLE_POLL).await;
        let mut changed = false;
        let now_written = api.resource_version();
        if now_written != written {
            written = now_written;
            let now = fingerprint(api);
            changed = now != last;
            last = now;
        }
        if changed || !idle.is_idle() {
            quiet_since = tokio::time::Instant::now();
        } else if quiet_since.elapsed() >= quiet {
            return;
        }
    }
}

/// The resourceVersion of every volume and claim.
fn fingerprint(api: &MemApi) -> Vec<(String, Option<String>)> {
    let volumes = api.list::<PersistentVolume>();
    let claims = api.list::<PersistentVolumeClaim>();
    volumes
        .iter()
        .map(|v| (v.name_any(), v.resource_version()))
        .chain(claims.iter().map(|c| {
            (
                format!("{}/{}", c.namespace().unwrap_or_default(), c.name_any()),
                c.resource_version(),
            )
        }))
        .collect()
}

/// Logs every phase change of volumes and claims until aborted.
async fn log_transitions(client: Client) {
    tokio::join!(
        log_kind::<PersistentVolume>(client.clone(), "pv", |v| {
            v.status.as_ref().and_then(|s| s.phase.clone())
        }),
        log_kind::<PersistentVolumeClaim>(client, "pvc", |c| {
            c.status.as_ref().and_then(|s| s.phase.clone())
        }),
    );
}

async fn log_kind<K>(client: Client, kind: &'static str, phase: fn(&K) -> Option<String>)
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    let mut phases: HashMap<String, String> = HashMap::new();
    let mut stream = std::pin::pin!(watcher(Api::<K>::all(client), watcher::Config::default()));
    while let Some(event) = stream.next().await {
        match event {
            Ok(watcher::Event::Apply(object) | watcher::Event::InitApply(object)) => {
                let name = object_name(&object);
                let to = phase(&object).unwrap_or_default();
                let from = phases.insert(name.clone(), to.clone());
                match from {
                    Some(from) if from == to => {}
                    Some(from) => {
                        tracing::info!(object = %format!("{kind}/{name}"), %from, %to, "phase changed");
                    }
                    None => tracing::info!(object = %format!("{kind}/{name}"), phase = %to, "seen"),
                }
            }
            Ok(watcher::Event::Delete(object)) => {
                let name = object_name(&object);
                phases.remove(&name);
                tracing::info!(object = %format!("{kind}/{name}"), "deleted");
            }
            Ok(watcher::Event::Init | watcher::Event::InitDone) => {}
            Err(error) => tracing::debug!(%error, "transition log watch failed, retrying"),
        }
    }
}

fn object_name<K: Resource>(object: &K) -> String {
    match object.meta().namespace.as_deref() {
        Some(namespace) => format!("{namespace}/{}", object.name_any()),
        None => object.name_any(),
    }
}

/// The volumes and claims as two kubectl-like tables.
pub fn render_table(volumes: &[PersistentVolume], claims: &[PersistentVolumeClaim]) -> String {
    let mut volume_rows = vec![row([
        "NAME",
        "CAPACITY",
        "RECLAIM POLICY",
        "STATUS",
        "CLAIM",
        "STORAGECLASS",
    ])];
    for volume in volumes {
        let spec = volume.spec.clone().unwrap_or_default();
        let claim = spec
            .claim_ref
            .as_ref()
            .map(ObjectKey::of_reference)
            .map(|key| format!("{}/{}", key.namespace, key.name))
            .unwrap_or_default();
        volume_rows.push(vec![
            volume.name_any(),
            storage(spec.capacity.as_ref()),
            spec.persistent_volume_reclaim_policy.unwrap_or_default(),
            volume
                .status
                .as_ref()
                .and_then(|s| s.phase.clone())
                .unwrap_or_default(),
            claim,
            spec.storage_class_name.unwrap_or_default(),
        ]);
    }
    let mut claim_rows = vec![row([
        "NAMESPACE",
        "NAME",
        "STATUS",
        "VOLUME",
        "CAPACITY",
        "STORAGECLASS",
    ])];
    for claim in claims {
        let spec = claim.spec.clone().unwrap_or_default();
        let status = claim.status.clone().unwrap_or_default();
        claim_rows.push(vec![
            claim.namespace().unwrap_or_default(),
            claim.name_any(),
            status.phase.unwrap_or_default(),
            spec.volume_name.unwrap_or_default(),
            storage(status.capacity.as_ref()),
            spec.storage_class_name.unwrap_or_default(),
        ]);
    }
    format!("{}\n{}", columns(&volume_rows), columns(&claim_rows))
}

/// The ResourceClaims, as `kubectl get resourceclaims -A` with the pod
/// that owns each and the pod entry it was generated for.
pub fn render_resource_claims(claims: &[ResourceClaim]) -> String {
    let mut rows = vec![row([
        "NAMESPACE",
        "RESOURCECLAIM",
        "STATE",
        "OWNER",
        "POD-CLAIM",
    ])];
    for claim in claims {
        let status = claim.status.clone().unwrap_or_default();
        let mut state = Vec::new();
        if status.allocation.is_some() {
            state.push("allocated");
        }
        if status.reserved_for.is_some_and(|r| !r.is_empty()) {
            state.push("reserved");
        }
        if claim.metadata.deletion_timestamp.is_some() {
            state.push("deleted");
        }
        let owner = claim
            .metadata
            .owner_references
            .iter()
            .flatten()
            .find(|o| o.controller == Some(true))
            .map(|o| format!("{}/{}", o.kind.to_lowercase(), o.name))
            .unwrap_or_default();
        let entry = claim
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(k8s_names::ANN_POD_CLAIM_NAME).cloned())
            .unwrap_or_default();
        rows.push(vec![
            claim.namespace().unwrap_or_default(),
            claim.name_any(),
            if state.is_empty() {
                "pending".to_string()
            } else {
                state.join(",")
            },
            owner,
            entry,
        ]);
    }
    columns(&rows)
}

/// The recorded events, one line each: type, reason, object, message.
pub fn render_events(events: &[Event]) -> String {
    let mut rows = vec![row(["TYPE", "REASON", "OBJECT", "MESSAGE"])];
    for event in events {
        let regarding = &event.involved_object;
        let object = format!(
            "{}/{}",
            regarding.kind.as_deref().unwrap_or_default().to_lowercase(),
            regarding.name.as_deref().unwrap_or_default()
        );
        let message = event.message.clone().unwrap_or_default();
        let short: String = message.chars().take(70).collect();
        let ellipsis = if short.len() < message.len() {
            "..."
        } else {
            ""
        };
        rows.push(vec![
            event.type_.clone().unwrap_or_default(),
            event.reason.clone().unwrap_or_default(),
            object,
            format!("{short}{ellipsis}"),
        ]);
    }
    columns(&rows)
}

fn row<const N: usize>(cells: [&str; N]) -> Vec<String> {
    cells.iter().map(std::string::ToString::to_string).collect()
}

fn storage(
    resources: Option<
        &std::collections::BTreeMap<
            String,
            k8s_openapi::apimachinery::pkg::api::resource::Quantity,
        >,
    >,
) -> String {
    resources
        .and_then(|r| r.get("storage"))
        .map(|q| q.0.clone())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests;
