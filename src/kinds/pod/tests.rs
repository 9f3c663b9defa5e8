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
