//! Claims no existing volume can serve: delayed binding, the retroactive
//! default StorageClass, and the hand-off to a provisioner (the start of
//! the claim's provision operation, [`crate::pv::operations`], and what
//! that operation plans first: the claim annotated with its provisioner).

use std::sync::Arc;

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;

use super::finalizers::apply_migrated_to;
use super::{Binder, PvEffect, PvPlan, changes};
use crate::kinds::pod::{PODS_BY_CLAIM, PodPhase};
use crate::pv::constants::{IN_TREE_PLUGIN_PREFIX, reasons};
use crate::pv::error::{Error, Result};
use crate::pv::keys;
use crate::pv::migration::{claim_migrated_to_change, csi_driver_of};
use crate::pv::objects::{annotation, claim_class, claim_has_class};
use crate::pv::plugins::VolumePlugin;
use crate::runtime::events::EventType;
use crate::runtime::keys::ObjectKey;
use crate::runtime::kinds::Part;
use crate::runtime::plan::IfFailed;
use k8s_names::{
    ANN_BETA_IS_DEFAULT_CLASS, ANN_BETA_STORAGE_PROVISIONER, ANN_IS_DEFAULT_CLASS,
    ANN_STORAGE_PROVISIONER,
};

impl Binder {
    /// The StorageClass of the given name, from the lister.
    pub(crate) fn storage_class(&self, name: &str) -> Option<Arc<StorageClass>> {
        self.classes.get(&ObjectKey::cluster(name))
    }

    /// Whether binding of this claim waits for a pod to be scheduled
    /// (its class has `volumeBindingMode: WaitForFirstConsumer`). A class that
    /// does not exist means no delay; a class without a binding mode is an
    /// error, as upstream.
    pub(super) fn is_delay_binding(&self, claim: &PersistentVolumeClaim) -> Result<bool> {
        let class_name = claim_class(claim);
        if class_name.is_empty() {
            return Ok(false);
        }
        let Some(class) = self.storage_class(class_name) else {
            return Ok(false);
        };
        match class.volume_binding_mode.as_deref() {
            None => Err(Error::StorageClass(format!(
                "VolumeBindingMode not set for StorageClass {class_name:?}"
            ))),
            Some(mode) => Ok(mode == "WaitForFirstConsumer"),
        }
    }

    /// Tells the user why a delayed-binding claim is still Pending: no pod
    /// uses it yet, or its pods are not scheduled yet.
    pub(super) fn event_for_waiting_claim(
        &self,
        plan: &mut PvPlan,
        claim: &Arc<PersistentVolumeClaim>,
    ) {
        let waiting = self.unscheduled_pods_using(claim);
        let (reason, message) = match waiting.as_slice() {
            [] => (
                reasons::WAIT_FOR_FIRST_CONSUMER,
                "waiting for first consumer to be created before binding".to_string(),
            ),
            [one] => (
                reasons::WAIT_FOR_POD_SCHEDULED,
                format!("waiting for pod {one} to be scheduled"),
            ),
            many => (
                reasons::WAIT_FOR_POD_SCHEDULED,
                format!("waiting for pods {} to be scheduled", many.join(",")),
            ),
        };
        plan.event(claim.as_ref(), EventType::Normal, reason, message);
    }

    /// Names of the pods that use the claim, are not finished and have no
    /// node yet, sorted.
    fn unscheduled_pods_using(&self, claim: &PersistentVolumeClaim) -> Vec<String> {
        let mut names: Vec<String> = self
            .active_pods_using(&ObjectKey::of(claim))
            .into_iter()
            .filter(|pod| {
                pod.spec
                    .as_ref()
                    .and_then(|s| s.node_name.as_deref())
                    .unwrap_or("")
                    .is_empty()
            })
            .filter_map(|pod| pod.metadata.name.clone())
            .collect();
        names.sort();
        names
    }

    /// The pods that mount the claim and are not finished, from the pod
    /// store's index of pods by claim.
    pub(crate) fn active_pods_using(&self, key: &ObjectKey) -> Vec<Arc<Pod>> {
        self.pods
            .indexed(PODS_BY_CLAIM, key)
            .into_iter()
            .filter(|pod| !pod_is_terminated(pod))
            .collect()
    }

    /// Plans the cluster's default class for a claim that has no class at
    /// all, so that claims created before a default existed get
    /// provisioned (counted either way). Returns whether the plan updates
    /// the claim (its next sync continues).
    pub(super) fn assign_default_class(
        &self,
        plan: &mut PvPlan,
        claim: &Arc<PersistentVolumeClaim>,
    ) -> bool {
        if claim_has_class(claim) {
            return false;
        }
        let Some(class) = default_class(&self.classes.list()) else {
            return false;
        };
        let class_name = class.metadata.name.clone().unwrap_or_default();
        changes::default_class(plan, claim, &class_name);
        plan.if_failed(IfFailed::Local(PvEffect::DefaultClass { failed: true }));
        plan.local(PvEffect::DefaultClass { failed: false });
        true
    }

    /// Who provisions for a claim of `class`: an in-process plugin when the
    /// class names one, else an external provisioner (for a class naming an
    /// in-tree plugin that migrated to CSI, the CSI driver); `None` for a
    /// class naming an in-tree plugin nothing serves.
    pub(crate) fn provisioner_of(&self, class: &Arc<StorageClass>) -> Option<Provisioner> {
        if let Some(driver) = csi_driver_of(&class.provisioner) {
            return Some(Provisioner::External(driver.to_string()));
        }
        if let Some(plugin) = self.settings.plugins.provisioner(&class.provisioner) {
            return Some(Provisioner::InTree {
                plugin,
                class: Arc::clone(class),
            });
        }
        (!class.provisioner.starts_with(IN_TREE_PLUGIN_PREFIX))
            .then(|| Provisioner::External(class.provisioner.clone()))
    }

    /// Plans the hand-off of a claim to the provisioner of its class: the
    /// start of the claim's provision operation,
    /// `provision-<ns>/<claim>[<uid>]`.
    pub(super) fn provision_claim(
        &self,
        plan: &mut PvPlan,
        claim: &Arc<PersistentVolumeClaim>,
    ) -> Result<()> {
        if !self.settings.enable_dynamic_provisioning {
            tracing::debug!("dynamic provisioning is disabled, claim left alone");
            return Ok(());
        }
        let class_name = claim_class(claim);
        let Some(class) = self.storage_class(class_name) else {
            let message = format!("storageclass.storage.k8s.io {class_name:?} not found");
            plan.event(
                claim.as_ref(),
                EventType::Warning,
                reasons::PROVISIONING_FAILED,
                message,
            );
            return Ok(());
        };
        if self.provisioner_of(&class).is_none() {
            // A class of pre-made volumes (kubernetes.io/no-provisioner):
            // the volumes are what the user wants to hear about.
            let delay_binding = self.is_delay_binding(claim).unwrap_or(false);
            let base = format!(
                "no provisionable volume plugin matched name: {}",
                class.provisioner
            );
            if self.tell_with_nearest_misses(
                plan,
                claim,
                delay_binding,
                true,
                reasons::PROVISIONING_FAILED,
                &base,
            ) {
                tracing::warn!(provisioner = %class.provisioner, "no plugin serves the class's provisioner");
            }
            return Ok(());
        }
        let key = ObjectKey::of(claim.as_ref());
        let uid = claim.metadata.uid.as_deref().unwrap_or_default();
        plan.start(keys::provision(&key.namespace, &key.name, uid));
        Ok(())
    }
}

/// Who provisions a volume for a claim.
pub(crate) enum Provisioner {
    /// An in-process plugin, for the claim's class.
    InTree {
        /// The plugin.
        plugin: Arc<dyn VolumePlugin>,
        /// The class.
        class: Arc<StorageClass>,
    },
    /// An external provisioner, by the name the claim is annotated with.
    External(String),
}

/// Plans the claim handed to `provisioner`: both storage-provisioner
/// annotations when the GA one differs, and with them what `migrated-to`
/// must be for the new provisioner (as upstream: removed, unless the
/// provisioner is a migrated in-tree plugin; a claim of a migrated class is
/// handed to the CSI driver itself and carries none). Returns the claim as
/// the plan leaves it.
pub(crate) fn hand_to_provisioner(
    plan: &mut PvPlan,
    claim: &Arc<PersistentVolumeClaim>,
    provisioner: &str,
) -> Arc<PersistentVolumeClaim> {
    plan.update(
        claim,
        Part::Spec,
        format!("provisioner {provisioner}"),
        |changed| {
            if annotation(&changed.metadata, ANN_STORAGE_PROVISIONER) == Some(provisioner) {
                return false;
            }
            let annotations = changed
                .metadata
                .annotations
                .get_or_insert_with(Default::default);
            for key in [ANN_STORAGE_PROVISIONER, ANN_BETA_STORAGE_PROVISIONER] {
                annotations.insert(key.to_string(), provisioner.to_string());
            }
            let migrated_to = claim_migrated_to_change(changed);
            apply_migrated_to(&mut changed.metadata.annotations, migrated_to);
            true
        },
    )
}

/// The name of the volume provisioned for `claim`: `pvc-<claim uid>`, so
/// every run of its provisioning (a retry, a restarted controller) finds
/// the volume of the first.
pub(crate) fn provisioned_volume_name(claim: &PersistentVolumeClaim) -> String {
    format!("pvc-{}", claim.metadata.uid.as_deref().unwrap_or(""))
}

/// The default StorageClass: among classes annotated as default, the newest
/// by creation time, ties broken by name.
pub(super) fn default_class(classes: &[Arc<StorageClass>]) -> Option<Arc<StorageClass>> {
    classes
        .iter()
        .filter(|class| {
            annotation(&class.metadata, ANN_IS_DEFAULT_CLASS) == Some("true")
                || annotation(&class.metadata, ANN_BETA_IS_DEFAULT_CLASS) == Some("true")
        })
        .max_by(|a, b| {
            let created = |c: &StorageClass| c.metadata.creation_timestamp.as_ref().map(|t| t.0);
            created(a)
                .cmp(&created(b))
                .then_with(|| b.metadata.name.cmp(&a.metadata.name))
        })
        .cloned()
}

/// Whether a pod will not run again: Succeeded or Failed, or being deleted
/// with no container of any kind (init, regular, ephemeral) running, as
/// upstream's `IsPodTerminated`. A container counts as running unless its
/// state says terminated or waiting.
pub(super) fn pod_is_terminated(pod: &Pod) -> bool {
    if PodPhase::of(pod).is_some_and(PodPhase::is_terminal) {
        return true;
    }
    let status = pod.status.as_ref();
    let not_running = |statuses: Option<&Vec<k8s_openapi::api::core::v1::ContainerStatus>>| {
        statuses.into_iter().flatten().all(|c| {
            c.state
                .as_ref()
                .is_some_and(|state| state.terminated.is_some() || state.waiting.is_some())
        })
    };
    pod.metadata.deletion_timestamp.is_some()
        && status.is_none_or(|s| {
            not_running(s.init_container_statuses.as_ref())
                && not_running(s.container_statuses.as_ref())
                && not_running(s.ephemeral_container_statuses.as_ref())
        })
}
