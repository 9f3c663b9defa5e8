//! The ResourceClaim controller's own words: its name and event source,
//! its field manager, event reasons and limits. The annotations and the
//! finalizer it shares with Kubernetes are in the `k8s_names` crate.

/// The controller's name in `--controllers` and in the metrics, as
/// kube-controller-manager's.
pub(crate) const NAME: &str = k8s_names::RESOURCE_CLAIM_CONTROLLER;

/// The event source (`source.component`) of the controller, as upstream's
/// `resource_claim` recorder.
pub(crate) const COMPONENT: &str = "resource_claim";

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
