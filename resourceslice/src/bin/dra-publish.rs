//! dra-publish: a static-inventory DRA driver. It publishes the devices a
//! YAML file lists as ResourceSlices of one driver, follows edits to the
//! file, and stops on Ctrl-C or SIGTERM (the slices stay, as a driver's
//! do across restarts). Useful to try schedulers and for hardware no
//! driver can discover. With `--wipe-node` it does the kubelet's clean-up
//! of a node instead, once.
//!
//! The file holds pools by name, each a list of devices in the
//! resource.k8s.io/v1 Device shape, cut into slices within the API's
//! limits:
//!
//! ```yaml
//! pools:
//!   node-1:
//!     devices:
//!     - name: gpu-0
//!       attributes: {model: {string: a100}}
//!       capacity: {memory: {value: 40Gi}}
//! ```

use anyhow::Context as _;
use clap::Parser;
use k8s_openapi::api::core::v1::{NodeSelector, NodeSelectorRequirement, NodeSelectorTerm};
use kube::config::{KubeConfigOptions, Kubeconfig};
use resourceslice::{DriverResources, NodeSelection, Options, Owner, Publisher};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// Publishes the devices of a YAML file as one DRA driver's ResourceSlices.
#[derive(Debug, Parser)]
#[command(name = "dra-publish", version)]
struct Args {
    /// The driver's name (spec.driver).
    #[arg(long, required_unless_present = "wipe_node")]
    driver: Option<String>,
    /// The node whose devices these are: the slices carry its name and
    /// belong to it.
    #[arg(long, conflicts_with_all = ["all_nodes", "node_selector"])]
    node: Option<String>,
    /// The devices are reachable from every node.
    #[arg(long, conflicts_with = "node_selector")]
    all_nodes: bool,
    /// The devices are reachable from the nodes with these labels
    /// (`key=value,key2=value2`).
    #[arg(long)]
    node_selector: Option<String>,
    /// The YAML file of pools and devices; re-read when it changes.
    #[arg(long, required_unless_present = "wipe_node")]
    devices: Option<PathBuf>,
    /// Delete every ResourceSlice of this node (all drivers) and exit.
    #[arg(long, conflicts_with_all = ["driver", "devices"])]
    wipe_node: Option<String>,
    /// The kubeconfig file (else $KUBECONFIG, ~/.kube/config, in-cluster).
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// An API server URL to use without credentials instead (as
    /// `kubectl --server`, for the embedded cluster).
    #[arg(long, conflicts_with = "kubeconfig")]
    server: Option<String>,
    /// How long after a change by someone else the slices are repaired.
    #[arg(long, default_value = "30s", value_parser = parse_seconds)]
    sync_delay: Duration,
}

/// `30s`, `2m` or a number of seconds.
fn parse_seconds(s: &str) -> Result<Duration, String> {
    let (number, unit) = match s.strip_suffix('s') {
        Some(n) => (n, 1),
        None => match s.strip_suffix('m') {
            Some(n) => (n, 60),
            None => (s, 1),
        },
    };
    let seconds = number
        .parse::<u64>()
        .map_err(|e| format!("{s:?} is not a duration such as 30s: {e}"))?;
    seconds
        .checked_mul(unit)
        .map(Duration::from_secs)
        .ok_or_else(|| format!("{s:?} is too long"))
}

/// Reads the devices file into the driver's resources.
fn read_devices(path: &Path, selection: &NodeSelection) -> anyhow::Result<DriverResources> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    resourceslice::parse_devices_file(&text, selection)
        .with_context(|| format!("parsing {}", path.display()))
}

/// A selector of nodes having every `key=value` label.
fn node_selector(labels: &str) -> anyhow::Result<NodeSelector> {
    let match_expressions = labels
        .split(',')
        .map(|pair| {
            let (key, value) = pair
                .split_once('=')
                .with_context(|| format!("{pair:?} is not key=value"))?;
            Ok(NodeSelectorRequirement {
                key: key.trim().into(),
                operator: "In".into(),
                values: Some(vec![value.trim().into()]),
            })
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    Ok(NodeSelector {
        node_selector_terms: vec![NodeSelectorTerm {
            match_expressions: Some(match_expressions),
            match_fields: None,
        }],
    })
}

/// A client as kubectl would make it.
async fn client(kubeconfig: Option<&Path>, server: Option<&str>) -> anyhow::Result<kube::Client> {
    if let Some(url) = server {
        let url = url
            .parse()
            .with_context(|| format!("{url:?} is not a URL"))?;
        return Ok(kube::Client::try_from(kube::Config::new(url))?);
    }
    let config = match kubeconfig {
        Some(path) => {
            let file = Kubeconfig::read_from(path)
                .with_context(|| format!("reading kubeconfig {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(file, &KubeConfigOptions::default()).await?
        }
        None => kube::Config::infer().await?,
    };
    Ok(kube::Client::try_from(config)?)
}

/// When the file was last modified: a change means it is read again.
fn modified(path: &Path) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

/// Resolves when the process is asked to stop.
async fn shutdown() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}

/// Whether logs carry terminal colours: only on a terminal, and never
/// with `NO_COLOR` set, so a pipe, a file or a container's log gets plain
/// text.
fn log_colours() -> bool {
    use std::io::IsTerminal;
    std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none()
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "info,resourceslice=debug".into()),
        )
        .with_ansi(log_colours())
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();
    let client = client(args.kubeconfig.as_deref(), args.server.as_deref()).await?;
    if let Some(node) = &args.wipe_node {
        resourceslice::wipe_node(client, node).await?;
        return Ok(());
    }
    let (Some(driver), Some(path)) = (args.driver, args.devices) else {
        anyhow::bail!("--driver and --devices are required");
    };
    let (owner, selection) = match (&args.node, args.all_nodes, &args.node_selector) {
        (Some(node), _, _) => (Some(Owner::node(node)), NodeSelection::ThisNode),
        (None, true, _) => (None, NodeSelection::AllNodes),
        (None, false, Some(labels)) => (None, NodeSelection::NodeSelector(node_selector(labels)?)),
        (None, false, None) => {
            anyhow::bail!("one of --node, --all-nodes, --node-selector is required")
        }
    };
    let mut options = Options::new(driver, owner);
    options.resources = read_devices(&path, &selection)?;
    options.sync_delay = args.sync_delay;
    let publisher = Publisher::start(client, options)?;
    let mut seen = modified(&path);
    let mut poll = tokio::time::interval(Duration::from_secs(1));
    let stop = shutdown();
    tokio::pin!(stop);
    loop {
        tokio::select! {
            () = &mut stop => break,
            _ = poll.tick() => {}
        }
        let now = modified(&path);
        if now == seen {
            continue;
        }
        seen = now;
        match read_devices(&path, &selection) {
            Ok(resources) => {
                tracing::info!(file = %path.display(), pools = resources.pools.len(), "devices file changed");
                publisher.update(resources);
            }
            Err(error) => {
                tracing::error!(error = format!("{error:#}"), "keeping the previous devices");
            }
        }
    }
    let stats = publisher.stats();
    publisher.stop().await;
    tracing::info!(
        creates = stats.creates,
        updates = stats.updates,
        deletes = stats.deletes,
        "stopped"
    );
    Ok(())
}
