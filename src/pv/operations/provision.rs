//! The provision operation: an external provisioner is handed the claim
//! (its storage-provisioner annotations, and an event saying so); an
//! in-process plugin creates storage, and the controller creates the volume
//! object for it, pre-bound to the claim.
//!
//! The volume is named `pvc-<claim uid>`, so a repeated run (a retry, a
//! second sync, a restarted controller) finds the volume of the first run
//! and stops instead of provisioning again. If the object cannot be created
//! after the retries, the storage is deleted again so nothing leaks
//! silently; if that fails too, an event asks for manual clean-up.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;

use super::delete::{Deletion, delete_storage};
use super::{Operations, PvExecutor, another_incarnation, carry_out, read_claim, read_volume};
use crate::pv::constants::reasons;
use crate::pv::controller::changes::{self, set_annotation};
use crate::pv::controller::{Provisioner, PvPlan, hand_to_provisioner, provisioned_volume_name};
use crate::pv::error::{Error, Result};
use crate::pv::keys::VolumeName;
use crate::pv::objects::{
    ReclaimPolicy, VolumePhase, annotation, claim_class, claim_reference, is_volume_bound_to_claim,
};
use crate::pv::plugins::{PluginError, ProvisionRequest, VolumePlugin};
use crate::runtime::events::EventType;
use crate::runtime::keys::ObjectKey;
use crate::runtime::kinds::Part;
use crate::runtime::operations::OperationName;
use k8s_names::{
    ANN_BOUND_BY_CONTROLLER, ANN_DYNAMICALLY_PROVISIONED, ANN_SELECTED_NODE,
    ANN_STORAGE_PROVISIONER, FINALIZER_PV_CONTROLLER,
};

/// Whether `now` is the claim `claim` (same UID) and still names no volume.
fn still_waits(now: &PersistentVolumeClaim, claim: &PersistentVolumeClaim) -> bool {
    now.metadata.uid == claim.metadata.uid && requested_volume(now).is_none()
}

/// The volume a claim names in `spec.volumeName`, if any.
fn requested_volume(claim: &PersistentVolumeClaim) -> Option<&str> {
    claim
        .spec
        .as_ref()
        .and_then(|s| s.volume_name.as_deref())
        .filter(|n| !n.is_empty())
}

impl Operations {
    /// Provisions for the claim the operation `name` is for, as the store
    /// holds it now: hands it to its external provisioner, or has an
    /// in-process plugin make its volume.
    pub(super) async fn provision(
        &self,
        name: &OperationName,
        executor: &PvExecutor,
    ) -> Result<()> {
        let Some(claim) = self.binder.store.claim(name.object()) else {
            tracing::debug!(claim = %name.object(), "claim gone, nothing to provision");
            return Ok(());
        };
        if another_incarnation(name, claim.metadata.uid.as_deref()) {
            tracing::debug!(claim = %name.object(), "claim re-created under its name, its own operation provisions");
            return Ok(());
        }
        let class_name = claim_class(&claim);
        let Some(class) = self.binder.storage_class(class_name) else {
            tracing::debug!(claim = %name.object(), class = class_name, "class gone, nothing to provision");
            return Ok(());
        };
        match self.binder.provisioner_of(&class) {
            Some(Provisioner::InTree { plugin, class }) => {
                self.provision_in_tree(executor, claim, plugin, class).await
            }
            Some(Provisioner::External(provisioner)) => {
                provision_external(executor, &claim, &provisioner).await
            }
            None => Ok(()),
        }
    }

    /// Provisions a volume for a claim with an in-process plugin. Runs on the
    /// operation tracker as `provision-<ns>/<claim>[<uid>]`.
    #[tracing::instrument(skip_all, fields(claim = %ObjectKey::of(claim.as_ref()), operation = "provision", plugin = plugin.name()))]
    async fn provision_in_tree(
        &self,
        executor: &PvExecutor,
        claim: Arc<PersistentVolumeClaim>,
        plugin: Arc<dyn VolumePlugin>,
        class: Arc<StorageClass>,
    ) -> Result<()> {
        let class_name = class.metadata.name.clone().unwrap_or_default();
        if claim.spec.as_ref().is_some_and(|s| s.data_source.is_some()) {
            let message = format!(
                "plugin {:?} is not a CSI plugin. Only CSI plugin can provision a claim with a datasource",
                plugin.name()
            );
            return provisioning_failed(executor, &claim, message).await;
        }
        let repeat = annotation(&claim.metadata, ANN_STORAGE_PROVISIONER)
            == Some(class.provisioner.as_str());
        let claim = set_claim_provisioner(executor, &claim, &class.provisioner).await?;
        let pv_name = provisioned_volume_name(&claim);
        let existing = read_volume(executor, &VolumeName::new(&pv_name)).await?;
        if existing.is_some() {
            tracing::debug!(volume = %pv_name, "volume already provisioned");
            return Ok(());
        }
        if !self.still_wants_provisioning(&claim) {
            tracing::debug!(volume = %pv_name, "claim gone or bound meanwhile, nothing to provision");
            return Ok(());
        }
        if repeat && !server_still_wants_provisioning(executor, &claim).await? {
            tracing::debug!(volume = %pv_name, "claim gone or bound on the server, nothing to provision");
            return Ok(());
        }
        let request = match self.provision_request(&claim, &class, plugin.as_ref(), &pv_name) {
            Ok(request) => request,
            Err(message) => return provisioning_failed(executor, &claim, message).await,
        };
        let volume = match plugin.provision(&request).await {
            Ok(volume) => volume,
            Err(PluginError::Setup(message)) => {
                let message = format!("Failed to create provisioner: {message}");
                return provisioning_failed(executor, &claim, message).await;
            }
            Err(error) => {
                reschedule_provisioning(executor, &claim).await;
                let message =
                    format!("Failed to provision volume with StorageClass {class_name:?}: {error}");
                return provisioning_failed(executor, &claim, message).await;
            }
        };
        let volume = complete_volume(volume, &claim, &pv_name, plugin.name());
        tracing::info!(volume = %pv_name, "storage provisioned");
        self.save_provisioned(executor, &claim, &volume, plugin.name())
            .await;
        Ok(())
    }

    /// Whether the claim, as the store knows it now, still waits for
    /// a volume: the same claim (by UID), naming none. A provisioning
    /// decided from an older copy, after its volume was made and released
    /// again (the claim deleted, or bound to another volume), must not
    /// make that volume a second time; the store is never older than the
    /// decision that released it (a new leader lists every kind again
    /// before it acts).
    fn still_wants_provisioning(&self, claim: &PersistentVolumeClaim) -> bool {
        self.binder
            .store
            .claim(&ObjectKey::of(claim))
            .is_some_and(|now| still_waits(&now, claim))
    }

    /// What the plugin is asked for: the class's policy, parameters and
    /// mount options, and the node the scheduler selected. Fails, with the
    /// event's message, on mount options the plugin does not support or a
    /// selected node that does not exist.
    fn provision_request(
        &self,
        claim: &Arc<PersistentVolumeClaim>,
        class: &StorageClass,
        plugin: &dyn VolumePlugin,
        pv_name: &str,
    ) -> std::result::Result<ProvisionRequest, String> {
        let class_name = class.metadata.name.as_deref().unwrap_or("");
        let mount_options = class.mount_options.clone().unwrap_or_default();
        if !mount_options.is_empty() && !plugin.supports_mount_options() {
            return Err(format!(
                "Mount options are not supported by the provisioner but StorageClass {class_name:?} has mount options [{}]",
                mount_options.join(" ")
            ));
        }
        let selected_node = match annotation(&claim.metadata, ANN_SELECTED_NODE) {
            None => None,
            Some(node) => match self.binder.nodes.get(&ObjectKey::cluster(node)) {
                Some(node) => Some(node),
                None => {
                    return Err(format!(
                        "Failed to get target node: node {node:?} not found"
                    ));
                }
            },
        };
        Ok(ProvisionRequest {
            pv_name: pv_name.to_string(),
            claim: PersistentVolumeClaim::clone(claim),
            reclaim_policy: class
                .reclaim_policy
                .as_deref()
                .map_or(ReclaimPolicy::Delete, ReclaimPolicy::parse),
            parameters: class.parameters.clone().unwrap_or_default(),
            mount_options,
            selected_node,
        })
    }

    /// Creates the provisioned volume's object and says so; when it cannot
    /// be created, deletes the storage again (the next sync provisions
    /// anew, without backoff, as upstream).
    async fn save_provisioned(
        &self,
        executor: &PvExecutor,
        claim: &Arc<PersistentVolumeClaim>,
        volume: &PersistentVolume,
        plugin: &str,
    ) {
        let pv_name = VolumeName::of(volume);
        let succeeded = format!("Successfully provisioned volume {pv_name} using {plugin}");
        let error = match self.create_provisioned_volume(executor, volume).await {
            Ok(()) => {
                tell(
                    executor,
                    claim,
                    EventType::Normal,
                    reasons::PROVISIONING_SUCCEEDED,
                    succeeded,
                )
                .await;
                return;
            }
            Err(error) if error.is_refused_as_follower() => {
                // The lease is lost: the next leader may have found the
                // object of an unanswered attempt and acted on it already.
                // Its storage is the next leader's to keep or reclaim.
                tracing::warn!(volume = %pv_name, %error, "lease lost while creating the volume object, its storage is kept");
                return;
            }
            Err(error) => error,
        };
        let key = ObjectKey::of(claim.as_ref());
        let failed = |what: String| (EventType::Warning, reasons::PROVISIONING_FAILED, what);
        let stored = stored_after_all(executor, claim, &pv_name, &error).await;
        let (event_type, reason, message) = match &stored {
            Stored::Yes => (
                EventType::Normal,
                reasons::PROVISIONING_SUCCEEDED,
                succeeded,
            ),
            Stored::Unknown(read) => failed(format!(
                "Error creating provisioned PV object for claim {key}: {error}. Keeping the volume: cannot tell whether its object was stored ({read})."
            )),
            Stored::No => {
                tracing::warn!(volume = %pv_name, %error, "volume object not created, deleting its storage");
                failed(format!(
                    "Error creating provisioned PV object for claim {key}: {error}. Deleting the volume."
                ))
            }
        };
        tell(executor, claim, event_type, reason, message).await;
        if matches!(stored, Stored::No) {
            self.clean_up_provisioned(executor, claim, volume).await;
        }
    }

    /// Creates the volume object, trying again a few times; one that
    /// already exists (an earlier attempt got through unanswered) counts as
    /// created. The API server drops status on create, so Bound is written
    /// right after, sparing the claim a round of being offered a Pending
    /// volume.
    async fn create_provisioned_volume(
        &self,
        executor: &PvExecutor,
        volume: &PersistentVolume,
    ) -> Result<()> {
        let retry = self.binder.settings.provision_retry;
        let mut attempt = 1;
        loop {
            let mut plan = PvPlan::default();
            let created = plan.create(volume.clone());
            match carry_out(executor, plan).await {
                Ok(_) => {
                    tracing::info!(attempt, "provisioned volume object created");
                    if let Some(created) = created.answered() {
                        let mut bound = PvPlan::default();
                        changes::set_volume_phase(&mut bound, created, VolumePhase::Bound, None);
                        if let Err(error) = carry_out(executor, bound).await {
                            tracing::debug!(%error, "setting the new volume Bound failed; its sync will");
                        }
                    }
                    return Ok(());
                }
                Err(Error::Api {
                    source: kube::Error::Api(status),
                    ..
                }) if status.is_already_exists() => {
                    tracing::info!(attempt, "provisioned volume object already exists");
                    return Ok(());
                }
                Err(error) if attempt < retry.attempts => {
                    tracing::debug!(attempt, %error, "creating the volume object failed, retrying");
                    attempt += 1;
                    tokio::time::sleep(retry.interval).await;
                }
                Err(error) => return Err(error),
            }
        }
    }

    /// Deletes storage whose volume object could not be created, trying a
    /// few times; reports storage left behind.
    async fn clean_up_provisioned(
        &self,
        executor: &PvExecutor,
        claim: &Arc<PersistentVolumeClaim>,
        volume: &PersistentVolume,
    ) {
        let retry = self.binder.settings.provision_retry;
        let mut attempt = 1;
        let failure = loop {
            match delete_storage(&self.binder.settings.plugins, volume).await {
                Ok(Deletion::Deleted) => {
                    tracing::info!(attempt, "provisioned storage deleted again");
                    return;
                }
                Ok(Deletion::External) => {
                    // A plugin provisioned it, so a plugin deletes it; an
                    // external deleter here would be a bug.
                    tracing::error!("no in-process deleter for provisioned storage");
                    return;
                }
                Err(error) if attempt < retry.attempts => {
                    tracing::debug!(attempt, %error, "deleting provisioned storage failed, retrying");
                    attempt += 1;
                    tokio::time::sleep(retry.interval).await;
                }
                Err(error) => break error,
            }
        };
        let message = format!(
            "Error cleaning provisioned volume for claim {}: {failure}. Please delete manually.",
            ObjectKey::of(claim.as_ref())
        );
        tracing::error!(%message, "provisioned storage leaked");
        tell(
            executor,
            claim,
            EventType::Warning,
            reasons::PROVISIONING_CLEANUP_FAILED,
            message,
        )
        .await;
    }
}

/// Hands the claim to an external provisioner through its
/// storage-provisioner annotations (the CSI driver's name when the class's
/// in-tree plugin migrated to it), and says so in an event (every time it
/// runs, as upstream: a claim waiting long shows it).
#[tracing::instrument(skip_all, fields(claim = %ObjectKey::of(claim.as_ref()), operation = "provision"))]
async fn provision_external(
    executor: &PvExecutor,
    claim: &Arc<PersistentVolumeClaim>,
    provisioner: &str,
) -> Result<()> {
    let claim = set_claim_provisioner(executor, claim, provisioner).await?;
    let message = format!(
        "Waiting for a volume to be created either by the external provisioner '{provisioner}' or manually by the system administrator. If volume creation is delayed, please verify that the provisioner is running and correctly registered."
    );
    tell(
        executor,
        &claim,
        EventType::Normal,
        reasons::EXTERNAL_PROVISIONING,
        message,
    )
    .await;
    Ok(())
}

/// Writes the claim's provisioner ([`hand_to_provisioner`]); a failed
/// write is told on the claim (`Error saving claim: ...`) and fails the
/// operation. Returns the claim as written.
async fn set_claim_provisioner(
    executor: &PvExecutor,
    claim: &Arc<PersistentVolumeClaim>,
    provisioner: &str,
) -> Result<Arc<PersistentVolumeClaim>> {
    let mut plan = PvPlan::default();
    let handed = hand_to_provisioner(&mut plan, claim, provisioner);
    if Arc::ptr_eq(&handed, claim) {
        return Ok(handed);
    }
    match carry_out(executor, plan).await {
        Ok(_) => {
            tracing::info!(provisioner, "claim handed to its provisioner");
            Ok(executor
                .writers()
                .get::<PersistentVolumeClaim>()?
                .stored(&ObjectKey::of(claim.as_ref()))
                .unwrap_or(handed))
        }
        Err(error) => {
            let message = format!("Error saving claim: {error}");
            tell(
                executor,
                claim,
                EventType::Warning,
                reasons::PROVISIONING_FAILED,
                message,
            )
            .await;
            Err(error)
        }
    }
}

/// Whether the claim, as the API server has it now, still waits for a
/// volume. Asked only when the claim was handed to this provisioner before
/// (a retry, a restart, a new leader): then no claim write confirmed it,
/// and with its volume not found, the claim may be gone with it (a volume
/// is released and deleted only after its claim is gone, so this read,
/// made after the volume's, sees that).
async fn server_still_wants_provisioning(
    executor: &PvExecutor,
    claim: &PersistentVolumeClaim,
) -> Result<bool> {
    let now = read_claim(executor, &ObjectKey::of(claim)).await?;
    Ok(now.is_some_and(|now| still_waits(&now, claim)))
}

/// Whether the volume object whose create failed (`error`) exists after
/// all, so that its storage must be kept: an attempt stored but unanswered,
/// with every retry failing before the store. When the server cannot be
/// asked, the storage is kept too: the next attempt finds the object, or
/// provisions the same storage again under its deterministic name.
async fn stored_after_all(
    executor: &PvExecutor,
    claim: &PersistentVolumeClaim,
    pv_name: &VolumeName,
    error: &Error,
) -> Stored {
    match read_volume(executor, pv_name).await {
        Ok(Some(stored)) if is_volume_bound_to_claim(&stored, claim) => {
            tracing::info!(volume = %pv_name, %error, "volume object stored after all, keeping its storage");
            Stored::Yes
        }
        Ok(_) => Stored::No,
        Err(read) => {
            tracing::warn!(volume = %pv_name, %error, %read, "cannot tell whether the volume object was stored, keeping its storage");
            Stored::Unknown(read)
        }
    }
}

/// Tells a ProvisioningFailed Warning and fails the operation (so it backs
/// off).
async fn provisioning_failed(
    executor: &PvExecutor,
    claim: &Arc<PersistentVolumeClaim>,
    message: String,
) -> Result<()> {
    tracing::warn!(%message, "provisioning failed");
    tell(
        executor,
        claim,
        EventType::Warning,
        reasons::PROVISIONING_FAILED,
        message.clone(),
    )
    .await;
    Err(Error::Plugin {
        action: format!(
            "provisioning a volume for claim {}",
            ObjectKey::of(claim.as_ref())
        ),
        source: PluginError::Failed(message),
    })
}

/// Removes the node the scheduler selected from a claim whose
/// provisioning failed, so the scheduler picks again (a node may lack what
/// the plugin needs).
async fn reschedule_provisioning(executor: &PvExecutor, claim: &Arc<PersistentVolumeClaim>) {
    if annotation(&claim.metadata, ANN_SELECTED_NODE).is_none() {
        return;
    }
    let mut plan = PvPlan::default();
    plan.update(claim, Part::Spec, "no selected node", |changed| {
        changed
            .metadata
            .annotations
            .as_mut()
            .and_then(|annotations| annotations.remove(ANN_SELECTED_NODE))
            .is_some()
    });
    match carry_out(executor, plan).await {
        Ok(_) => tracing::info!("selected node removed, the scheduler picks again"),
        Err(error) => tracing::debug!(%error, "removing the selected node failed"),
    }
}

/// Carries out one event about the claim.
async fn tell(
    executor: &PvExecutor,
    claim: &PersistentVolumeClaim,
    event_type: EventType,
    reason: &str,
    message: String,
) {
    let mut plan = PvPlan::default();
    plan.event(claim, event_type, reason, message);
    if let Err(error) = carry_out(executor, plan).await {
        tracing::debug!(%error, "an event could not be recorded");
    }
}

/// Whether a volume object whose create failed is on the server after all.
enum Stored {
    /// It is, for this claim: its create got through unanswered.
    Yes,
    /// The server could not be asked.
    Unknown(Error),
    /// It is not.
    No,
}

/// The plugin's volume made ready to create: named, pre-bound to the claim
/// by the controller, of the claim's class, marked with its provisioner, and
/// protected by the deletion finalizer when its policy is Delete.
fn complete_volume(
    mut volume: PersistentVolume,
    claim: &PersistentVolumeClaim,
    pv_name: &str,
    plugin: &str,
) -> PersistentVolume {
    if volume.metadata.name.as_deref().unwrap_or("").is_empty() {
        volume.metadata.name = Some(pv_name.to_string());
    }
    let class = claim_class(claim);
    let spec = volume.spec.get_or_insert_with(Default::default);
    spec.claim_ref = Some(claim_reference(claim));
    spec.storage_class_name = (!class.is_empty()).then(|| class.to_string());
    let deletes = spec
        .persistent_volume_reclaim_policy
        .as_deref()
        .map(ReclaimPolicy::parse)
        == Some(ReclaimPolicy::Delete);
    set_annotation(&mut volume.metadata.annotations, ANN_BOUND_BY_CONTROLLER);
    volume
        .metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(ANN_DYNAMICALLY_PROVISIONED.to_string(), plugin.to_string());
    if deletes {
        let finalizers = volume.metadata.finalizers.get_or_insert_with(Vec::new);
        if !finalizers.iter().any(|f| f == FINALIZER_PV_CONTROLLER) {
            finalizers.push(FINALIZER_PV_CONTROLLER.to_string());
        }
    }
    volume.status.get_or_insert_with(Default::default).phase =
        Some(VolumePhase::Bound.as_str().to_string());
    volume
}
