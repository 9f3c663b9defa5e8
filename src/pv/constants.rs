//! The names the PersistentVolume controller shares with the rest of Kubernetes:
//! annotation keys, finalizers, event reasons and the controller's own identity.
//!
//! They live in one place so that a reader can see the whole vocabulary at once,
//! and so that a typo in a key is a compile error rather than a silent mismatch.

/// Name under which the controller reports events and identifies itself.
pub(crate) const CONTROLLER_NAME: &str = "persistentvolume-controller";

/// On a claim: the controller finished binding it (value `yes`). Its absence
/// makes a claim "unbound" even when `spec.volumeName` is set.
pub(crate) const ANN_BIND_COMPLETED: &str = "pv.kubernetes.io/bind-completed";

/// On a volume or claim: the binding was made by the controller, not
/// pre-bound by a user, so the controller may undo it.
pub(crate) const ANN_BOUND_BY_CONTROLLER: &str = "pv.kubernetes.io/bound-by-controller";

/// On a claim: the node the scheduler picked for a WaitForFirstConsumer
/// claim; its presence asks for provisioning on that node.
pub(crate) const ANN_SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";

/// On a volume: the provisioner (plugin or external) that created it.
pub(crate) const ANN_DYNAMICALLY_PROVISIONED: &str = "pv.kubernetes.io/provisioned-by";

/// On a claim: the provisioner asked to provision it (beta key, still read by
/// external provisioners).
pub(crate) const ANN_BETA_STORAGE_PROVISIONER: &str =
    "volume.beta.kubernetes.io/storage-provisioner";

/// On a claim: the provisioner asked to provision it (GA key, written together
/// with the beta key).
pub(crate) const ANN_STORAGE_PROVISIONER: &str = "volume.kubernetes.io/storage-provisioner";

/// On a volume or claim: the CSI driver that took over an in-tree plugin; the
/// controller leaves reclaim of such volumes to that driver.
pub(crate) const ANN_MIGRATED_TO: &str = "pv.kubernetes.io/migrated-to";

/// On a volume or claim: the storage class, in the beta annotation that takes
/// precedence over `spec.storageClassName`.
pub(crate) const ANN_BETA_STORAGE_CLASS: &str = "volume.beta.kubernetes.io/storage-class";

/// On a volume: the capacity the claim had before a resize; a claim bound to
/// such a volume reports this capacity.
pub(crate) const ANN_PRE_RESIZE_CAPACITY: &str = "volume.alpha.kubernetes.io/pre-resize-capacity";

/// On a StorageClass: marks the cluster's default class (GA key).
pub(crate) const ANN_IS_DEFAULT_CLASS: &str = "storageclass.kubernetes.io/is-default-class";

/// On a StorageClass: marks the cluster's default class (beta key).
pub(crate) const ANN_BETA_IS_DEFAULT_CLASS: &str =
    "storageclass.beta.kubernetes.io/is-default-class";

/// The value the controller writes into its boolean annotations.
pub(crate) const ANN_VALUE_YES: &str = "yes";

/// Finalizer on volumes this controller provisioned with reclaim policy
/// Delete: the volume object stays until its storage is deleted.
pub(crate) const FINALIZER_PV_CONTROLLER: &str = "kubernetes.io/pv-controller";

/// Finalizer owned by external provisioners; the controller only removes it
/// from volumes whose storage it deletes itself.
pub(crate) const FINALIZER_EXTERNAL_PROVISIONER: &str =
    "external-provisioner.volume.kubernetes.io/finalizer";

/// On a volume: the controller deleted its storage (value `yes`). Written
/// with the removal of the controller's finalizer, so a volume object that
/// lingers afterwards (other finalizers) is not deleted twice, while one
/// that never had the finalizer (provisioned before it existed) still is.
pub(crate) const ANN_STORAGE_DELETED: &str = "pv-controller.k8s.io/storage-deleted";

/// Prefix of in-tree plugin names; a provisioner or deleter name without it is
/// served by an external program.
pub(crate) const IN_TREE_PLUGIN_PREFIX: &str = "kubernetes.io/";

/// Kubernetes event reasons the controller emits, with upstream's spelling.
pub(crate) mod reasons {
    /// A claim could not be bound (no volume, or volume bound elsewhere).
    pub(crate) const FAILED_BINDING: &str = "FailedBinding";
    /// A claim waits for a pod to use it before binding (WaitForFirstConsumer).
    pub(crate) const WAIT_FOR_FIRST_CONSUMER: &str = "WaitForFirstConsumer";
    /// A claim waits for the pods that use it to be scheduled.
    pub(crate) const WAIT_FOR_POD_SCHEDULED: &str = "WaitForPodScheduled";
    /// A requested volume or claim does not fit its counterpart.
    pub(crate) const VOLUME_MISMATCH: &str = "VolumeMismatch";
    /// A bound claim lost its volume.
    pub(crate) const CLAIM_LOST: &str = "ClaimLost";
    /// Two claims are bound to one volume; this one is the wrong one.
    pub(crate) const CLAIM_MISBOUND: &str = "ClaimMisbound";
    /// A released volume has a reclaim policy the controller does not know.
    pub(crate) const VOLUME_UNKNOWN_RECLAIM_POLICY: &str = "VolumeUnknownReclaimPolicy";
    /// Recycling a volume failed or was postponed.
    pub(crate) const VOLUME_FAILED_RECYCLE: &str = "VolumeFailedRecycle";
    /// A volume was recycled.
    pub(crate) const VOLUME_RECYCLED: &str = "VolumeRecycled";
    /// An event of the recycler pod, relayed to its volume.
    pub(crate) const RECYCLER_POD: &str = "RecyclerPod";
    /// Deleting a volume was postponed (still in use).
    pub(crate) const VOLUME_DELETE: &str = "VolumeDelete";
    /// Deleting a volume failed.
    pub(crate) const VOLUME_FAILED_DELETE: &str = "VolumeFailedDelete";
    /// Provisioning a volume for a claim failed.
    pub(crate) const PROVISIONING_FAILED: &str = "ProvisioningFailed";
    /// Storage provisioned for a claim could not be cleaned up.
    pub(crate) const PROVISIONING_CLEANUP_FAILED: &str = "ProvisioningCleanupFailed";
    /// A volume was provisioned for a claim.
    pub(crate) const PROVISIONING_SUCCEEDED: &str = "ProvisioningSucceeded";
    /// A claim waits for an external provisioner.
    pub(crate) const EXTERNAL_PROVISIONING: &str = "ExternalProvisioning";
    /// A volume the controller cannot read (unparsable capacity, unknown
    /// access mode, a claimRef without namespace or name); it is never
    /// offered to a claim and never reclaimed until fixed.
    pub(crate) const INVALID_VOLUME: &str = "InvalidVolume";
}
