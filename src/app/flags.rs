//! The volume plugins' configuration of the binary's flags: the flags hand
//! plain values (paths, timeouts); here the recycler pod templates they
//! name are read and checked, so the process does not start with a
//! recycler that would fail on every volume.

use std::path::PathBuf;

use crate::options::Options;
use crate::pv::{PluginConfig, RecyclerPodConfig, TemplateError, default_template, load_template};

/// The volume plugins' configuration of `options`; a recycler pod template
/// file that cannot be read or has no volume is an error.
pub fn plugin_config(options: &Options) -> Result<PluginConfig, TemplateError> {
    let template = |path: &Option<PathBuf>| match path {
        Some(path) => load_template(path),
        None => Ok(default_template()),
    };
    Ok(PluginConfig {
        enable_host_path_provisioner: options.enable_hostpath_provisioner,
        host_path_root: options.hostpath_provisioner_root.clone(),
        host_path_recycler: RecyclerPodConfig {
            template: template(&options.pv_recycler_pod_template_filepath_hostpath)?,
            minimum_timeout: options.pv_recycler_minimum_timeout_hostpath,
            timeout_increment: options.pv_recycler_timeout_increment_hostpath,
        },
        nfs_recycler: RecyclerPodConfig {
            template: template(&options.pv_recycler_pod_template_filepath_nfs)?,
            minimum_timeout: options.pv_recycler_minimum_timeout_nfs,
            timeout_increment: options.pv_recycler_increment_timeout_nfs,
        },
    })
}

#[cfg(test)]
mod tests;
