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
