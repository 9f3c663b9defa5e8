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
mod tests {
    use clap::Parser;

    use super::*;
    use crate::app::AppConfig;

    /// The flags keep their defaults apart from the controllers': each is
    /// held to the controller's own here.
    #[test]
    fn the_flags_defaults_are_the_controllers() {
        let options = Options::parse_from(["pv-controller"]);
        let config = AppConfig::default();
        let pv = &config.persistentvolume;
        assert_eq!(options.concurrent_claim_syncs, pv.claim_workers);
        assert_eq!(options.concurrent_volume_syncs, pv.volume_workers);
        assert_eq!(
            options.max_concurrent_operations,
            pv.max_concurrent_operations
        );
        assert_eq!(options.resync_period(), pv.resync_period);
        assert_eq!(
            options.concurrent_ephemeralvolume_syncs,
            config.ephemeral.workers
        );
        assert_eq!(
            options.concurrent_resourceclaim_syncs,
            config.resourceclaim.workers
        );
    }

    #[test]
    fn the_default_plugins_have_upstreams_recyclers() {
        let plugins = plugin_config(&Options::parse_from(["pv-controller"])).unwrap();
        assert!(!plugins.enable_host_path_provisioner);
        assert_eq!(plugins.host_path_root, PathBuf::from("/tmp/hostpath_pv"));
        assert_eq!(plugins.host_path_recycler.minimum_timeout, 60);
        assert_eq!(plugins.nfs_recycler.minimum_timeout, 300);
        assert_eq!(
            plugins.nfs_recycler.template,
            default_template(),
            "no template file: upstream's"
        );
        let missing = Options::parse_from([
            "pv-controller",
            "--pv-recycler-pod-template-filepath-nfs=/nonexistent/recycler.yaml",
        ]);
        assert!(matches!(
            plugin_config(&missing),
            Err(TemplateError::Read { .. })
        ));
    }
}
