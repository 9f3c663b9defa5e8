//! The API server of a run: memapi served on a loopback port (in this
//! process, so the controller's own process is measured alone), or a real
//! one named by a kubeconfig. Objects are created, counted and cleaned up
//! the same way on both.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use futures::{StreamExt, TryStreamExt, stream};
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config};
use memapi::{MemApi, Verb};

use crate::workload::LABEL;

/// Requests the bench itself has in flight when it creates or deletes.
const CONCURRENCY: usize = 64;

/// The User-Agent the controller sends. The API server takes its first
/// word as the field manager of a write, so an object the bench created
/// and the controller then wrote carries two managers' fields.
const CONTROLLER_USER_AGENT: &str = concat!("pv-controller/", env!("CARGO_PKG_VERSION"));

/// Writes of volumes and claims made during a run, as the server counted.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Writes {
    pub(crate) volume: f64,
    pub(crate) claim: f64,
    pub(crate) conflicts: f64,
    /// Whether the figures come from the server (false: not readable).
    pub(crate) known: bool,
}

/// The server of a run.
pub(crate) enum Server {
    Mem {
        api: MemApi,
        kubeconfig: PathBuf,
        task: tokio::task::JoinHandle<()>,
    },
    Real {
        client: Client,
        /// The ceiling probe's writer: as [`Server::writer_client`] says.
        writer: Client,
        kubeconfig: PathBuf,
        before: BTreeMap<String, f64>,
    },
}

impl Server {
    /// A fresh memapi on a loopback port, with a kubeconfig naming it in
    /// `dir`.
    pub(crate) async fn memapi(dir: &Path) -> Self {
        let api = MemApi::new();
        let (addr, task) = api
            .serve("127.0.0.1:0".parse().expect("address"))
            .await
            .expect("serve memapi");
        let kubeconfig = dir.join("memapi.kubeconfig");
        let text = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: memapi\n  cluster:\n    server: http://{addr}\nusers:\n- name: memapi\n  user: {{}}\ncontexts:\n- name: memapi\n  context:\n    cluster: memapi\n    user: memapi\ncurrent-context: memapi\n"
        );
        std::fs::write(&kubeconfig, text).expect("write kubeconfig");
        Self::Mem {
            api,
            kubeconfig,
            task,
        }
    }

    /// The API server a kubeconfig names.
    pub(crate) async fn real(kubeconfig: &Path) -> Self {
        let file = Kubeconfig::read_from(kubeconfig).expect("read kubeconfig");
        let mut config = Config::from_custom_kubeconfig(file, &KubeConfigOptions::default())
            .await
            .expect("kubeconfig");
        config.read_timeout = Some(std::time::Duration::from_secs(300));
        let mut writer = config.clone();
        writer.headers.push((
            http::header::USER_AGENT,
            http::HeaderValue::from_static(CONTROLLER_USER_AGENT),
        ));
        let client = Client::try_from(config).expect("client");
        let writer = Client::try_from(writer).expect("writer client");
        Self::Real {
            client,
            writer,
            kubeconfig: kubeconfig.to_path_buf(),
            before: BTreeMap::new(),
        }
    }

    pub(crate) fn kubeconfig(&self) -> &Path {
        match self {
            Self::Mem { kubeconfig, .. } | Self::Real { kubeconfig, .. } => kubeconfig,
        }
    }

    /// A client for the bench's own requests (in-process for memapi).
    pub(crate) fn client(&self) -> Client {
        match self {
            Self::Mem { api, .. } => api.client(),
            Self::Real { client, .. } => client.clone(),
        }
    }

    /// A client for writes that stand in for the controller's: it sends
    /// the controller's User-Agent, so the server keeps the same field
    /// managers on an object the probe wrote as on one the controller
    /// wrote (the bench's seeding, and then the writer), and does the
    /// same work for each write.
    pub(crate) fn writer_client(&self) -> Client {
        match self {
            Self::Mem { api, .. } => api.client(),
            Self::Real { writer, .. } => writer.clone(),
        }
    }

    pub(crate) fn is_real(&self) -> bool {
        matches!(self, Self::Real { .. })
    }

    /// Creates the classes (an existing one is kept).
    pub(crate) async fn create_classes(&self, classes: Vec<StorageClass>) {
        let api: Api<StorageClass> = Api::all(self.client());
        for class in classes {
            match api.create(&PostParams::default(), &class).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 409 => {}
                Err(e) => panic!("create class: {e}"),
            }
        }
    }

    /// Creates claims, many at once; returns their UIDs in order.
    pub(crate) async fn create_claims(&self, claims: Vec<PersistentVolumeClaim>) -> Vec<String> {
        let client = self.client();
        stream::iter(claims)
            .map(|claim| {
                let api: Api<PersistentVolumeClaim> = Api::namespaced(
                    client.clone(),
                    claim.metadata.namespace.as_deref().unwrap_or("default"),
                );
                async move {
                    let created = api.create(&PostParams::default(), &claim).await;
                    created.map(|c| c.metadata.uid.unwrap_or_default())
                }
            })
            .buffered(CONCURRENCY)
            .try_collect()
            .await
            .expect("create claims")
    }

    /// Creates volumes, many at once.
    pub(crate) async fn create_volumes(&self, volumes: Vec<PersistentVolume>) {
        let api: Api<PersistentVolume> = Api::all(self.client());
        stream::iter(volumes)
            .map(|volume| {
                let api = api.clone();
                async move { api.create(&PostParams::default(), &volume).await.map(drop) }
            })
            .buffer_unordered(CONCURRENCY)
            .try_collect::<Vec<()>>()
            .await
            .expect("create volumes");
    }

    /// Starts counting writes from now.
    pub(crate) async fn start_counting(&mut self) {
        match self {
            Self::Mem { api, .. } => api.reset_requests(),
            Self::Real { client, before, .. } => *before = request_totals(client).await,
        }
    }

    /// The writes of volumes and claims since [`Server::start_counting`].
    pub(crate) async fn writes(&self) -> Writes {
        match self {
            Self::Mem { api, .. } => {
                let stats = api.requests();
                let count = |resource| {
                    (stats.count(Verb::Update, resource, None)
                        + stats.count(Verb::Update, resource, Some("status"))
                        + stats.count(Verb::Patch, resource, None)
                        + stats.count(Verb::Patch, resource, Some("status")))
                        as f64
                };
                Writes {
                    volume: count("persistentvolumes"),
                    claim: count("persistentvolumeclaims"),
                    conflicts: stats.total_with_code(409) as f64,
                    known: true,
                }
            }
            Self::Real { client, before, .. } => {
                let after = request_totals(client).await;
                if after.is_empty() {
                    return Writes::default();
                }
                let diff =
                    |key: &str| after.get(key).unwrap_or(&0.0) - before.get(key).unwrap_or(&0.0);
                Writes {
                    volume: diff("persistentvolumes"),
                    claim: diff("persistentvolumeclaims"),
                    conflicts: diff("409"),
                    known: true,
                }
            }
        }
    }

    /// Removes every object of the bench (protection finalizers first:
    /// nothing removes them on an API server without controllers).
    pub(crate) async fn clean_up(&self) {
        let client = self.client();
        let selector = ListParams::default().labels(&format!("{}={}", LABEL.0, LABEL.1));
        let unfinalize = Patch::Merge(serde_json::json!({"metadata": {"finalizers": null}}));
        let claims: Api<PersistentVolumeClaim> = Api::all(client.clone());
        let listed = claims.list_metadata(&selector).await.expect("list claims");
        stream::iter(listed.items)
            .map(|meta| {
                let api: Api<PersistentVolumeClaim> = Api::namespaced(
                    client.clone(),
                    meta.metadata.namespace.as_deref().unwrap_or("default"),
                );
                let name = meta.metadata.name.unwrap_or_default();
                let patch = unfinalize.clone();
                async move {
                    let _ = api.patch(&name, &PatchParams::default(), &patch).await;
                    let _ = api.delete(&name, &DeleteParams::default()).await;
                }
            })
            .buffer_unordered(CONCURRENCY)
            .collect::<Vec<()>>()
            .await;
        let volumes: Api<PersistentVolume> = Api::all(client.clone());
        let listed = volumes
            .list_metadata(&selector)
            .await
            .expect("list volumes");
        stream::iter(listed.items)
            .map(|meta| {
                let api = volumes.clone();
                let name = meta.metadata.name.unwrap_or_default();
                let patch = unfinalize.clone();
                async move {
                    let _ = api.patch(&name, &PatchParams::default(), &patch).await;
                    let _ = api.delete(&name, &DeleteParams::default()).await;
                }
            })
            .buffer_unordered(CONCURRENCY)
            .collect::<Vec<()>>()
            .await;
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Self::Mem { task, .. } = self {
            task.abort();
        }
    }
}

/// The API server's own count of requests (`apiserver_request_total`):
/// writes (PUT or UPDATE, PATCH) of volumes and of claims, and 409s of either.
/// Empty when /metrics cannot be read.
async fn request_totals(client: &Client) -> BTreeMap<String, f64> {
    let mut text = None;
    for _ in 0..3 {
        let request = http::Request::get("/metrics")
            .body(Vec::new())
            .expect("request");
        match client.request_text(request).await {
            Ok(body) => {
                text = Some(body);
                break;
            }
            Err(error) => eprintln!("reading the API server's /metrics: {error}"),
        }
    }
    let Some(text) = text else {
        eprintln!("the API server's /metrics is not readable: no request counts");
        return BTreeMap::new();
    };
    let mut totals = BTreeMap::new();
    for line in text
        .lines()
        .filter(|l| l.starts_with("apiserver_request_total{"))
    {
        let Some((labels, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let value: f64 = value.parse().unwrap_or(0.0);
        let labels = labels.replacen('{', ",", 1);
        let label = |name: &str| {
            labels
                .split(&format!(",{name}=\""))
                .nth(1)
                .and_then(|rest| rest.split('"').next())
                .unwrap_or("")
                .to_string()
        };
        let resource = label("resource");
        if resource != "persistentvolumes" && resource != "persistentvolumeclaims" {
            continue;
        }
        // "PUT" up to 1.21, "UPDATE" from 1.22 on.
        let verb = label("verb");
        if !matches!(verb.as_str(), "PUT" | "UPDATE" | "PATCH") {
            continue;
        }
        *totals.entry(resource).or_insert(0.0) += value;
        if label("code") == "409" {
            *totals.entry("409".to_string()).or_insert(0.0) += value;
        }
    }
    totals
}
