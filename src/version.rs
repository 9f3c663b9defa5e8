//! What this build is: its version and source revision, printed by
//! `--version`, logged at start and exported as `pv_controller_build_info`;
//! and the process's own series (`process_*`: CPU, memory, open files,
//! start time), as every Kubernetes component exports them.

use std::sync::LazyLock;

use prometheus::core::Collector;
use prometheus::{IntGaugeVec, Opts};

/// The version of the build: the workspace's version.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The source revision the build was made from, as the image build hands
/// it in (`PV_CONTROLLER_REVISION`, deploy/build-image.sh passes the git
/// commit); `unknown` for a build without it.
pub const REVISION: &str = match option_env!("PV_CONTROLLER_REVISION") {
    Some(revision) => revision,
    None => "unknown",
};

/// `--version`'s line: `0.1.0 (revision 1a2b3c4d5e6f)`.
pub(crate) fn line() -> &'static str {
    static LINE: LazyLock<String> = LazyLock::new(|| format!("{VERSION} (revision {REVISION})"));
    &LINE
}

/// `pv_controller_build_info{version, revision}`, always 1: a dashboard
/// or an alert joins on it to tell which build a replica runs.
pub(crate) fn build_info() -> Result<IntGaugeVec, prometheus::Error> {
    let gauge = IntGaugeVec::new(
        Opts::new(
            "pv_controller_build_info",
            "1, labelled with the version and the source revision of the running build",
        ),
        &["version", "revision"],
    )?;
    gauge.with_label_values(&[VERSION, REVISION]).set(1);
    Ok(gauge)
}

/// The process's `process_*` series (Linux only: read from /proc).
pub(crate) fn process_collector() -> Option<Box<dyn Collector>> {
    #[cfg(target_os = "linux")]
    {
        Some(Box::new(
            prometheus::process_collector::ProcessCollector::for_self(),
        ))
    }
    #[cfg(not(target_os = "linux"))]
    {
        None
    }
}
