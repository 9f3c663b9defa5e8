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
use component_base::duration;
use component_base::flags::go_bool;
use component_base::logs::LoggingFormat;
use k8s_openapi::api::core::v1::{NodeSelector, NodeSelectorRequirement, NodeSelectorTerm};
use kube::config::{KubeConfigOptions, Kubeconfig};
use resourceslice::{DriverResources, NodeSelection, Options, Owner, Publisher};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// Publishes the devices of a YAML file as one DRA driver's ResourceSlices.
/// Flags and logs are spelled as pv-controller's and kube-controller-manager's.
#[derive(Debug, Parser)]
#[command(name = "dra-publish", version, max_term_width = 100)]
struct Args {
    /// The driver's name (spec.driver).
    #[arg(long, required_unless_present = "wipe_node", value_name = "string")]
    driver: Option<String>,
    /// The node whose devices these are: the slices carry its name and
    /// belong to it.
    #[arg(long, conflicts_with_all = ["all_nodes", "node_selector"], value_name = "string")]
    node: Option<String>,
    /// The devices are reachable from every node.
    #[arg(long, num_args = 0..=1, require_equals = true, default_value = "false",
          default_missing_value = "true", value_parser = go_bool,
          value_name = "bool", conflicts_with = "node_selector")]
    all_nodes: bool,
    /// The devices are reachable from the nodes with these labels
    /// (`key=value,key2=value2`).
    #[arg(long, value_name = "key=value,...")]
    node_selector: Option<String>,
    /// The YAML file of pools and devices; re-read when it changes.
    #[arg(long, required_unless_present = "wipe_node", value_name = "file")]
    devices: Option<PathBuf>,
    /// Delete every ResourceSlice of this node (all drivers) and exit.
    #[arg(long, conflicts_with_all = ["driver", "devices"], value_name = "string")]
    wipe_node: Option<String>,
    /// Path to a kubeconfig file; without it KUBECONFIG, the in-cluster
    /// configuration, then ~/.kube/config.
    #[arg(long, value_name = "file")]
    kubeconfig: Option<PathBuf>,
    /// Address of the API server; overrides the kubeconfig's (`--server`,
    /// kubectl's spelling, too).
    #[arg(long, visible_alias = "server", value_name = "url")]
    master: Option<String>,
    /// How long after a change by someone else the slices are repaired.
    #[arg(long, default_value = "30s", value_parser = duration::positive, value_name = "duration")]
    sync_delay: Duration,
    /// Log line format: text, or json shaped as kube-controller-manager's.
    #[arg(long = "logging-format", alias = "log-format", value_enum,
          default_value_t = LoggingFormat::Text, value_name = "format")]
    logging_format: LoggingFormat,
    /// klog verbosity: 0 errors, warnings and start-up; 2 changes; 4 debug;
    /// 5 trace (RUST_LOG, when set, wins).
    #[arg(short = 'v', long = "v", default_value_t = 2, value_name = "level")]
    verbosity: u8,
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

/// A client as kubectl would make it: the kubeconfig's (or the inferred
/// configuration's), its server replaced by `master` when given; `master`
/// alone talks to that server without credentials (the embedded cluster).
async fn client(kubeconfig: Option<&Path>, master: Option<&str>) -> anyhow::Result<kube::Client> {
    let master = master
        .map(|url| {
            url.parse::<http::Uri>()
                .with_context(|| format!("{url:?} is not a URL"))
        })
        .transpose()?;
    let mut config = match (kubeconfig, &master) {
        (Some(path), _) => {
            let file = Kubeconfig::read_from(path)
                .with_context(|| format!("reading kubeconfig {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(file, &KubeConfigOptions::default()).await?
        }
        (None, Some(url)) => kube::Config::new(url.clone()),
        (None, None) => kube::Config::infer().await?,
    };
    if let Some(url) = master {
        config.cluster_url = url;
    }
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

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    component_base::logs::init(args.logging_format, args.verbosity)?;
    tracing::info!(v = 0, version = env!("CARGO_PKG_VERSION"), "Version");
    let client = client(args.kubeconfig.as_deref(), args.master.as_deref()).await?;
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
