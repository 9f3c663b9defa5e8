//! The PersistentVolume controller's own words: its event source, the
//! prefix of in-tree plugin names and the reasons of its events, with
//! upstream's spelling. The annotation keys and finalizers it shares with
//! the rest of Kubernetes are in the `k8s_names` crate.
//!
//! They live in one place so that a reader can see the whole vocabulary at once,
//! and so that a typo in a reason is a compile error rather than a silent mismatch.

/// Name under which the controller reports events and identifies itself.
pub(crate) const CONTROLLER_NAME: &str = "persistentvolume-controller";

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
