//! Claims no existing volume can serve: delayed binding, the retroactive
//! default StorageClass, and the hand-off to a provisioner.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;

use super::Controller;
use super::changes::{ClaimChange, PvPlan};
use super::finalizers::apply_migrated_to;
use super::writes::{Edit, Part};
use crate::kinds::pod::{PODS_BY_CLAIM, PodPhase};
use crate::pv::constants::{IN_TREE_PLUGIN_PREFIX, reasons};
use crate::pv::error::{Error, Result};
use crate::pv::migration::{claim_migrated_to_change, csi_driver_of};
use crate::pv::objects::{annotation, claim_class, claim_has_class};
use crate::pv::operations;
use crate::runtime::events::EventType;
use crate::runtime::keys::ObjectKey;
use k8s_names::{
    ANN_BETA_IS_DEFAULT_CLASS, ANN_BETA_STORAGE_PROVISIONER, ANN_IS_DEFAULT_CLASS,
    ANN_STORAGE_PROVISIONER,
};

impl Controller {
    /// The StorageClass of the given name, from the lister.
    pub(super) fn storage_class(&self, name: &str) -> Option<Arc<StorageClass>> {
        self.listers.classes.get(&ObjectKey::cluster(name))
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
    pub(super) fn active_pods_using(&self, key: &ObjectKey) -> Vec<Arc<Pod>> {
        self.listers
            .pods
            .indexed(PODS_BY_CLAIM, key)
            .into_iter()
            .filter(|pod| !pod_is_terminated(pod))
            .collect()
    }

    /// Plans the cluster's default class for a claim that has no class at
    /// all, so that claims created before a default existed get
    /// provisioned. Returns whether the plan updates the claim (its next
    /// sync continues).
    pub(super) fn assign_default_class(
        &self,
        plan: &mut PvPlan,
        claim: &Arc<PersistentVolumeClaim>,
    ) -> Result<bool> {
        if claim_has_class(claim) {
            return Ok(false);
        }
        let Some(class) = default_class(&self.listers.classes.list()) else {
            return Ok(false);
        };
        let class_name = class.metadata.name.clone().unwrap_or_default();
        plan.update(claim, Part::Spec, ClaimChange::DefaultClass(class_name))?;
        plan.after.assigns_default_class = true;
        Ok(true)
    }

    /// Plans the hand-off of a claim to the provisioner of its class: an
    /// in-process plugin when the class names one, else an external
    /// provisioner (for a class naming an in-tree plugin that migrated to
    /// CSI, the CSI driver's). Both run as the claim's provision operation,
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
        let migrated = csi_driver_of(&class.provisioner);
        let plugin = match migrated {
            Some(_) => None,
            None => self.settings.plugins.provisioner(&class.provisioner),
        };
        if plugin.is_none()
            && migrated.is_none()
            && class.provisioner.starts_with(IN_TREE_PLUGIN_PREFIX)
        {
            // A class of pre-made volumes (kubernetes.io/no-provisioner):
            // the volumes are what the user wants to hear about.
            let delay_binding = self.is_delay_binding(claim).unwrap_or(false);
            let base = format!(
                "no provisionable volume plugin matched name: {}",
                class.provisioner
            );
            if self.note_with_nearest_misses(
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
        let name = operations::provision(
            &key.namespace,
            &key.name,
            claim.metadata.uid.as_deref().unwrap_or(""),
        );
        let this = self.clone();
        let claim = Arc::clone(claim);
        if let Some(plugin) = plugin {
            // The provisioning future is large: keep it on the heap.
            plan.start(name, async move {
                Box::pin(this.provision_in_tree(claim, plugin, class)).await
            });
        } else {
            let provisioner = migrated.unwrap_or(&class.provisioner).to_string();
            plan.start(name, async move {
                this.provision_external(claim, provisioner).await
            });
        }
        Ok(())
    }

    /// Asks an external provisioner for a volume through the claim's
    /// storage-provisioner annotations (the CSI driver's name when the
    /// class's in-tree plugin migrated to it), and says so in an event
    /// (every time it runs, as upstream: a claim waiting long shows it).
    #[tracing::instrument(skip_all, fields(claim = %ObjectKey::of(claim.as_ref()), operation = "provision"))]
    async fn provision_external(
        &self,
        claim: Arc<PersistentVolumeClaim>,
        provisioner: String,
    ) -> Result<()> {
        let claim = match self.set_claim_provisioner(&claim, &provisioner).await {
            Ok(claim) => claim,
            Err(error) => {
                self.warn(
                    claim.as_ref(),
                    reasons::PROVISIONING_FAILED,
                    format!("Error saving claim: {error}"),
                );
                return Err(error);
            }
        };
        let message = format!(
            "Waiting for a volume to be created either by the external provisioner '{provisioner}' or manually by the system administrator. If volume creation is delayed, please verify that the provisioner is running and correctly registered."
        );
        self.note(claim.as_ref(), reasons::EXTERNAL_PROVISIONING, message);
        Ok(())
    }

    /// Writes both storage-provisioner annotations when the GA one differs,
    /// and with them what `migrated-to` must be for the new provisioner (as
    /// upstream: removed, unless the provisioner is a migrated in-tree
    /// plugin; a claim of a migrated class is handed to the CSI driver
    /// itself and carries none).
    pub(super) async fn set_claim_provisioner(
        &self,
        claim: &Arc<PersistentVolumeClaim>,
        provisioner: &str,
    ) -> Result<Arc<PersistentVolumeClaim>> {
        let wanted = |claim: &PersistentVolumeClaim| {
            annotation(&claim.metadata, ANN_STORAGE_PROVISIONER) == Some(provisioner)
        };
        if wanted(claim) {
            return Ok(Arc::clone(claim));
        }
        let stored = self
            .write_claim(claim, Part::Spec, |changed| {
                if wanted(changed) {
                    return Edit::Unchanged;
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
                Edit::Changed
            })
            .await?;
        tracing::info!(provisioner, "claim handed to its provisioner");
        Ok(stored)
    }
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
