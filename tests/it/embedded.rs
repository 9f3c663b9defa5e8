//! Embedded mode on the demo cluster of the README, in paused time: the
//! run settles by itself and its final table shows what the controller did.

use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use pv_controller::AppConfig;
use pv_controller::ClientOptions;
use pv_controller::EmbeddedConfig;
use pv_controller::Options;
use pv_controller::pv;
use pv_controller::pv::Settings;
use pv_controller::pv::VolumePlugins;
use pv_controller::run_embedded as run;

/// The table row that starts with `name`, split into cells.
fn cells<'a>(table: &'a str, name: &str) -> Vec<&'a str> {
    table
        .lines()
        .find(|line| line.split_whitespace().any(|cell| cell == name))
        .unwrap_or_else(|| panic!("no row for {name} in\n{table}"))
        .split_whitespace()
        .collect()
}

#[tokio::test(start_paused = true)]
async fn demo_settles_and_shows_each_case() {
    // The plugins the binary gets with its default flags.
    let options = Options::parse_from(["pv-controller"]);
    let plugins = pv_controller::plugin_config(&options).unwrap();
    let config = EmbeddedConfig {
        file: PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/demo.yaml"),
        exit_when_settled: true,
        quiet_period: Duration::from_secs(3),
        app: AppConfig {
            persistentvolume: pv::Config {
                resync_period: Duration::from_secs(1),
                settings: Settings {
                    plugins: VolumePlugins::from_config(&plugins),
                    ..Settings::default()
                },
                ..pv::Config::default()
            },
            ..AppConfig::default()
        },
        client: options.client_options(),
    };
    let table = run(config, std::future::pending()).await.unwrap();
    assert_eq!(
        cells(&table, "pv-static"),
        [
            "pv-static",
            "10Gi",
            "Retain",
            "Bound",
            "demo/data",
            "manual"
        ]
    );
    assert_eq!(
        cells(&table, "data"),
        ["demo", "data", "Bound", "pv-static", "10Gi", "manual"]
    );
    assert_eq!(
        cells(&table, "scratch"),
        ["demo", "scratch", "Pending", "external"]
    );
    assert_eq!(cells(&table, "pv-retain")[3], "Released");
    assert!(
        cells(&table, "ExternalProvisioning").contains(&"persistentvolumeclaim/scratch"),
        "{table}"
    );
    assert!(
        !table.lines().any(|l| l.starts_with("pv-delete")),
        "pv-delete is deleted by the hostPath deleter:\n{table}"
    );
    assert_eq!(
        cells(&table, "pv-recycle")[2..4],
        ["Recycle", "Available"],
        "{table}"
    );
    assert!(
        cells(&table, "VolumeRecycled").contains(&"persistentvolume/pv-recycle"),
        "{table}"
    );
    // The ephemeral volume controller made the pod's claim; the binder bound it.
    assert_eq!(
        cells(&table, "web-cache"),
        [
            "demo",
            "web-cache",
            "Bound",
            "pv-ephemeral",
            "3Gi",
            "manual"
        ],
        "{table}"
    );
    assert_eq!(
        cells(&table, "pv-ephemeral")[3..5],
        ["Bound", "demo/web-cache"]
    );
    // The ResourceClaim controller generated the pod's claim from its
    // template: trainer-gpu-<five random characters>.
    let claim = table
        .lines()
        .find(|line| {
            line.split_whitespace()
                .nth(1)
                .is_some_and(|name| name.starts_with("trainer-gpu-"))
        })
        .unwrap_or_else(|| panic!("no claim for trainer in\n{table}"));
    let cells: Vec<&str> = claim.split_whitespace().collect();
    assert_eq!(cells[1].len(), "trainer-gpu-".len() + 5, "{table}");
    assert_eq!(cells[0], "demo");
    assert_eq!(cells[2..], ["pending", "pod/trainer", "gpu"], "{table}");
}

#[tokio::test]
async fn a_missing_file_is_an_error() {
    let config = EmbeddedConfig {
        file: PathBuf::from("/nonexistent/cluster.yaml"),
        exit_when_settled: true,
        quiet_period: Duration::from_secs(1),
        app: AppConfig::default(),
        client: ClientOptions::default(),
    };
    let error = run(config, std::future::pending()).await.unwrap_err();
    assert!(error.to_string().contains("/nonexistent/cluster.yaml"));
}

/// A plugin that claims the demo's external provisioner and panics when
/// asked whether it provisions: a bug on a claim worker's task.
struct Panicking;

impl pv_controller::pv::VolumePlugin for Panicking {
    fn name(&self) -> &str {
        "example.com/external"
    }

    fn can_provision(&self) -> bool {
        panic!("a bug in a plugin")
    }

    fn provision<'a>(
        &'a self,
        _request: &'a pv_controller::pv::ProvisionRequest,
    ) -> futures::future::BoxFuture<
        'a,
        Result<k8s_openapi::api::core::v1::PersistentVolume, pv_controller::pv::PluginError>,
    > {
        Box::pin(async { Err(pv_controller::pv::PluginError::Failed("never".to_string())) })
    }
}

/// A controller task that panics ends the embedded run with an error
/// naming it, as in a cluster: the demo does not go on without it.
#[tokio::test(start_paused = true)]
async fn a_controller_task_that_panics_ends_the_demo_with_an_error() {
    let config = EmbeddedConfig {
        file: PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/demo.yaml"),
        exit_when_settled: false,
        quiet_period: Duration::from_secs(3),
        app: AppConfig {
            persistentvolume: pv::Config {
                resync_period: Duration::from_secs(1),
                settings: Settings {
                    plugins: VolumePlugins::default().with(std::sync::Arc::new(Panicking)),
                    ..Settings::default()
                },
                ..pv::Config::default()
            },
            ..AppConfig::default()
        },
        client: ClientOptions::default(),
    };
    let error = tokio::time::timeout(
        Duration::from_secs(600),
        run(config, std::future::pending()),
    )
    .await
    .expect("the demo stops by itself")
    .unwrap_err();
    let text = error.to_string();
    assert!(text.contains("stopped unexpectedly"), "{text}");
    assert!(text.contains("panicked"), "{text}");
}

/// A resync period of zero is refused before anything starts, with the
/// setting named; nothing panics.
#[tokio::test(start_paused = true)]
async fn a_resync_period_of_zero_is_refused() {
    let config = EmbeddedConfig {
        file: PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/demo.yaml"),
        exit_when_settled: true,
        quiet_period: Duration::from_secs(3),
        app: AppConfig {
            persistentvolume: pv::Config {
                resync_period: Duration::ZERO,
                ..pv::Config::default()
            },
            ..AppConfig::default()
        },
        client: ClientOptions::default(),
    };
    let error = run(config, std::future::pending()).await.unwrap_err();
    let text = error.to_string();
    assert!(text.contains("resync_period"), "{text}");
    assert!(text.contains("more than zero"), "{text}");
}
