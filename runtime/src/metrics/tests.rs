use super::*;

#[test]
fn writes_are_counted_by_outcome() {
    let metrics = Metrics::new().unwrap();
    let pv = "persistentvolume-binder-controller";
    metrics.api_write(
        pv,
        "persistentvolumes",
        "update",
        "status",
        WriteOutcome::Ok,
    );
    metrics.api_write(
        pv,
        "persistentvolumes",
        "update",
        "status",
        WriteOutcome::Conflict,
    );
    metrics.api_write(pv, "persistentvolumes", "delete", "", WriteOutcome::Error);
    metrics.api_write("other", "pods", "create", "", WriteOutcome::Ok);
    assert_eq!(metrics.api_writes_to("persistentvolumes", "status"), 2);
    assert_eq!(metrics.api_writes_to("persistentvolumes", ""), 1);
    assert_eq!(metrics.api_writes_by(pv, "persistentvolumes", "update"), 2);
    assert_eq!(metrics.api_writes_by("other", "pods", "create"), 1);
    assert_eq!(metrics.api_writes_by(pv, "pods", "create"), 0);
    let text = metrics.render().unwrap();
    assert!(text.contains(
            "pv_controller_api_conflicts_total{controller=\"persistentvolume-binder-controller\",resource=\"persistentvolumes\",subresource=\"status\"} 1"
        ));
}

#[test]
fn events_are_counted_by_outcome_and_every_outcome_is_exported() {
    let metrics = Metrics::new().unwrap();
    metrics.event(EventOutcome::Rejected);
    metrics.event(EventOutcome::Rejected);
    assert_eq!(metrics.events_with_outcome(EventOutcome::Rejected), 2);
    assert_eq!(metrics.events_with_outcome(EventOutcome::Created), 0);
    let text = metrics.render().unwrap();
    assert!(text.contains("pv_controller_events_total{outcome=\"rejected\"} 2"));
    for outcome in EventOutcome::ALL {
        let line = format!(
            "pv_controller_events_total{{outcome=\"{}\"}}",
            outcome.as_str()
        );
        assert!(text.contains(&line), "{line} missing:\n{text}");
    }
}
