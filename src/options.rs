//! Command-line flags, named after kube-controller-manager's where it has
//! one, and the parsing of its duration syntax (`15s`, `1m30s`).

use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;

/// Flags of the `pv-controller` binary.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "pv-controller",
    version,
    about = "Kubernetes PersistentVolume controller"
)]
pub struct Options {
    /// Path to a kubeconfig file; without it KUBECONFIG, then the in-cluster
    /// configuration, then ~/.kube/config are tried.
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,

    /// Queries per second allowed towards the API server.
    #[arg(long = "kube-api-qps", default_value_t = 20.0)]
    pub kube_api_qps: f64,

    /// Requests allowed in a burst above the steady rate.
    #[arg(long = "kube-api-burst", default_value_t = 30)]
    pub kube_api_burst: u32,

    /// How often every volume and claim is synced again.
    #[arg(long = "pvclaimbinder-sync-period", default_value = "15s", value_parser = parse_duration)]
    pub sync_period: Duration,

    /// Hand claims with a storage class to provisioners.
    #[arg(long = "enable-dynamic-provisioning", default_value_t = true, action = clap::ArgAction::Set)]
    pub enable_dynamic_provisioning: bool,

    /// Let the hostPath plugin provision volumes for classes naming
    /// `kubernetes.io/host-path` (single-node development clusters only).
    #[arg(long = "enable-hostpath-provisioner", default_value_t = false, action = clap::ArgAction::Set)]
    pub enable_hostpath_provisioner: bool,

    /// Directory under which the hostPath provisioner creates volumes (not a
    /// kube-controller-manager flag; upstream hard-codes /tmp/hostpath_pv).
    #[arg(long = "hostpath-provisioner-root", default_value = crate::reclaim::DEFAULT_HOST_PATH_ROOT)]
    pub hostpath_provisioner_root: PathBuf,

    /// Pod template (YAML or JSON) of the hostPath recycler; its first volume
    /// is replaced by the volume to scrub.
    #[arg(long = "pv-recycler-pod-template-filepath-hostpath")]
    pub pv_recycler_pod_template_filepath_hostpath: Option<PathBuf>,

    /// Shortest deadline, in seconds, of a hostPath recycler pod.
    #[arg(long = "pv-recycler-minimum-timeout-hostpath", default_value_t = 60)]
    pub pv_recycler_minimum_timeout_hostpath: u64,

    /// Seconds of deadline per GiB of a hostPath volume being recycled.
    #[arg(long = "pv-recycler-timeout-increment-hostpath", default_value_t = 30)]
    pub pv_recycler_timeout_increment_hostpath: u64,

    /// Pod template (YAML or JSON) of the NFS recycler; its first volume is
    /// replaced by the volume to scrub.
    #[arg(long = "pv-recycler-pod-template-filepath-nfs")]
    pub pv_recycler_pod_template_filepath_nfs: Option<PathBuf>,

    /// Shortest deadline, in seconds, of an NFS recycler pod.
    #[arg(long = "pv-recycler-minimum-timeout-nfs", default_value_t = 300)]
    pub pv_recycler_minimum_timeout_nfs: u64,

    /// Seconds of deadline per GiB of an NFS volume being recycled.
    #[arg(long = "pv-recycler-increment-timeout-nfs", default_value_t = 30)]
    pub pv_recycler_increment_timeout_nfs: u64,
}

/// Why a duration flag was refused.
#[derive(Debug, thiserror::Error)]
#[error("invalid duration {input:?}: {reason} (expected e.g. 15s, 1m30s, 500ms)")]
pub struct DurationError {
    input: String,
    reason: &'static str,
}

/// Parses a duration in Go's syntax: a sequence of decimal numbers with units
/// `ns`, `us`, `µs`, `ms`, `s`, `m`, `h` (for example `1h2m3.5s`); a bare `0`
/// is zero.
pub fn parse_duration(input: &str) -> Result<Duration, DurationError> {
    let fail = |reason| DurationError {
        input: input.to_string(),
        reason,
    };
    let text = input.trim();
    if text == "0" {
        return Ok(Duration::ZERO);
    }
    if text.is_empty() {
        return Err(fail("empty"));
    }
    let mut total = 0f64;
    let mut rest = text;
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if number_len == 0 {
            return Err(fail("missing number"));
        }
        let value: f64 = rest[..number_len].parse().map_err(|_| fail("bad number"))?;
        rest = &rest[number_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let seconds_per_unit = match &rest[..unit_len] {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            "" => return Err(fail("missing unit")),
            _ => return Err(fail("unknown unit")),
        };
        total += value * seconds_per_unit;
        rest = &rest[unit_len..];
    }
    Duration::try_from_secs_f64(total).map_err(|_| fail("out of range"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_go_durations() {
        assert_eq!(parse_duration("15s").unwrap(), Duration::from_secs(15));
        assert_eq!(parse_duration("1m30s").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("1h").unwrap(), Duration::from_secs(3600));
        assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration("0").unwrap(), Duration::ZERO);
    }

    #[test]
    fn refuses_bad_durations() {
        for bad in ["", "15", "s", "1x", "1m30", "-1s"] {
            assert!(parse_duration(bad).is_err(), "{bad:?} should be refused");
        }
    }

    #[test]
    fn flags_have_upstream_defaults() {
        let options = Options::parse_from(["pv-controller"]);
        assert_eq!(options.sync_period, Duration::from_secs(15));
        assert_eq!(options.kube_api_qps, 20.0);
        assert_eq!(options.kube_api_burst, 30);
        assert!(options.enable_dynamic_provisioning);
        assert!(!options.enable_hostpath_provisioner);
        assert_eq!(options.pv_recycler_minimum_timeout_hostpath, 60);
        assert_eq!(options.pv_recycler_timeout_increment_hostpath, 30);
        assert_eq!(options.pv_recycler_minimum_timeout_nfs, 300);
        assert_eq!(options.pv_recycler_increment_timeout_nfs, 30);
        assert!(options.pv_recycler_pod_template_filepath_nfs.is_none());
        let options = Options::parse_from([
            "pv-controller",
            "--pvclaimbinder-sync-period=1m30s",
            "--enable-dynamic-provisioning=false",
        ]);
        assert_eq!(options.sync_period, Duration::from_secs(90));
        assert!(!options.enable_dynamic_provisioning);
    }
}
