//! Pods as the process keeps them (the trim), and the readings of a pod
//! that more than one controller needs: the claims it uses (the pod index
//! by claim), its phase, whether it ended.

use k8s_openapi::api::core::v1::{ContainerStatus, Pod};

use crate::runtime::keys::ObjectKey;
use crate::runtime::kinds::{Shape, drop_managed_fields};

/// Pods: kept as [`trim`] keeps them, encoded whole for a write.
pub(crate) static POD: Shape<Pod> = Shape::new(trim);

/// Keeps what the controllers read of a pod: its identity and deletion,
/// its volumes (claims and ephemeral volumes), resource claims and node,
/// its phase, the claims recorded in its status, and the state of each
/// container of every kind (which tells whether it runs). The containers'
/// specs, labels, annotations, owners and conditions go.
fn trim(pod: &mut Pod) {
    drop_managed_fields(pod);
    pod.metadata.annotations = None;
    pod.metadata.labels = None;
    pod.metadata.owner_references = None;
    if let Some(spec) = pod.spec.as_mut() {
        spec.containers.clear();
        spec.init_containers = None;
        spec.ephemeral_containers = None;
    }
    if let Some(status) = pod.status.as_mut() {
        status.conditions = None;
        for statuses in [
            &mut status.container_statuses,
            &mut status.init_container_statuses,
            &mut status.ephemeral_container_statuses,
        ]
        .into_iter()
        .flatten()
        {
            for container in statuses.iter_mut() {
                *container = ContainerStatus {
                    name: std::mem::take(&mut container.name),
                    state: container.state.take(),
                    ..ContainerStatus::default()
                };
            }
        }
    }
}

/// The name of the pod index by the PersistentVolumeClaims a pod uses
/// (upstream's `podPVCIndex`): [`claims_of_pod`].
pub(crate) const PODS_BY_CLAIM: &str = "pods-by-claim";

/// The keys of the PersistentVolumeClaims `pod` uses: those its volumes
/// name, and the claim of each of its generic ephemeral volumes
/// (`<pod>-<volume>`).
pub(crate) fn claims_of_pod(pod: &Pod) -> Vec<ObjectKey> {
    let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
    let pod_name = pod.metadata.name.as_deref().unwrap_or_default();
    pod.spec
        .iter()
        .flat_map(|spec| spec.volumes.iter().flatten())
        .filter_map(|volume| {
            let name = match (&volume.persistent_volume_claim, &volume.ephemeral) {
                (Some(claim), _) => claim.claim_name.clone(),
                (None, Some(_)) => format!("{pod_name}-{}", volume.name),
                (None, None) => return None,
            };
            Some(ObjectKey::new(namespace, name))
        })
        .collect()
}

/// A pod's `status.phase`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PodPhase {
    /// Accepted, not all containers started yet.
    Pending,
    /// Bound to a node, a container runs.
    Running,
    /// Every container ended successfully and none will restart.
    Succeeded,
    /// Every container ended, at least one in failure.
    Failed,
    /// The node could not be reached.
    Unknown,
}

impl PodPhase {
    /// The phase of `pod`; `None` when it has none or one this controller
    /// does not know.
    pub(crate) fn of(pod: &Pod) -> Option<Self> {
        match pod.status.as_ref()?.phase.as_deref()? {
            "Pending" => Some(Self::Pending),
            "Running" => Some(Self::Running),
            "Succeeded" => Some(Self::Succeeded),
            "Failed" => Some(Self::Failed),
            "Unknown" => Some(Self::Unknown),
            _ => None,
        }
    }

    /// The phase as the API spells it.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "Pending",
            Self::Running => "Running",
            Self::Succeeded => "Succeeded",
            Self::Failed => "Failed",
            Self::Unknown => "Unknown",
        }
    }

    /// Whether a pod in this phase never runs again.
    pub(crate) fn is_terminal(self) -> bool {
        matches!(self, Self::Succeeded | Self::Failed)
    }
}

impl std::fmt::Display for PodPhase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Whether `pod` ended (Succeeded or Failed): it never runs again.
pub(crate) fn is_pod_terminal(pod: &Pod) -> bool {
    PodPhase::of(pod).is_some_and(PodPhase::is_terminal)
}

#[cfg(test)]
mod tests;
