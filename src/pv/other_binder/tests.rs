use super::*;

fn writer(manager: &str, time: &str, fields: &[&str]) -> FieldManager {
    FieldManager {
        manager: manager.to_string(),
        operation: "Update".to_string(),
        time: Some(time.to_string()),
        fields: fields.iter().map(|f| (*f).to_string()).collect(),
        ..FieldManager::default()
    }
}

const EARLY: &str = "2026-01-01T00:00:00Z";
const LATE: &str = "2026-01-01T00:00:05Z";

#[test]
fn another_writer_of_a_changed_phase_is_named() {
    let managers = [
        writer("pv-controller", EARLY, &["status.phase"]),
        writer("kube-controller-manager", LATE, &["status.phase"]),
    ];
    let found = other_phase_writer(Some("Available"), Some("Bound"), &managers);
    assert_eq!(
        found.map(|m| m.manager.as_str()),
        Some("kube-controller-manager")
    );
}

#[test]
fn our_writes_and_unchanged_phases_are_not() {
    let ours = [
        writer("kube-controller-manager", EARLY, &["status.phase"]),
        writer("pv-controller", LATE, &["status.phase"]),
    ];
    assert!(other_phase_writer(Some("Available"), Some("Bound"), &ours).is_none());
    let theirs = [writer("kube-controller-manager", LATE, &["status.phase"])];
    assert!(
        other_phase_writer(Some("Bound"), Some("Bound"), &theirs).is_none(),
        "kube-controller-manager's other controllers (expansion) write beside the phase"
    );
    assert!(
        other_phase_writer(None, Some("Bound"), &theirs).is_none(),
        "nothing stored to compare with"
    );
    let same_second = [
        writer("kube-controller-manager", LATE, &["status.phase"]),
        writer("pv-controller", LATE, &["spec.claimRef"]),
    ];
    assert!(other_phase_writer(Some("Available"), Some("Bound"), &same_second).is_none());
    let labels_only = [writer("kubectl-label", LATE, &["metadata.labels"])];
    assert!(other_phase_writer(Some("Available"), Some("Bound"), &labels_only).is_none());
    assert!(other_phase_writer(Some("Available"), Some("Bound"), &[]).is_none());
}
