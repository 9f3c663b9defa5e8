//! What every case shares: the cluster and its admin client, the
//! controller's replicas, a namespace and names per case, the parts the
//! test plays for a controller-less control plane, and waiting.

pub(crate) mod case;
pub(crate) mod cleanup;
pub(crate) mod cluster;
pub(crate) mod describe;
pub(crate) mod kubelet;
pub(crate) mod metrics;
pub(crate) mod replicas;
pub(crate) mod runner;
pub(crate) mod wait;

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use k8s_openapi::api::core::v1::Node;
use kube::api::ListParams;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config};

pub(crate) use case::Case;
pub(crate) use replicas::Pool;

/// The variable naming the kubeconfig of the cluster to test against.
pub(crate) const KUBECONFIG_VARIABLE: &str = "PV_CONTROLLER_E2E_KUBECONFIG";

/// The variable naming another controller binary than the one cargo built
/// for this test (a release build, say).
pub(crate) const BINARY_VARIABLE: &str = "PV_CONTROLLER_E2E_BINARY";

/// The Lease every replica of every run of the suite competes for: one
/// writer at a time, however many runs share the cluster.
pub(crate) const LEASE_NAME: &str = "pv-controller-e2e";

/// Where runs keep their files: kubeconfig, logs, hostPath storage. Under
/// `/tmp` because the hostPath deleter deletes only there.
pub(crate) const WORK_ROOT: &str = "/tmp/pv-controller-e2e";

/// How long one condition may take to come true.
pub(crate) const PATIENCE: Duration = Duration::from_secs(90);

/// The label every object of a run carries (value: the run id).
pub(crate) const RUN_LABEL: &str = "e2e.pv-controller.k8s.io/run";

/// The label every object of a case carries (value: the case namespace).
pub(crate) const CASE_LABEL: &str = "e2e.pv-controller.k8s.io/case";

/// What the run knows about the cluster and itself.
pub(crate) struct Env {
    /// The admin client (the kubeconfig as given).
    pub(crate) client: Client,
    /// The API server's address.
    pub(crate) server: String,
    /// The kubeconfig as given.
    pub(crate) kubeconfig: PathBuf,
    /// The same, impersonating the ServiceAccount: the controller's.
    pub(crate) controller_kubeconfig: PathBuf,
    /// This run's id, in every namespace and cluster-scoped name.
    pub(crate) run: String,
    /// This run's directory under [`WORK_ROOT`].
    pub(crate) dir: PathBuf,
    /// The server's version, e.g. `v1.20.2`.
    pub(crate) server_version: String,
    /// The server's minor version (20 for 1.20).
    pub(crate) server_minor: u32,
    /// Whether the cluster has no nodes, so the test finishes recycler
    /// pods itself.
    pub(crate) plays_kubelet: bool,
    /// A node name for `selected-node`: a real node's, or a made-up one.
    pub(crate) node: String,
    /// `deploy/`'s ServiceAccount: namespace and name.
    pub(crate) service_account: (String, String),
    /// The controller's replicas.
    pub(crate) pool: Pool,
}

impl Env {
    /// Connects, applies `deploy/`'s RBAC, writes the impersonating
    /// kubeconfig and starts two replicas.
    pub(crate) async fn setup(kubeconfig: PathBuf) -> anyhow::Result<Self> {
        let (client, server) = admin_client(&kubeconfig).await?;
        let version = client
            .apiserver_version()
            .await
            .context("reading the server's version")?;
        let server_minor = version
            .minor
            .trim_end_matches(|c: char| !c.is_ascii_digit())
            .parse()
            .with_context(|| format!("the server's minor version {:?}", version.minor))?;
        let run = run_id();
        let dir = PathBuf::from(WORK_ROOT).join(&run);
        std::fs::create_dir_all(dir.join("storage"))
            .with_context(|| format!("creating {}", dir.display()))?;
        let service_account = cluster::apply_deploy_rbac(&kubeconfig).await?;
        let controller_kubeconfig = dir.join("kubeconfig");
        cluster::write_impersonating_kubeconfig(
            &kubeconfig,
            &service_account,
            &controller_kubeconfig,
        )?;
        let nodes = Api::<Node>::all(client.clone())
            .list(&ListParams::default().limit(1))
            .await
            .context("listing nodes")?;
        let node = nodes.items.first().and_then(|n| n.metadata.name.clone());
        let pool = Pool::new(
            binary(),
            controller_kubeconfig.clone(),
            dir.clone(),
            run.clone(),
            service_account.0.clone(),
        );
        Ok(Self {
            client,
            server,
            kubeconfig,
            controller_kubeconfig,
            run,
            dir,
            server_version: version.git_version,
            server_minor,
            plays_kubelet: node.is_none(),
            node: node.unwrap_or_else(|| "e2e-node".to_string()),
            service_account,
            pool,
        })
    }
}

/// The controller binary: `PV_CONTROLLER_E2E_BINARY`, else the one cargo
/// built with this test.
fn binary() -> PathBuf {
    std::env::var_os(BINARY_VARIABLE)
        .filter(|v| !v.is_empty())
        .map_or_else(
            || PathBuf::from(env!("CARGO_BIN_EXE_pv-controller")),
            PathBuf::from,
        )
}

/// A client from the kubeconfig's current context, and the server's address.
pub(crate) async fn admin_client(kubeconfig: &std::path::Path) -> anyhow::Result<(Client, String)> {
    let file = Kubeconfig::read_from(kubeconfig)
        .with_context(|| format!("reading {}", kubeconfig.display()))?;
    let config = Config::from_custom_kubeconfig(file, &KubeConfigOptions::default())
        .await
        .with_context(|| format!("loading {}", kubeconfig.display()))?;
    let server = config.cluster_url.to_string();
    Ok((
        Client::try_from(config).context("building a client")?,
        server,
    ))
}

/// Six hex digits, different for each run (time and process).
fn run_id() -> String {
    use std::hash::BuildHasher;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let bits = std::collections::hash_map::RandomState::new().hash_one((nanos, std::process::id()));
    format!("{:06x}", bits & 0xff_ffff)
}
