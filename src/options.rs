//! Command-line flags, named after kube-controller-manager's where it has
//! one, and the parsing of its duration syntax (`15s`, `1m30s`).
//!
//! Plain values with their defaults: the flags know the runtime's types
//! (serving, shadow mode, the client's limits) and nothing of the
//! controllers; the process turns them into the controllers' settings,
//! and a test of the process holds each default to the controller's own.

use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;

use crate::feature_gates::FeatureGates;
use crate::runtime::client::ClientOptions;
use crate::runtime::server::{
    DEFAULT_MAX_CONNECTIONS, DelegationConfig, SecureServing, ServingCertificate, ServingLimits,
};
use crate::shadow::ShadowConfig;

/// Flags of the `pv-controller` binary.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "pv-controller",
    args_conflicts_with_subcommands = true,
    version,
    about = "Kubernetes PersistentVolume controller"
)]
pub struct Options {
    /// A one-off command instead of running the controller.
    #[command(subcommand)]
    pub command: Option<Command>,

    /// Path to a kubeconfig file; without it KUBECONFIG, then the in-cluster
    /// configuration, then ~/.kube/config are tried.
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,

    /// Address of the API server; overrides the one in the kubeconfig.
    #[arg(long)]
    pub master: Option<String>,

    /// Controllers to run, in kube-controller-manager's syntax: `*` runs
    /// every controller, `name` enables one and `-name` disables one
    /// (names: persistentvolume-binder-controller, ephemeral-volume-controller,
    /// resourceclaim-controller; aliases: persistentvolume-binder,
    /// ephemeral-volume, resource-claim-controller).
    #[arg(long, value_delimiter = ',', default_value = "*")]
    pub controllers: Vec<String>,

    /// Queries per second allowed towards the API server; 0 (the default)
    /// sets no client-side limit and leaves it to the server's API Priority
    /// and Fairness (a 429 pauses the client for its Retry-After).
    #[arg(long = "kube-api-qps", default_value_t = 0.0)]
    pub kube_api_qps: f64,

    /// Requests allowed in a burst above the steady rate (with a
    /// `--kube-api-qps` only).
    #[arg(long = "kube-api-burst", default_value_t = 30)]
    pub kube_api_burst: u32,

    /// How long one API request (other than a watch) may take before it
    /// fails and its sync is retried.
    #[arg(long = "kube-api-timeout", default_value = "60s", value_parser = parse_duration)]
    pub kube_api_timeout: Duration,

    /// How long a watch may fail without one success before the controller
    /// stops with an error (and /livez fails), so it is restarted.
    #[arg(long = "watch-failure-limit", default_value = "3m", value_parser = parse_duration)]
    pub watch_failure_limit: Duration,

    /// How often discovery is asked whether an API an enabled controller
    /// needs (resource.k8s.io/v1 for the ResourceClaim controller) appeared
    /// or went; a change starts or stops that controller.
    #[arg(long = "api-discovery-period", default_value = "1m", value_parser = parse_duration)]
    pub api_discovery_period: Duration,

    /// How many threads run the process's work. One is enough for the
    /// three controllers of a large cluster, and on a control-plane node,
    /// whose cores the API server and etcd share, a second costs more CPU
    /// in wake-ups between the threads than it brings (docs/performance-notes.md).
    #[arg(long = "runtime-threads", default_value_t = 1, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    pub runtime_threads: usize,

    /// How many long operations (provision, delete, recycle) run at once;
    /// more wait their turn.
    #[arg(long = "max-concurrent-operations", default_value_t = crate::runtime::operations::DEFAULT_CONCURRENCY)]
    pub max_concurrent_operations: usize,

    /// How many claims' plans execute at once (claims are decided one at
    /// a time, in queue order).
    #[arg(long = "concurrent-claim-syncs", default_value_t = DEFAULT_CLAIM_SYNCS, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    pub concurrent_claim_syncs: usize,

    /// How many volumes are synced at once.
    #[arg(long = "concurrent-volume-syncs", default_value_t = DEFAULT_VOLUME_SYNCS, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    pub concurrent_volume_syncs: usize,

    /// How many pods the ephemeral volume controller syncs at once
    /// (kube-controller-manager's flag and default).
    #[arg(long = "concurrent-ephemeralvolume-syncs", default_value_t = DEFAULT_EPHEMERALVOLUME_SYNCS, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    pub concurrent_ephemeralvolume_syncs: usize,

    /// Feature gates, as kube-controller-manager takes them
    /// (`DRAAdminAccess=false,...`); only the gates the controllers consult
    /// are known: DRAAdminAccess, DRAPrioritizedList (both on),
    /// DRAExtendedResource (off), DynamicResourceAllocation (locked on).
    #[arg(long = "feature-gates", default_value = "")]
    pub feature_gates: FeatureGates,

    /// How many pods and claims the ResourceClaim controller syncs at once
    /// (kube-controller-manager's flag from 1.36; 1.34 and 1.35 run a fixed
    /// 50).
    #[arg(long = "concurrent-resourceclaim-syncs", default_value_t = DEFAULT_RESOURCECLAIM_SYNCS, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    pub concurrent_resourceclaim_syncs: usize,

    /// How often every volume and claim is synced again (default 15s; 1s
    /// with --embedded-cluster, so the demo settles in seconds).
    #[arg(long = "pvclaimbinder-sync-period", value_parser = parse_duration)]
    pub sync_period: Option<Duration>,

    /// Hand claims with a storage class to provisioners.
    #[arg(long = "enable-dynamic-provisioning", default_value_t = true, action = clap::ArgAction::Set)]
    pub enable_dynamic_provisioning: bool,

    /// Let the hostPath plugin provision volumes for classes naming
    /// `kubernetes.io/host-path` (single-node development clusters only).
    #[arg(long = "enable-hostpath-provisioner", default_value_t = false, action = clap::ArgAction::Set)]
    pub enable_hostpath_provisioner: bool,

    /// Directory under which the hostPath provisioner creates volumes (not a
    /// kube-controller-manager flag; upstream hard-codes /tmp/hostpath_pv).
    #[arg(long = "hostpath-provisioner-root", default_value = DEFAULT_HOST_PATH_ROOT)]
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
    /// Elect a leader among replicas on a Lease before writing (default
    /// true; false with --embedded-cluster unless given).
    #[arg(long = "leader-elect", num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set)]
    pub leader_elect: Option<bool>,

    /// How long followers wait after the leader's last renewal before
    /// taking over.
    #[arg(long = "leader-elect-lease-duration", default_value = "15s", value_parser = parse_duration)]
    pub leader_elect_lease_duration: Duration,

    /// How long the leader keeps trying to renew before it stops leading.
    #[arg(long = "leader-elect-renew-deadline", default_value = "10s", value_parser = parse_duration)]
    pub leader_elect_renew_deadline: Duration,

    /// Pause between attempts to acquire or renew the lease.
    #[arg(long = "leader-elect-retry-period", default_value = "2s", value_parser = parse_duration)]
    pub leader_elect_retry_period: Duration,

    /// Name of the Lease used for leader election.
    #[arg(long = "leader-elect-resource-name", default_value = "pv-controller")]
    pub leader_elect_resource_name: String,

    /// Namespace of the Lease used for leader election.
    #[arg(
        long = "leader-elect-resource-namespace",
        default_value = "kube-system"
    )]
    pub leader_elect_resource_namespace: String,

    /// IP address the secure port listens on; an unspecified one (`0.0.0.0`
    /// or `::`) listens on every interface of both IP families (IPv4 alone
    /// where the host has no IPv6), as kube-controller-manager's.
    #[arg(long = "bind-address", default_value = "0.0.0.0")]
    pub bind_address: std::net::IpAddr,

    /// Port of the secure admin server: /metrics, /livez, /readyz,
    /// /healthz, /explain and /shadow over HTTPS, authenticated and
    /// authorized by the API server (default 10281; 0 turns it off; a free
    /// loopback port with --embedded-cluster, with a token of its own).
    #[arg(long = "secure-port")]
    pub secure_port: Option<u16>,

    /// PEM file with the secure port's certificate (and its chain); read
    /// again when it changes. Without it and --tls-private-key-file, a
    /// self-signed certificate is made at start-up.
    #[arg(long = "tls-cert-file", requires = "tls_private_key_file")]
    pub tls_cert_file: Option<PathBuf>,

    /// PEM file with the key of --tls-cert-file.
    #[arg(long = "tls-private-key-file", requires = "tls_cert_file")]
    pub tls_private_key_file: Option<PathBuf>,

    /// Paths of the secure port served without authentication or
    /// authorization (a trailing `*` matches any rest).
    #[arg(
        long = "authorization-always-allow-paths",
        value_delimiter = ',',
        default_value = "/healthz,/readyz,/livez"
    )]
    pub authorization_always_allow_paths: Vec<String>,

    /// How long an answer of a TokenReview is kept.
    #[arg(long = "authentication-token-webhook-cache-ttl", default_value = "10s", value_parser = parse_duration)]
    pub authentication_token_webhook_cache_ttl: Duration,

    /// How long an allowing SubjectAccessReview is kept.
    #[arg(long = "authorization-webhook-cache-authorized-ttl", default_value = "10s", value_parser = parse_duration)]
    pub authorization_webhook_cache_authorized_ttl: Duration,

    /// How long a denying SubjectAccessReview is kept.
    #[arg(long = "authorization-webhook-cache-unauthorized-ttl", default_value = "10s", value_parser = parse_duration)]
    pub authorization_webhook_cache_unauthorized_ttl: Duration,

    /// How long a client of the secure port has to finish the TLS
    /// handshake.
    #[arg(long = "tls-handshake-timeout", default_value = "10s", value_parser = parse_duration)]
    pub tls_handshake_timeout: Duration,

    /// How long a client of the secure port has to send a request's
    /// headers, from when the server waits for them (after the handshake,
    /// and after each answer on a kept-alive connection, so an idle
    /// connection is closed after it too); kube-controller-manager's fixed
    /// ReadHeaderTimeout.
    #[arg(long = "read-header-timeout", default_value = "32s", value_parser = parse_duration)]
    pub read_header_timeout: Duration,

    /// How long one request to the secure port may take, its
    /// authentication and authorization included, before it is answered
    /// with a 504 (kube-apiserver's flag and default); and its whole
    /// exchange, the answer's writing included, before the connection is
    /// closed.
    #[arg(long = "request-timeout", default_value = "60s", value_parser = parse_duration)]
    pub request_timeout: Duration,

    /// How many connections each admin port serves at once, shared by
    /// source address: further ones are accepted and wait their turn, and
    /// one from an address holding few takes the place of the oldest of
    /// the address holding most.
    #[arg(long = "max-connections", default_value_t = DEFAULT_MAX_CONNECTIONS, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    pub max_connections: usize,

    /// INSECURE: also serve /metrics, /livez, /readyz and /healthz, and
    /// nothing else, over plain HTTP, without authentication, on this
    /// address (`:PORT` means every interface), within the secure port's
    /// connection limits. Off by default; with --embedded-cluster a free
    /// loopback port (`127.0.0.1:0`). /explain and /shadow are served on
    /// the secure port only.
    #[arg(long = "metrics-bind-address")]
    pub metrics_bind_address: Option<String>,

    /// Log line format.
    #[arg(long = "log-format", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,

    /// Log verbosity, klog-style: 0-2 info, 3-4 debug, 5 and above trace
    /// (RUST_LOG, when set, wins).
    #[arg(short = 'v', long = "v", default_value_t = 2)]
    pub verbosity: u8,

    /// Shadow mode: decide as usual beside the controllers that run the
    /// cluster, send no write and no event, take no lease, and judge each
    /// decision against what the cluster comes to (`/shadow`,
    /// `pv_controller_shadow_decisions_total`).
    #[arg(long = "shadow")]
    pub shadow: bool,

    /// With --shadow: how long the cluster has to come to a decision before
    /// it counts as a difference (default: two sync periods).
    #[arg(long = "shadow-window", value_parser = parse_duration, requires = "shadow")]
    pub shadow_window: Option<Duration>,

    /// Run against an in-memory API server seeded from this YAML file
    /// instead of a cluster, served on a loopback port for kubectl.
    #[arg(long = "embedded-cluster", value_name = "FILE")]
    pub embedded_cluster: Option<PathBuf>,

    /// With --embedded-cluster: exit once nothing changed for three sync
    /// periods, after printing the volumes and claims.
    #[arg(long = "exit-when-settled", requires = "embedded_cluster")]
    pub exit_when_settled: bool,
}

/// Default secure port: beside kube-controller-manager's 10257,
/// cloud-controller-manager's 10258 and the scheduler's 10259 without
/// taking any of the control plane's ports (10250-10260), so the process
/// can also run with the host's network on a control-plane node.
pub(crate) const DEFAULT_SECURE_PORT: u16 = 10281;

/// Default insecure address in embedded mode: a free loopback port.
pub(crate) const EMBEDDED_INSECURE_ADDRESS: &str = "127.0.0.1:0";

/// Default of `--concurrent-claim-syncs`: the PersistentVolume
/// controller's own default claim workers.
pub(crate) const DEFAULT_CLAIM_SYNCS: usize = 256;

/// Default of `--concurrent-volume-syncs`: the PersistentVolume
/// controller's own default volume workers.
pub(crate) const DEFAULT_VOLUME_SYNCS: usize = 4;

/// Default of `--concurrent-ephemeralvolume-syncs`: kube-controller-manager's.
pub(crate) const DEFAULT_EPHEMERALVOLUME_SYNCS: usize = 5;

/// Default of `--concurrent-resourceclaim-syncs`: kube-controller-manager's
/// since 1.34.
pub(crate) const DEFAULT_RESOURCECLAIM_SYNCS: usize = 50;

/// Default of `--hostpath-provisioner-root` (upstream hard-codes
/// `/tmp/hostpath_pv`).
pub(crate) const DEFAULT_HOST_PATH_ROOT: &str = "/tmp/hostpath_pv";

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line, for log collectors.
    Json,
}

/// The one-off commands.
#[derive(clap::Subcommand, Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// Why a claim is Pending: asks a running controller (its secure
    /// admin port) and prints the claim's requirements and each volume of
    /// its class with the first rule it fails.
    Explain {
        /// The claim, as NAMESPACE/CLAIM.
        claim: String,
        /// The running controller's secure admin port.
        #[arg(long = "admin-address", default_value = "https://127.0.0.1:10281")]
        admin_address: String,
        /// Bearer token for the admin port: one the API server
        /// authenticates, of a user granted `get` on `/explain/*`.
        #[arg(long, env = "PV_CONTROLLER_TOKEN", hide_env_values = true)]
        token: Option<String>,
        /// PEM file of the authority the admin port's certificate is
        /// checked against.
        #[arg(long = "certificate-authority")]
        certificate_authority: Option<PathBuf>,
        /// Accept the admin port's certificate unchecked (its self-signed
        /// one, when the flags name none).
        #[arg(long = "insecure-skip-tls-verify")]
        insecure_skip_tls_verify: bool,
        /// Read the cluster of this kubeconfig once and explain the claim
        /// here, instead of asking a running controller.
        #[arg(long, conflicts_with = "admin_address")]
        kubeconfig: Option<PathBuf>,
    },
}

impl Options {
    /// Whether the controller runs on an embedded in-memory cluster.
    fn embedded(&self) -> bool {
        self.embedded_cluster.is_some()
    }

    /// The resync period, with the mode's default.
    pub fn resync_period(&self) -> Duration {
        self.sync_period.unwrap_or(if self.embedded() {
            Duration::from_secs(1)
        } else {
            Duration::from_secs(15)
        })
    }

    /// Whether to elect a leader: as asked, else on in a cluster and off in
    /// embedded mode (a single process has no one to compete with).
    pub fn leader_elect(&self) -> bool {
        self.leader_elect.unwrap_or(!self.embedded())
    }

    /// Shadow mode's settings, when --shadow is given.
    pub fn shadow_config(&self) -> Option<ShadowConfig> {
        self.shadow.then(|| ShadowConfig {
            window: self
                .shadow_window
                .unwrap_or_else(|| self.resync_period() * 2),
        })
    }

    /// The insecure admin address, if any, with the mode's default.
    pub fn insecure_address(&self) -> Option<&str> {
        match &self.metrics_bind_address {
            Some(address) => Some(address),
            None if self.embedded() => Some(EMBEDDED_INSECURE_ADDRESS),
            None => None,
        }
    }

    /// The secure admin server of the flags, with the mode's default
    /// (none with --embedded-cluster unless --secure-port is given; none
    /// with port 0).
    pub fn secure_serving(&self) -> Option<SecureServing> {
        let port = self.secure_port.unwrap_or(if self.embedded() {
            0
        } else {
            DEFAULT_SECURE_PORT
        });
        if port == 0 {
            return None;
        }
        let certificate = match (&self.tls_cert_file, &self.tls_private_key_file) {
            (Some(cert), Some(key)) => ServingCertificate::Files {
                cert: cert.clone(),
                key: key.clone(),
            },
            _ => ServingCertificate::SelfSigned {
                names: (!self.bind_address.is_unspecified())
                    .then(|| self.bind_address.to_string())
                    .into_iter()
                    .collect(),
            },
        };
        Some(SecureServing {
            address: std::net::SocketAddr::new(self.bind_address, port),
            certificate,
            delegation: DelegationConfig {
                always_allow_paths: self.authorization_always_allow_paths.clone(),
                token_cache_ttl: self.authentication_token_webhook_cache_ttl,
                authorized_cache_ttl: self.authorization_webhook_cache_authorized_ttl,
                unauthorized_cache_ttl: self.authorization_webhook_cache_unauthorized_ttl,
            },
            limits: ServingLimits {
                tls_handshake_timeout: self.tls_handshake_timeout,
                read_header_timeout: self.read_header_timeout,
                request_timeout: self.request_timeout,
                max_connections: self.max_connections,
            },
        })
    }

    /// How the controller's API client is limited (the review client has
    /// upstream's fixed limits).
    pub fn client_options(&self) -> ClientOptions {
        ClientOptions {
            qps: self.kube_api_qps,
            burst: self.kube_api_burst,
            request_timeout: self.kube_api_timeout,
            ..ClientOptions::default()
        }
    }

    /// Whether text logs carry terminal colours: only when they go to a
    /// terminal (stderr), and never when `NO_COLOR` is set to anything, so a
    /// container's log, a pipe or a file gets plain text.
    pub fn log_colours(&self) -> bool {
        use std::io::IsTerminal;
        colours(
            std::io::stderr().is_terminal(),
            std::env::var_os("NO_COLOR").as_deref(),
        )
    }

    /// The tracing level `-v` asks for.
    pub fn log_level(&self) -> tracing::Level {
        match self.verbosity {
            0..=2 => tracing::Level::INFO,
            3..=4 => tracing::Level::DEBUG,
            _ => tracing::Level::TRACE,
        }
    }
}

/// Whether to colour logs written to a terminal or not (`terminal`), with
/// `NO_COLOR` as given: colours only on a terminal, and never when
/// `NO_COLOR` is set to a non-empty value (no-color.org).
fn colours(terminal: bool, no_color: Option<&std::ffi::OsStr>) -> bool {
    terminal && no_color.is_none_or(std::ffi::OsStr::is_empty)
}

/// Why a duration flag was refused.
#[derive(Debug, thiserror::Error)]
#[error("invalid duration {input:?}: {reason} (expected e.g. 15s, 1m30s, 500ms)")]
pub(crate) struct DurationError {
    input: String,
    reason: &'static str,
}

/// Parses a duration in Go's syntax: a sequence of decimal numbers with units
/// `ns`, `us`, `µs`, `ms`, `s`, `m`, `h` (for example `1h2m3.5s`); a bare `0`
/// is zero. Longer than Go takes (about 292 years) is out of range.
pub(crate) fn parse_duration(input: &str) -> Result<Duration, DurationError> {
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
    // Go's limit (an int64 of nanoseconds, about 292 years): a flag past it
    // is refused, so no deadline made from a flag overflows the clock.
    if total > MAX_DURATION_SECONDS {
        return Err(fail("out of range"));
    }
    Duration::try_from_secs_f64(total).map_err(|_| fail("out of range"))
}

/// The longest duration a flag takes: Go's `time.Duration` limit, in
/// seconds.
const MAX_DURATION_SECONDS: f64 = 9_223_372_036.854_775;

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
        assert_eq!(
            parse_duration("2562047h").unwrap(),
            Duration::from_secs(2_562_047 * 3600),
            "the longest Go takes, about 292 years"
        );
    }

    #[test]
    fn refuses_bad_durations() {
        for bad in [
            "",
            "15",
            "s",
            "1x",
            "1m30",
            "-1s",
            "2562048h",
            "9999999999999999h",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad:?} should be refused");
        }
    }

    #[test]
    fn logs_are_coloured_only_on_a_terminal_without_no_color() {
        use std::ffi::OsStr;
        assert!(colours(true, None));
        assert!(!colours(false, None), "a pipe or a file");
        assert!(!colours(true, Some(OsStr::new("1"))), "NO_COLOR set");
        assert!(colours(true, Some(OsStr::new(""))), "NO_COLOR empty");
    }

    #[test]
    fn flags_have_upstream_defaults() {
        let options = Options::parse_from(["pv-controller"]);
        assert_eq!(options.resync_period(), Duration::from_secs(15));
        assert!(options.leader_elect());
        assert_eq!(options.leader_elect_lease_duration, Duration::from_secs(15));
        assert_eq!(options.leader_elect_renew_deadline, Duration::from_secs(10));
        assert_eq!(options.leader_elect_retry_period, Duration::from_secs(2));
        assert_eq!(options.leader_elect_resource_namespace, "kube-system");
        assert_eq!(
            options.insecure_address(),
            None,
            "no plain HTTP in a cluster"
        );
        let secure = options.secure_serving().expect("secure by default");
        assert_eq!(secure.address, "0.0.0.0:10281".parse().unwrap());
        assert!(matches!(
            secure.certificate,
            ServingCertificate::SelfSigned { .. }
        ));
        assert_eq!(secure.delegation, DelegationConfig::default());
        assert_eq!(secure.limits, ServingLimits::default());
        assert_eq!(secure.limits.read_header_timeout, Duration::from_secs(32));
        assert_eq!(secure.limits.request_timeout, Duration::from_secs(60));
        assert_eq!(secure.limits.tls_handshake_timeout, Duration::from_secs(10));
        assert_eq!(secure.limits.max_connections, 512);
        assert_eq!(options.log_level(), tracing::Level::INFO);
        assert_eq!(options.kube_api_qps, 0.0, "no client-side limit");
        assert_eq!(options.kube_api_burst, 30);
        assert_eq!(options.kube_api_timeout, Duration::from_secs(60));
        assert_eq!(options.watch_failure_limit, Duration::from_secs(180));
        assert_eq!(options.api_discovery_period, Duration::from_secs(60));
        assert_eq!(options.max_concurrent_operations, 32);
        assert_eq!(options.concurrent_claim_syncs, 256);
        assert_eq!(options.concurrent_volume_syncs, 4);
        assert_eq!(options.concurrent_ephemeralvolume_syncs, 5);
        assert_eq!(options.concurrent_resourceclaim_syncs, 50);
        assert_eq!(options.feature_gates, FeatureGates::default());
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
        assert_eq!(options.resync_period(), Duration::from_secs(90));
        assert!(!options.enable_dynamic_provisioning);
    }

    #[test]
    fn embedded_mode_changes_defaults_unless_asked() {
        let options = Options::parse_from(["pv-controller", "--embedded-cluster", "demo.yaml"]);
        assert!(!options.leader_elect());
        assert_eq!(options.resync_period(), Duration::from_secs(1));
        assert_eq!(options.insecure_address(), Some(EMBEDDED_INSECURE_ADDRESS));
        assert_eq!(
            options.secure_serving(),
            None,
            "embedded: no secure port unless asked"
        );
        let options = Options::parse_from([
            "pv-controller",
            "--embedded-cluster=demo.yaml",
            "--leader-elect",
            "--pvclaimbinder-sync-period=5s",
        ]);
        assert!(options.leader_elect());
        assert_eq!(options.resync_period(), Duration::from_secs(5));
        let options = Options::parse_from(["pv-controller", "--leader-elect=false", "-v", "4"]);
        assert!(!options.leader_elect());
        assert_eq!(options.log_level(), tracing::Level::DEBUG);
        assert!(Options::try_parse_from(["pv-controller", "--exit-when-settled"]).is_err());
    }
}
