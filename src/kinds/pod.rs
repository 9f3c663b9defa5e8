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
mod tests {
    use k8s_openapi::api::core::v1::{
        Container, ContainerState, ContainerStateTerminated, PodSpec, PodStatus, Volume,
    };

    use super::*;

    #[test]
    fn a_trimmed_pod_keeps_what_the_controllers_read() {
        let mut pod = Pod {
            spec: Some(PodSpec {
                containers: vec![Container::default()],
                node_name: Some("n1".into()),
                volumes: Some(vec![Volume::default()]),
                ..PodSpec::default()
            }),
            status: Some(PodStatus {
                phase: Some("Running".into()),
                container_statuses: Some(vec![ContainerStatus {
                    name: "c".into(),
                    image: "big/image:tag".into(),
                    state: Some(ContainerState {
                        terminated: Some(ContainerStateTerminated::default()),
                        ..ContainerState::default()
                    }),
                    ..ContainerStatus::default()
                }]),
                ..PodStatus::default()
            }),
            ..Pod::default()
        };
        pod.metadata.labels = Some([("a".to_string(), "b".to_string())].into());
        POD.trim(&mut pod);
        let spec = pod.spec.as_ref().expect("spec");
        assert!(spec.containers.is_empty());
        assert_eq!(spec.node_name.as_deref(), Some("n1"));
        assert_eq!(spec.volumes.as_ref().map(Vec::len), Some(1));
        assert_eq!(pod.metadata.labels, None);
        assert_eq!(PodPhase::of(&pod), Some(PodPhase::Running));
        let status = &pod.status.as_ref().expect("status").container_statuses;
        let container = &status.as_ref().expect("statuses")[0];
        assert_eq!(container.name, "c");
        assert!(container.image.is_empty());
        assert!(container.state.is_some());
    }

    #[test]
    fn only_succeeded_and_failed_pods_are_terminal() {
        let in_phase = |phase: &str| Pod {
            status: Some(PodStatus {
                phase: Some(phase.into()),
                ..PodStatus::default()
            }),
            ..Pod::default()
        };
        for (phase, terminal) in [
            ("Pending", false),
            ("Running", false),
            ("Succeeded", true),
            ("Failed", true),
            ("Unknown", false),
            ("Other", false),
        ] {
            assert_eq!(is_pod_terminal(&in_phase(phase)), terminal, "{phase}");
        }
        assert_eq!(PodPhase::Succeeded.as_str(), "Succeeded");
        assert!(!is_pod_terminal(&Pod::default()));
    }
}
