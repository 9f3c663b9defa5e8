//! The names on Kubernetes objects that pv-controller reads and writes,
//! spelled once: upstream's annotation keys, finalizers and controller
//! names, and the few annotations this controller adds beside them.
//!
//! The controllers, the dry run, the test builders (testkit) and the
//! in-memory API server (memapi) all take them from here, so that a reader
//! sees the whole vocabulary at once and a typo in a key is a compile error
//! rather than a silent mismatch. Event reasons and other words of one
//! controller stay with that controller.

// Volumes and claims (upstream's pkg/controller/volume/persistentvolume).

/// On a claim: the controller finished binding it (value `yes`). Its absence
/// makes a claim "unbound" even when `spec.volumeName` is set.
pub const ANN_BIND_COMPLETED: &str = "pv.kubernetes.io/bind-completed";

/// On a volume or claim: the binding was made by the controller, not
/// pre-bound by a user, so the controller may undo it.
pub const ANN_BOUND_BY_CONTROLLER: &str = "pv.kubernetes.io/bound-by-controller";

/// On a volume: the provisioner (plugin or external) that created it.
pub const ANN_DYNAMICALLY_PROVISIONED: &str = "pv.kubernetes.io/provisioned-by";

/// On a claim: the provisioner asked to provision it (GA key, written together
/// with the beta key).
pub const ANN_STORAGE_PROVISIONER: &str = "volume.kubernetes.io/storage-provisioner";

/// On a claim: the provisioner asked to provision it (beta key, still read by
/// external provisioners).
pub const ANN_BETA_STORAGE_PROVISIONER: &str = "volume.beta.kubernetes.io/storage-provisioner";

/// On a claim: the node the scheduler picked for a WaitForFirstConsumer
/// claim; its presence asks for provisioning on that node.
pub const ANN_SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";

/// On a volume or claim: the CSI driver that took over an in-tree plugin; the
/// controller leaves reclaim of such volumes to that driver.
pub const ANN_MIGRATED_TO: &str = "pv.kubernetes.io/migrated-to";

/// On a volume or claim: the storage class, in the beta annotation that takes
/// precedence over `spec.storageClassName`.
pub const ANN_BETA_STORAGE_CLASS: &str = "volume.beta.kubernetes.io/storage-class";

/// On a volume: the capacity the claim had before a resize; a claim bound to
/// such a volume reports this capacity.
pub const ANN_PRE_RESIZE_CAPACITY: &str = "volume.alpha.kubernetes.io/pre-resize-capacity";

/// The value the controller writes into its boolean annotations.
pub const ANN_VALUE_YES: &str = "yes";

/// On a StorageClass: marks the cluster's default class (GA key).
pub const ANN_IS_DEFAULT_CLASS: &str = "storageclass.kubernetes.io/is-default-class";

/// On a StorageClass: marks the cluster's default class (beta key).
pub const ANN_BETA_IS_DEFAULT_CLASS: &str = "storageclass.beta.kubernetes.io/is-default-class";

/// Finalizer on volumes the controller provisioned with reclaim policy
/// Delete: the volume object stays until its storage is deleted.
pub const FINALIZER_PV_CONTROLLER: &str = "kubernetes.io/pv-controller";

/// Finalizer owned by external provisioners; the controller only removes it
/// from volumes whose storage it deletes itself.
pub const FINALIZER_EXTERNAL_PROVISIONER: &str =
    "external-provisioner.volume.kubernetes.io/finalizer";

/// Finalizer the API server's admission puts on every volume: the volume
/// object stays while a claim is bound to it.
pub const FINALIZER_PV_PROTECTION: &str = "kubernetes.io/pv-protection";

/// Finalizer the API server's admission puts on every claim: the claim
/// object stays while a pod uses it.
pub const FINALIZER_PVC_PROTECTION: &str = "kubernetes.io/pvc-protection";

// ResourceClaims (resource.k8s.io, upstream's pkg/controller/resourceclaim).

/// On a ResourceClaim generated for a pod: the
/// `pod.spec.resourceClaims[].name` it was made for (upstream's
/// `podResourceClaimAnnotation`).
pub const ANN_POD_CLAIM_NAME: &str = "resource.kubernetes.io/pod-claim-name";

/// On a ResourceClaim (`"true"`): the scheduler made it for a pod's extended
/// resources (upstream's `ExtendedResourceClaimAnnotation`).
pub const ANN_EXTENDED_RESOURCE_CLAIM: &str = "resource.kubernetes.io/extended-resource-claim";

/// Finalizer the scheduler puts on a ResourceClaim it allocated; while
/// present the controller clears the allocation once nothing uses the claim.
pub const FINALIZER_RESOURCE_DELETE_PROTECTION: &str = "resource.kubernetes.io/delete-protection";

// The controllers' names in kube-controller-manager's `--controllers` (and
// in the metrics).

/// The PersistentVolume controller.
pub const PERSISTENTVOLUME_BINDER_CONTROLLER: &str = "persistentvolume-binder-controller";

/// The generic ephemeral volume controller.
pub const EPHEMERAL_VOLUME_CONTROLLER: &str = "ephemeral-volume-controller";

/// The ResourceClaim controller.
pub const RESOURCE_CLAIM_CONTROLLER: &str = "resourceclaim-controller";

// This controller's own annotations (pv-controller.k8s.io), which upstream
// does not have.

/// On a volume: the controller deleted its storage (value `yes`). Written
/// with the removal of the controller's finalizer, so a volume object that
/// lingers afterwards (other finalizers) is not deleted twice, while one
/// that never had the finalizer (provisioned before it existed) still is.
pub const ANN_STORAGE_DELETED: &str = "pv-controller.k8s.io/storage-deleted";

/// On a recycler pod: the UID of the volume it scrubs, so that a restarted
/// controller can tell its own pod from a stale one.
pub const ANN_RECYCLED_VOLUME_UID: &str = "pv-controller.k8s.io/recycled-volume-uid";

/// On a recycler pod: the UID of the claim whose release it scrubs; with
/// [`ANN_RECYCLED_VOLUME_UID`] it names one release of one volume.
pub const ANN_RELEASED_CLAIM_UID: &str = "pv-controller.k8s.io/released-claim-uid";

/// On a volume being recycled: the UID of the recycler pod this controller
/// created for it, written before the pod is waited for. Only a pod of this
/// UID is taken as proof of the scrub.
pub const ANN_RECYCLER_POD_UID: &str = "pv-controller.k8s.io/recycler-pod-uid";
