//! What the command line of a Kubernetes component shares, for
//! `pv-controller` and `dra-publish` alike, so that an operator types and
//! reads them as kube-controller-manager's (whose flags and logs come from
//! `k8s.io/component-base`):
//!
//! - [`duration`]: Go's duration syntax (`15s`, `1m30s`), and the parsers
//!   that refuse a value a flag cannot work with, naming what it accepts;
//! - [`flags`]: booleans as Go's flag package takes them;
//! - [`logs`]: `--logging-format` (`text`, or `json` lines shaped as
//!   kube-controller-manager's) and klog's `-v` levels.

pub mod duration;
pub mod flags;
pub mod logs;
