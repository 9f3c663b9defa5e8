//! The names the ResourceClaim controller shares with Kubernetes: its
//! event source, the annotation on generated claims, the finalizer of
//! allocated claims, event reasons and limits.

/// The controller's name in `--controllers` and in the metrics, as
/// kube-controller-manager's.
pub const NAME: &str = "resourceclaim-controller";

/// The event source (`source.component`) of the controller, as upstream's
/// `resource_claim` recorder.
pub(crate) const COMPONENT: &str = "resource_claim";

/// Annotation of a claim generated for a pod: its value is the
/// `pod.spec.resourceClaims[].name` the claim was made for. Internal to the
/// controller (upstream's `podResourceClaimAnnotation`).
pub(crate) const ANN_POD_CLAIM_NAME: &str = "resource.kubernetes.io/pod-claim-name";

/// Annotation (`"true"`) of a claim the scheduler made for a pod's
/// extended resources (upstream's `ExtendedResourceClaimAnnotation`).
pub(crate) const ANN_EXTENDED_RESOURCE_CLAIM: &str =
    "resource.kubernetes.io/extended-resource-claim";

/// Finalizer the scheduler puts on a claim it allocated; while present the
/// controller clears the allocation once nothing uses the claim.
pub(crate) const FINALIZER: &str = "resource.kubernetes.io/delete-protection";

/// The field manager of the pod status writes (server-side apply), as
/// upstream's.
pub(crate) const FIELD_MANAGER: &str = "ResourceClaimController";

/// Warning event on a pod whose claim could not be created or found.
pub(crate) const REASON_FAILED_CREATION: &str = "FailedResourceClaimCreation";

/// The most consumers a claim may list in `status.reservedFor`
/// (`ResourceClaimReservedForMaxSize`).
pub(crate) const RESERVED_FOR_MAX: usize = 256;

/// The longest `generateName` the controller sends: 63 characters of a
/// name less the 5 random ones the API server appends, less one so a
/// prefix is never cut by the server (which would cut the claim's name).
pub(crate) const MAX_GENERATE_NAME: usize = 57;

/// How many deleted pods' UIDs are remembered, so a reservation of a pod
/// known to be gone is removed without asking the API server.
pub(crate) const DELETED_PODS_REMEMBERED: usize = 500;
