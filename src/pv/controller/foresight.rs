//! What a recycle or delete the binder starts shows first on the cluster,
//! by the plugins' own rules and without running them: for a process that
//! follows another controller's operations instead of running its own.

use super::Controller;
use crate::pv::keys::VolumeName;
use crate::pv::operations::{DELETE, RECYCLE};
use crate::pv::plugins::Deleter;

/// What an operation shows first on the cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum FirstSign {
    /// Its recycler pod appears: (namespace, name).
    Pod(String, String),
    /// The volume is no longer bound to its released claim.
    Unbound,
    /// The volume goes.
    Gone,
    /// The volume turns Failed: no plugin can do the work.
    Failed,
    /// Nothing the controller does: an external program deletes it.
    Nothing,
}

impl Controller {
    /// What the operation of kind `kind` (recycle or delete) on the volume
    /// `volume` shows first; `None` for another kind, or a volume not
    /// known here.
    pub(crate) fn first_sign(&self, kind: &str, volume: &str) -> Option<FirstSign> {
        let volume = self.cache.volume(&VolumeName::new(volume))?;
        let plugins = &self.settings.plugins;
        match kind {
            RECYCLE => Some(match plugins.recycler_for(&volume) {
                Some(plugin) => plugin
                    .recycler_pod(&volume)
                    .map_or(FirstSign::Unbound, |(namespace, name)| {
                        FirstSign::Pod(namespace, name)
                    }),
                None => FirstSign::Failed,
            }),
            DELETE => Some(match plugins.deleter(&volume) {
                Deleter::Plugin(_) => FirstSign::Gone,
                Deleter::External => FirstSign::Nothing,
                Deleter::Missing(_) => FirstSign::Failed,
            }),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::pv::controller::Settings;
    use crate::pv::controller::testing::controller_with;
    use crate::pv::plugins::recycler::{RecyclerPodConfig, default_template};
    use crate::pv::plugins::{PluginConfig, VolumePlugins};
    use crate::runtime::informer::Store;
    use memapi::MemApi;
    use testkit::volume;

    #[tokio::test]
    async fn a_recycle_shows_its_pod_and_a_delete_no_plugin_can_do_a_failure() {
        let api = MemApi::new();
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
        let controller = controller_with(
            api.client(),
            Settings {
                plugins,
                ..Settings::default()
            },
        );
        let released = volume("v1", "1Gi")
            .bound_to("gone-uid", "gone")
            .phase("Released")
            .host_path("/tmp/v1")
            .build();
        controller.cache().watched(&Arc::new(released));
        let sourceless = volume("v2", "1Gi")
            .bound_to("gone-uid-2", "gone-2")
            .phase("Released")
            .build();
        controller.cache().watched(&Arc::new(sourceless));
        assert_eq!(
            controller.first_sign(RECYCLE, "v1"),
            Some(FirstSign::Pod("default".into(), "recycler-for-v1".into()))
        );
        assert_eq!(controller.first_sign(DELETE, "v1"), Some(FirstSign::Gone));
        assert_eq!(
            controller.first_sign(RECYCLE, "v2"),
            Some(FirstSign::Failed)
        );
        assert_eq!(controller.first_sign(DELETE, "v2"), Some(FirstSign::Failed));
        assert_eq!(controller.first_sign(RECYCLE, "unknown"), None);
    }
}
