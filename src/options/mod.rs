//! Command-line flags, spelled as kube-controller-manager's where it has
//! one, grouped in `--help` as it groups its flag sets, and refused when
//! parsed if their value cannot work (a period or timeout of 0, a count of
//! 0), with a message naming the flag and what it accepts.
//!
//! Plain values with their defaults: the flags know the runtime's types
//! (serving, the dry run, the client's limits) and nothing of the
//! controllers; the process turns them into the controllers' settings,
//! and a test of the process holds each default to the controller's own.

mod explain;
mod values;

use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use component_base::duration;
use component_base::flags::go_bool;
pub use component_base::logs::LoggingFormat;

use crate::feature_gates::FeatureGates;
use crate::runtime::client::ClientOptions;
use crate::runtime::server::{
    DEFAULT_MAX_CONNECTIONS, DelegationConfig, SecureServing, ServingCertificate, ServingLimits,
};
use crate::shadow::ShadowConfig;
pub use explain::ExplainArgs;
use values::{at_least_one, non_negative_rate, not_empty};

/// The `--help` sections, in kube-controller-manager's order and words.
mod section {
    pub(super) const GENERIC: &str = "Generic flags";
    pub(super) const BINDER: &str = "Persistentvolume-binder controller flags";
    pub(super) const EPHEMERAL: &str = "Ephemeral-volume controller flags";
    pub(super) const RESOURCECLAIM: &str = "Resourceclaim controller flags";
    pub(super) const SECURE: &str = "Secure serving flags";
    pub(super) const INSECURE: &str = "Insecure serving flags";
    pub(super) const AUTHENTICATION: &str = "Authentication flags";
    pub(super) const AUTHORIZATION: &str = "Authorization flags";
    pub(super) const SHADOW: &str = "Shadow mode flags";
    pub(super) const EMBEDDED: &str = "Embedded cluster flags";
    pub(super) const MISC: &str = "Misc flags";
    pub(super) const LOGS: &str = "Logs flags";
    pub(super) const GLOBAL: &str = "Global flags";
}

/// Flags of the `pv-controller` binary.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "pv-controller",
    args_conflicts_with_subcommands = true,
    version = crate::version::line(),
    disable_help_flag = true,
    disable_version_flag = true,
    max_term_width = 100,
    about = "The Kubernetes PersistentVolume controller (persistentvolume-binder), with the \
             ephemeral-volume and resourceclaim controllers, in place of kube-controller-manager's.",
    after_help = "Boolean flags take no value or `=true`/`=false`, as Go's. \
                  Durations are Go's: 15s, 1m30s, 500ms. docs/configuration.md has every flag."
)]
pub struct Options {
    /// A one-off command instead of running the controllers.
    #[command(subcommand)]
    pub command: Option<Command>,

    /// Controllers to run: `*` all, `name` one more, `-name` one fewer (names:
    /// persistentvolume-binder-controller, ephemeral-volume-controller,
    /// resourceclaim-controller; kube-controller-manager's older names too).
    #[arg(long, value_delimiter = ',', default_value = "*", value_name = "strings",
          help_heading = section::GENERIC)]
    pub controllers: Vec<String>,

    /// Feature gates as key=value pairs: DRAAdminAccess, DRAPrioritizedList (both
    /// on), DRAExtendedResource (off), DynamicResourceAllocation (locked on).
    #[arg(long = "feature-gates", default_value = "", value_name = "key=bool,...",
          help_heading = section::GENERIC)]
    pub feature_gates: FeatureGates,

    /// Queries a second to the API server; 0 sets no client-side limit and
    /// leaves it to API Priority and Fairness.
    #[arg(long = "kube-api-qps", default_value_t = 0.0, value_parser = non_negative_rate,
          value_name = "float", help_heading = section::GENERIC)]
    pub kube_api_qps: f64,

    /// Requests allowed in a burst above --kube-api-qps.
    #[arg(long = "kube-api-burst", default_value_t = 30, value_parser = at_least_one::<u32>,
          value_name = "int", help_heading = section::GENERIC)]
    pub kube_api_burst: u32,

    /// How long one API request (a watch aside) may take before it fails and
    /// its sync is retried.
    #[arg(long = "kube-api-timeout", default_value = "60s", value_parser = duration::positive,
          value_name = "duration", help_heading = section::GENERIC)]
    pub kube_api_timeout: Duration,

    /// How long a watch may fail without one success before the process stops
    /// with an error (and /livez fails), so it is restarted.
    #[arg(long = "watch-failure-limit", default_value = "3m", value_parser = duration::positive,
          value_name = "duration", help_heading = section::GENERIC)]
    pub watch_failure_limit: Duration,

    /// How often discovery is asked whether an API a controller needs
    /// (resource.k8s.io/v1) appeared or went.
    #[arg(long = "api-discovery-period", default_value = "1m", value_parser = duration::positive,
          value_name = "duration", help_heading = section::GENERIC)]
    pub api_discovery_period: Duration,

    /// Threads that run the process's work (one is enough for a large cluster).
    #[arg(long = "runtime-threads", default_value_t = 1, value_parser = at_least_one::<usize>,
          value_name = "int", help_heading = section::GENERIC)]
    pub runtime_threads: usize,

    /// Elect a leader among replicas on a Lease before writing (default true;
    /// false with --embedded-cluster).
    #[arg(long = "leader-elect", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = go_bool, value_name = "bool",
          help_heading = section::GENERIC)]
    pub leader_elect: Option<bool>,

    /// How long followers wait after the leader's last renewal before taking
    /// over.
    #[arg(long = "leader-elect-lease-duration", default_value = "15s",
          value_parser = duration::positive, value_name = "duration",
          help_heading = section::GENERIC)]
    pub leader_elect_lease_duration: Duration,

    /// How long the leader tries to renew before it stops leading.
    #[arg(long = "leader-elect-renew-deadline", default_value = "10s",
          value_parser = duration::positive, value_name = "duration",
          help_heading = section::GENERIC)]
    pub leader_elect_renew_deadline: Duration,

    /// Pause between attempts to acquire or renew the Lease.
    #[arg(long = "leader-elect-retry-period", default_value = "2s",
          value_parser = duration::positive, value_name = "duration",
          help_heading = section::GENERIC)]
    pub leader_elect_retry_period: Duration,

    /// Name of the Lease.
    #[arg(long = "leader-elect-resource-name", default_value = "pv-controller",
          value_parser = not_empty, value_name = "string", help_heading = section::GENERIC)]
    pub leader_elect_resource_name: String,

    /// Namespace of the Lease.
    #[arg(long = "leader-elect-resource-namespace", default_value = "kube-system",
          value_parser = not_empty, value_name = "string", help_heading = section::GENERIC)]
    pub leader_elect_resource_namespace: String,

    /// How often every volume and claim is synced again (default 15s; 1s with
    /// --embedded-cluster).
    #[arg(long = "pvclaimbinder-sync-period", value_parser = duration::positive,
          value_name = "duration", help_heading = section::BINDER)]
    pub sync_period: Option<Duration>,

    /// Hand claims with a storage class to provisioners.
    #[arg(long = "enable-dynamic-provisioning", num_args = 0..=1, require_equals = true,
          default_value = "true", default_missing_value = "true", value_parser = go_bool,
          value_name = "bool", help_heading = section::BINDER)]
    pub enable_dynamic_provisioning: bool,

    /// Provision hostPath volumes for classes of kubernetes.io/host-path
    /// (single-node development clusters only).
    #[arg(long = "enable-hostpath-provisioner", num_args = 0..=1, require_equals = true,
          default_value = "false", default_missing_value = "true", value_parser = go_bool,
          value_name = "bool", help_heading = section::BINDER)]
    pub enable_hostpath_provisioner: bool,

    /// Directory the hostPath provisioner creates volumes under.
    #[arg(long = "hostpath-provisioner-root", default_value = DEFAULT_HOST_PATH_ROOT,
          value_name = "dir", help_heading = section::BINDER)]
    pub hostpath_provisioner_root: PathBuf,

    /// Pod template (YAML or JSON) of the hostPath recycler; its first volume is
    /// replaced by the volume to scrub.
    #[arg(long = "pv-recycler-pod-template-filepath-hostpath", value_name = "file",
          help_heading = section::BINDER)]
    pub pv_recycler_pod_template_filepath_hostpath: Option<PathBuf>,

    /// Shortest deadline of a hostPath recycler pod, in seconds.
    #[arg(long = "pv-recycler-minimum-timeout-hostpath", default_value_t = 60,
          value_parser = at_least_one::<u64>, value_name = "int", help_heading = section::BINDER)]
    pub pv_recycler_minimum_timeout_hostpath: u64,

    /// Seconds of deadline per GiB of a hostPath volume being recycled.
    #[arg(long = "pv-recycler-timeout-increment-hostpath", default_value_t = 30,
          value_name = "int", help_heading = section::BINDER)]
    pub pv_recycler_timeout_increment_hostpath: u64,

    /// Pod template (YAML or JSON) of the NFS recycler; its first volume is
    /// replaced by the volume to scrub.
    #[arg(long = "pv-recycler-pod-template-filepath-nfs", value_name = "file",
          help_heading = section::BINDER)]
    pub pv_recycler_pod_template_filepath_nfs: Option<PathBuf>,

    /// Shortest deadline of an NFS recycler pod, in seconds.
    #[arg(long = "pv-recycler-minimum-timeout-nfs", default_value_t = 300,
          value_parser = at_least_one::<u64>, value_name = "int", help_heading = section::BINDER)]
    pub pv_recycler_minimum_timeout_nfs: u64,

    /// Seconds of deadline per GiB of an NFS volume being recycled.
    #[arg(long = "pv-recycler-increment-timeout-nfs", default_value_t = 30,
          value_name = "int", help_heading = section::BINDER)]
    pub pv_recycler_increment_timeout_nfs: u64,

    /// Long operations (provision, delete, recycle) at once; more wait.
    #[arg(long = "max-concurrent-operations",
          default_value_t = crate::runtime::operations::DEFAULT_CONCURRENCY,
          value_parser = at_least_one::<usize>, value_name = "int",
          help_heading = section::BINDER)]
    pub max_concurrent_operations: usize,

    /// Claims whose plans execute at once (claims are decided one at a time).
    #[arg(long = "concurrent-claim-syncs", default_value_t = DEFAULT_CLAIM_SYNCS,
          value_parser = at_least_one::<usize>, value_name = "int",
          help_heading = section::BINDER)]
    pub concurrent_claim_syncs: usize,

    /// Volumes synced at once.
    #[arg(long = "concurrent-volume-syncs", default_value_t = DEFAULT_VOLUME_SYNCS,
          value_parser = at_least_one::<usize>, value_name = "int",
          help_heading = section::BINDER)]
    pub concurrent_volume_syncs: usize,

    /// Pods the ephemeral volume controller syncs at once.
    #[arg(long = "concurrent-ephemeralvolume-syncs", default_value_t = DEFAULT_EPHEMERALVOLUME_SYNCS,
          value_parser = at_least_one::<usize>, value_name = "int",
          help_heading = section::EPHEMERAL)]
    pub concurrent_ephemeralvolume_syncs: usize,

    /// Pods and claims the ResourceClaim controller syncs at once.
    #[arg(long = "concurrent-resourceclaim-syncs", default_value_t = DEFAULT_RESOURCECLAIM_SYNCS,
          value_parser = at_least_one::<usize>, value_name = "int",
          help_heading = section::RESOURCECLAIM)]
    pub concurrent_resourceclaim_syncs: usize,

    /// IP address the secure port listens on; 0.0.0.0 or :: listens on every
    /// interface.
    #[arg(long = "bind-address", default_value = "0.0.0.0", value_name = "ip",
          help_heading = section::SECURE)]
    pub bind_address: std::net::IpAddr,

    /// Port of the HTTPS admin server (/metrics, /livez, /readyz, /explain,
    /// /shadow); 0 turns it off (default 10281; with --embedded-cluster a
    /// free loopback port with a token of its own).
    #[arg(long = "secure-port", value_name = "int", help_heading = section::SECURE)]
    pub secure_port: Option<u16>,

    /// PEM certificate of the secure port, read again when it changes;
    /// without it, a self-signed one.
    #[arg(long = "tls-cert-file", requires = "tls_private_key_file", value_name = "file",
          help_heading = section::SECURE)]
    pub tls_cert_file: Option<PathBuf>,

    /// PEM key of --tls-cert-file.
    #[arg(long = "tls-private-key-file", requires = "tls_cert_file", value_name = "file",
          help_heading = section::SECURE)]
    pub tls_private_key_file: Option<PathBuf>,

    /// How long a client of the secure port has to finish the TLS handshake.
    #[arg(long = "tls-handshake-timeout", default_value = "10s", value_parser = duration::positive,
          value_name = "duration", help_heading = section::SECURE)]
    pub tls_handshake_timeout: Duration,

    /// How long a client has to send a request's headers (an idle kept-alive
    /// connection is closed after it too).
    #[arg(long = "read-header-timeout", default_value = "32s", value_parser = duration::positive,
          value_name = "duration", help_heading = section::SECURE)]
    pub read_header_timeout: Duration,

    /// How long one request may take, authentication and authorization
    /// included, before a 504; and its whole exchange, the answer's writing
    /// included, before the connection is closed.
    #[arg(long = "request-timeout", default_value = "60s", value_parser = duration::positive,
          value_name = "duration", help_heading = section::SECURE)]
    pub request_timeout: Duration,

    /// Connections each admin port serves at once, shared by source
    /// address: more are accepted and wait their turn, and one from an
    /// address holding few takes the place of the oldest of the address
    /// holding most.
    #[arg(long = "max-connections", default_value_t = DEFAULT_MAX_CONNECTIONS,
          value_parser = at_least_one::<usize>, value_name = "int",
          help_heading = section::SECURE)]
    pub max_connections: usize,

    /// INSECURE: also serve /metrics and the health checks, nothing else,
    /// over plain HTTP without authentication on this address (`:PORT`:
    /// every interface). Loopback demos and tests only; 127.0.0.1:0 with
    /// --embedded-cluster.
    #[arg(long = "metrics-bind-address", value_name = "host:port",
          help_heading = section::INSECURE)]
    pub metrics_bind_address: Option<String>,

    /// How long an answer of a TokenReview is kept (0 keeps none).
    #[arg(long = "authentication-token-webhook-cache-ttl", default_value = "10s",
          value_parser = duration::parse, value_name = "duration",
          help_heading = section::AUTHENTICATION)]
    pub authentication_token_webhook_cache_ttl: Duration,

    /// Paths served without authentication or authorization (a trailing `*`
    /// matches any rest).
    #[arg(long = "authorization-always-allow-paths", value_delimiter = ',',
          default_value = "/healthz,/readyz,/livez", value_name = "strings",
          help_heading = section::AUTHORIZATION)]
    pub authorization_always_allow_paths: Vec<String>,

    /// How long an allowing SubjectAccessReview is kept (0 keeps none).
    #[arg(long = "authorization-webhook-cache-authorized-ttl", default_value = "10s",
          value_parser = duration::parse, value_name = "duration",
          help_heading = section::AUTHORIZATION)]
    pub authorization_webhook_cache_authorized_ttl: Duration,

    /// How long a denying SubjectAccessReview is kept (0 keeps none).
    #[arg(long = "authorization-webhook-cache-unauthorized-ttl", default_value = "10s",
          value_parser = duration::parse, value_name = "duration",
          help_heading = section::AUTHORIZATION)]
    pub authorization_webhook_cache_unauthorized_ttl: Duration,

    /// Decide beside the controllers that run the cluster, write nothing, take
    /// no Lease, and judge each decision against what the cluster does.
    #[arg(long = "shadow", num_args = 0..=1, require_equals = true, default_value = "false",
          default_missing_value = "true", value_parser = go_bool, value_name = "bool",
          help_heading = section::SHADOW)]
    pub shadow: bool,

    /// How long the cluster has to come to a decision before it counts as a
    /// difference (default: two sync periods).
    #[arg(long = "shadow-window", value_parser = duration::positive, value_name = "duration",
          help_heading = section::SHADOW)]
    pub shadow_window: Option<Duration>,

    /// Run on an in-memory API server seeded from this YAML file, served on
    /// a loopback port for kubectl.
    #[arg(long = "embedded-cluster", value_name = "file", help_heading = section::EMBEDDED)]
    pub embedded_cluster: Option<PathBuf>,

    /// Exit once nothing changed for three sync periods, after printing the
    /// objects.
    #[arg(long = "exit-when-settled", num_args = 0..=1, require_equals = true,
          default_value = "false", default_missing_value = "true", value_parser = go_bool,
          value_name = "bool", requires = "embedded_cluster", help_heading = section::EMBEDDED)]
    pub exit_when_settled: bool,

    /// Path to a kubeconfig file; without it KUBECONFIG, the in-cluster
    /// configuration, then ~/.kube/config.
    #[arg(long, value_name = "file", help_heading = section::MISC)]
    pub kubeconfig: Option<PathBuf>,

    /// Address of the API server; overrides the kubeconfig's.
    #[arg(long, value_name = "url", help_heading = section::MISC)]
    pub master: Option<String>,

    /// Log line format: text, or json shaped as kube-controller-manager's.
    #[arg(long = "logging-format", alias = "log-format", value_enum,
          default_value_t = LoggingFormat::Text, value_name = "format",
          help_heading = section::LOGS)]
    pub logging_format: LoggingFormat,

    /// klog verbosity: 0 errors, warnings and start-up; 2 phase changes; 4
    /// debug; 5 trace (RUST_LOG, when set, wins).
    #[arg(short = 'v', long = "v", default_value_t = 2, value_name = "level",
          help_heading = section::LOGS)]
    pub verbosity: u8,

    /// Print the version and exit.
    #[allow(dead_code, reason = "clap acts on the flag; its value is never read")]
    #[arg(long, action = clap::ArgAction::Version, help_heading = section::GLOBAL)]
    version: Option<bool>,

    /// Print this help and exit.
    #[allow(dead_code, reason = "clap acts on the flag; its value is never read")]
    #[arg(short = 'h', long, action = clap::ArgAction::HelpShort, help_heading = section::GLOBAL)]
    help: Option<bool>,
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

/// The one-off commands.
#[derive(clap::Subcommand, Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// Why a claim is Pending: reads the claim, the volumes and its class from
    /// the cluster and applies the binder's rules, as the controller does;
    /// prints the claim's requirements and each volume with the first rule it
    /// fails. Also `kubectl pv-controller explain` as a kubectl plugin.
    Explain(ExplainArgs),
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
    /// (port 10281; none with port 0; with --embedded-cluster always one, on
    /// a free loopback port unless --secure-port names one).
    pub fn secure_serving(&self) -> Option<SecureServing> {
        let address = match self.secure_port {
            // The embedded demo always has one, on a free loopback port
            // unless the flags name one.
            Some(0) | None if self.embedded() => ([127, 0, 0, 1], 0).into(),
            Some(0) => return None,
            port => {
                std::net::SocketAddr::new(self.bind_address, port.unwrap_or(DEFAULT_SECURE_PORT))
            }
        };
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
            address,
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
}

#[cfg(test)]
mod tests;
