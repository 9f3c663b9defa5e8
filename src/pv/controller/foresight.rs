//! What an operation the binder starts shows first on the cluster, by the
//! plugins' own rules and without running them, whether the cluster shows
//! it already, and the version of the object it was started on: for a
//! process that follows another controller's operations instead of
//! running its own.

use super::Binder;
use crate::pv::keys::VolumeName;
use crate::pv::keys::{DELETE, PROVISION, RECYCLE};
use crate::pv::objects::{VolumePhase, annotation, volume_phase};
use crate::pv::plugins::Deleter;
use crate::runtime::keys::ObjectKey;
use k8s_names::{ANN_BETA_STORAGE_PROVISIONER, ANN_STORAGE_PROVISIONER};

/// What the binder foresees of an operation it starts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Foreseen {
    /// What it shows first.
    pub(crate) sign: FirstSign,
    /// Whether this process's stores show it already.
    pub(crate) shown: bool,
    /// The resourceVersion of the object it was started on.
    pub(crate) version: Option<String>,
}

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
    /// The claim is handed to its provisioner.
    Handed,
}

impl Binder {
    /// What the operation of kind `kind` on `object` (a volume to recycle
    /// or delete, a claim to provision) shows first; `None` for another
    /// kind, or an object not known here.
    pub(crate) fn foresee(&self, kind: &str, object: &ObjectKey) -> Option<Foreseen> {
        if kind == PROVISION {
            let claim = self.store.claim(object)?;
            let handed = [ANN_STORAGE_PROVISIONER, ANN_BETA_STORAGE_PROVISIONER]
                .iter()
                .any(|key| annotation(&claim.metadata, key).is_some());
            return Some(Foreseen {
                sign: FirstSign::Handed,
                shown: handed,
                version: claim.metadata.resource_version.clone(),
            });
        }
        let volume = self.store.volume(&VolumeName::new(&object.name))?;
        let plugins = &self.settings.plugins;
        let sign = match kind {
            RECYCLE => match plugins.recycler_for(&volume) {
                Some(plugin) => plugin
                    .recycler_pod(&volume)
                    .map_or(FirstSign::Unbound, |(namespace, name)| {
                        FirstSign::Pod(namespace, name)
                    }),
                None => FirstSign::Failed,
            },
            DELETE => match plugins.deleter(&volume) {
                Deleter::Plugin(_) => FirstSign::Gone,
                Deleter::External => FirstSign::Nothing,
                Deleter::Missing(_) => FirstSign::Failed,
            },
            _ => return None,
        };
        let shown = match &sign {
            FirstSign::Pod(namespace, name) => self
                .pods
                .get(&ObjectKey::new(namespace.as_str(), name.as_str()))
                .is_some(),
            FirstSign::Gone => volume.metadata.deletion_timestamp.is_some(),
            FirstSign::Failed => volume_phase(&volume) == Some(VolumePhase::Failed),
            FirstSign::Unbound | FirstSign::Nothing | FirstSign::Handed => false,
        };
        Some(Foreseen {
            sign,
            shown,
            version: volume.metadata.resource_version.clone(),
        })
    }
}

#[cfg(test)]
mod tests;
