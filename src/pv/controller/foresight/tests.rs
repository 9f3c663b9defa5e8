use super::*;
use crate::pv::controller::Settings;
use crate::pv::plugins::recycler::{RecyclerPodConfig, default_template};
use crate::pv::plugins::{PluginConfig, VolumePlugins};
use crate::testing::{OfflineObjects, offline_binder};
use testkit::volume;

#[test]
fn a_recycle_shows_its_pod_and_a_delete_no_plugin_can_do_a_failure() {
    let recycler = RecyclerPodConfig {
        template: default_template(),
        minimum_timeout: 60,
        timeout_increment: 30,
    };
    let plugins = VolumePlugins::from_config(&PluginConfig {
        enable_host_path_provisioner: false,
        host_path_root: "/tmp/hostpath_pv".into(),
        host_path_recycler: recycler.clone(),
        nfs_recycler: recycler,
    });
    let released = volume("v1", "1Gi")
        .bound_to("gone-uid", "gone")
        .phase("Released")
        .host_path("/tmp/v1")
        .build();
    let sourceless = volume("v2", "1Gi")
        .bound_to("gone-uid-2", "gone-2")
        .phase("Released")
        .build();
    let binder = offline_binder(
        Settings {
            plugins,
            ..Settings::default()
        },
        OfflineObjects {
            volumes: vec![released, sourceless],
            ..OfflineObjects::default()
        },
    )
    .expect("binder");
    let sign = |kind, name: &str| {
        binder
            .foresee(kind, &ObjectKey::cluster(name))
            .map(|foreseen| foreseen.sign)
    };
    assert_eq!(
        sign(RECYCLE, "v1"),
        Some(FirstSign::Pod("default".into(), "recycler-for-v1".into()))
    );
    assert_eq!(sign(DELETE, "v1"), Some(FirstSign::Gone));
    assert_eq!(sign(RECYCLE, "v2"), Some(FirstSign::Failed));
    assert_eq!(sign(DELETE, "v2"), Some(FirstSign::Failed));
    assert_eq!(sign(RECYCLE, "unknown"), None);
}
