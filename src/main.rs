//! The `pv-controller` binary: parses flags, sets up logging, connects to
//! the cluster (or to an embedded in-memory one) and runs the controller
//! until SIGTERM or SIGINT.

use anyhow::Context as _;
use clap::Parser;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Config, client::ClientBuilder};
use pv_controller::{
    AppConfig, Clients, Command, ControllerSelection, LIST_PAGE_SIZE, LeaseConfig, Options,
    default_identity, ephemeral, parse_bind_address, plugin_config, pv, resourceclaim,
};

/// jemalloc, whose size classes keep the controller's many small long-lived
/// objects apart from a sync's short-lived copies: at 100,000 pairs it
/// needs 40% less memory than the C library's allocator, and a fifth less
/// CPU (docs/performance-notes.md, "Allocators"). The feature
/// `system-allocator` leaves it out, for heap profilers.
#[cfg(not(feature = "system-allocator"))]
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> anyhow::Result<()> {
    let options = Options::parse();
    if options.command.is_none() && invoked_as_kubectl_plugin() {
        anyhow::bail!(
            "as a kubectl plugin, pv-controller runs commands only: kubectl pv-controller explain NAMESPACE/CLAIM"
        );
    }
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(options.runtime_threads)
        .enable_all()
        .build()
        .context("starting the async runtime")?
        .block_on(run(options))
}

/// Whether the binary runs as the kubectl plugin `kubectl pv-controller`
/// (installed as `kubectl-pv_controller`), where only its commands make
/// sense: a controller started by a mistyped kubectl line would bind
/// claims beside the cluster's.
fn invoked_as_kubectl_plugin() -> bool {
    std::env::args_os()
        .next()
        .and_then(|program| {
            std::path::Path::new(&program)
                .file_name()
                .map(|name| name.to_string_lossy().starts_with("kubectl-"))
        })
        .unwrap_or(false)
}

/// Runs the command or the controllers the flags ask for.
async fn run(options: Options) -> anyhow::Result<()> {
    if let Some(Command::Explain(args)) = &options.command {
        let explanation = pv_controller::explain_cli::explain(args).await?;
        print!("{}", pv_controller::explain_cli::table(&explanation));
        return Ok(());
    }
    component_base::logs::init(options.logging_format, options.verbosity)?;
    tracing::info!(
        v = 0,
        version = pv_controller::VERSION,
        revision = pv_controller::REVISION,
        "Version"
    );
    let config = app_config(&options)?;
    if let Some(file) = &options.embedded_cluster {
        Box::pin(run_embedded_cluster(file, &options, config)).await?;
    } else {
        let clients = connect(&options).await?;
        Box::pin(pv_controller::serve(clients, config, shutdown_signal()))
            .await
            .context("running the controller")?;
    }
    Ok(())
}

/// Runs the controller on an in-memory cluster seeded from `file` and
/// prints the final table.
#[cfg(feature = "embedded")]
async fn run_embedded_cluster(
    file: &std::path::Path,
    options: &Options,
    config: AppConfig,
) -> anyhow::Result<()> {
    let table = pv_controller::run_embedded(
        pv_controller::EmbeddedConfig {
            file: file.to_path_buf(),
            exit_when_settled: options.exit_when_settled,
            quiet_period: options.resync_period() * 3,
            app: config,
            client: options.client_options(),
        },
        shutdown_signal(),
    )
    .await
    .context("running on the embedded cluster")?;
    println!("\n{table}");
    Ok(())
}

/// Refuses `--embedded-cluster` in a build without the in-memory cluster.
#[cfg(not(feature = "embedded"))]
#[allow(
    clippy::unused_async,
    reason = "the same signature as the embedded build's, so main reads alike in both"
)]
async fn run_embedded_cluster(
    _file: &std::path::Path,
    _options: &Options,
    _config: AppConfig,
) -> anyhow::Result<()> {
    anyhow::bail!(
        "--embedded-cluster is not available: this binary was built without the `embedded` feature"
    )
}

/// The process's configuration from the flags.
fn app_config(options: &Options) -> anyhow::Result<AppConfig> {
    anyhow::ensure!(
        !options.leader_elect()
            || options.leader_elect_retry_period < options.leader_elect_renew_deadline
                && options.leader_elect_renew_deadline < options.leader_elect_lease_duration,
        "leader election needs retry period < renew deadline < lease duration"
    );
    let plugins = plugin_config(options).context("loading volume plugins")?;
    let identity = default_identity();
    let election = options.leader_elect().then(|| LeaseConfig {
        lease_duration: options.leader_elect_lease_duration,
        renew_deadline: options.leader_elect_renew_deadline,
        retry_period: options.leader_elect_retry_period,
        ..LeaseConfig::new(
            &options.leader_elect_resource_namespace,
            &options.leader_elect_resource_name,
            &identity,
        )
    });
    Ok(AppConfig {
        instance: identity,
        watch_failure_limit: options.watch_failure_limit,
        list_page_size: LIST_PAGE_SIZE,
        api_discovery_period: options.api_discovery_period,
        persistentvolume: pv::Config {
            resync_period: options.resync_period(),
            settings: pv::Settings {
                enable_dynamic_provisioning: options.enable_dynamic_provisioning,
                plugins: pv::VolumePlugins::from_config(&plugins),
                ..pv::Settings::default()
            },
            max_concurrent_operations: options.max_concurrent_operations,
            claim_workers: options.concurrent_claim_syncs,
            volume_workers: options.concurrent_volume_syncs,
        },
        ephemeral: ephemeral::Config {
            workers: options.concurrent_ephemeralvolume_syncs,
        },
        resourceclaim: resourceclaim::Config {
            workers: options.concurrent_resourceclaim_syncs,
            features: resourceclaim::Features::from_gates(&options.feature_gates),
        },
        controllers: ControllerSelection::new(options.controllers.iter().map(String::as_str)),
        insecure_address: options
            .insecure_address()
            .map(|address| {
                parse_bind_address(address)
                    .with_context(|| format!("parsing --metrics-bind-address {address:?}"))
            })
            .transpose()?,
        secure: options.secure_serving(),
        shadow: options.shadow_config(),
        election,
    })
}

/// The clients for the cluster named by the flags: the controller's, limited
/// to the flags' rate, and the lease's own.
async fn connect(options: &Options) -> anyhow::Result<Clients> {
    let mut config = match &options.kubeconfig {
        Some(path) => {
            let kubeconfig = Kubeconfig::read_from(path)
                .with_context(|| format!("reading kubeconfig {}", path.display()))?;
            Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
                .await
                .with_context(|| format!("loading kubeconfig {}", path.display()))?
        }
        None => match &options.master {
            Some(master) => Config::new(
                master
                    .parse()
                    .with_context(|| format!("parsing --master {master:?}"))?,
            ),
            None => Config::infer()
                .await
                .context("finding a cluster configuration")?,
        },
    };
    if let (Some(master), Some(_)) = (&options.master, &options.kubeconfig) {
        config.cluster_url = master
            .parse()
            .with_context(|| format!("parsing --master {master:?}"))?;
    }
    // kube's client retries a 429, 503 or 504 by itself, out of sight of
    // the layers that handle them: the pause a `Retry-After` asks of the
    // whole client, the request counts by code, the write door's limit and
    // the sync's backoff. The controllers' and the reviews' clients leave
    // those answers to them; the Lease's, which no layer of ours paces,
    // keeps kube's retries.
    let builder = |kube_retries: bool| {
        let mut config = config.clone();
        config.default_retry = kube_retries;
        ClientBuilder::try_from(config).context("building the API client")
    };
    Ok(Clients::build(
        builder(false)?,
        builder(true)?,
        builder(false)?,
        options.client_options(),
    ))
}

/// Resolves on SIGTERM or SIGINT.
async fn shutdown_signal() {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut terminate) => {
                tokio::select! {
                    _ = interrupt => {}
                    _ = terminate.recv() => {}
                }
            }
            Err(error) => {
                tracing::warn!(%error, "cannot listen for SIGTERM, only SIGINT stops the controller");
                let _ = interrupt.await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = interrupt.await;
    }
}
