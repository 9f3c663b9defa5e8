//! The `pv-controller` binary: parses flags, connects to the cluster and
//! runs the controller until SIGTERM or SIGINT.

use anyhow::Context as _;
use clap::Parser;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config, client::ClientBuilder};
use pv_controller::controller::Settings;
use pv_controller::controller_base::{BaseConfig, ControllerBase};
use pv_controller::options::Options;
use pv_controller::ratelimit::RateLimitLayer;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    let options = Options::parse();
    let client = connect(&options).await?;
    let config = BaseConfig {
        resync_period: options.sync_period,
        settings: Settings {
            enable_dynamic_provisioning: options.enable_dynamic_provisioning,
        },
        instance: std::env::var("POD_NAME")
            .unwrap_or_else(|_| pv_controller::constants::CONTROLLER_NAME.to_string()),
    };
    ControllerBase::new(client, config)?
        .run(shutdown_signal())
        .await
        .context("running the controller")?;
    Ok(())
}

/// A client for the cluster named by the flags, limited to the flags' rate.
async fn connect(options: &Options) -> anyhow::Result<Client> {
    let config = match &options.kubeconfig {
        Some(path) => {
            let kubeconfig = Kubeconfig::read_from(path)
                .with_context(|| format!("reading kubeconfig {}", path.display()))?;
            Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
                .await
                .with_context(|| format!("loading kubeconfig {}", path.display()))?
        }
        None => Config::infer()
            .await
            .context("finding a cluster configuration")?,
    };
    let limit = RateLimitLayer::new(options.kube_api_qps, options.kube_api_burst);
    Ok(ClientBuilder::try_from(config)
        .context("building the API client")?
        .with_layer(&limit)
        .build())
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
