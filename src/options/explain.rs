//! The flags of `pv-controller explain` (and of the kubectl plugin's
//! `kubectl pv-controller explain`), spelled as kubectl's; the command is
//! `crate::explain_cli`.

use std::path::PathBuf;

use component_base::flags::go_bool;

/// The flags of `pv-controller explain`, spelled as kubectl's.
#[derive(clap::Args, Debug, Clone, PartialEq, Eq)]
pub struct ExplainArgs {
    /// The claim: NAMESPACE/CLAIM, or CLAIM in --namespace.
    #[arg(value_name = "claim")]
    pub claim: String,
    /// The claim's namespace, when the claim is given without one (default:
    /// the kubeconfig context's).
    #[arg(short = 'n', long, value_name = "string")]
    pub namespace: Option<String>,
    /// Path to a kubeconfig file (default: KUBECONFIG, ~/.kube/config, then
    /// the in-cluster configuration).
    #[arg(long, value_name = "file")]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use.
    #[arg(long, value_name = "string")]
    pub context: Option<String>,
    /// Address of the API server; overrides the kubeconfig's (`--server`
    /// too, as kubectl spells it).
    #[arg(long, visible_alias = "server", value_name = "url")]
    pub master: Option<String>,
    /// Ask a running controller's admin port instead, for its live view and
    /// last sync: https://HOST:PORT (e.g. through `kubectl port-forward`).
    #[arg(long = "admin-address", value_name = "url")]
    pub admin_address: Option<String>,
    /// Bearer token for --admin-address (default: the kubeconfig user's).
    #[arg(long, value_name = "string", requires = "admin_address")]
    pub token: Option<String>,
    /// PEM file of the CA that signed --admin-address's certificate.
    #[arg(
        long = "certificate-authority",
        value_name = "file",
        requires = "admin_address"
    )]
    pub certificate_authority: Option<PathBuf>,
    /// Accept --admin-address's certificate unverified (the self-signed one
    /// the controller makes without --tls-cert-file).
    #[arg(long = "insecure-skip-tls-verify", num_args = 0..=1, require_equals = true,
          default_value = "false", default_missing_value = "true",
          value_parser = go_bool, value_name = "bool",
          requires = "admin_address")]
    pub insecure_skip_tls_verify: bool,
}
