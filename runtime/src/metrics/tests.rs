use super::*;

/// The sum of the series of `name` whose labels include every pair of
/// `labels`, as `/metrics` shows them.
pub(crate) fn summed(metrics: &Metrics, name: &str, labels: &[(&str, &str)]) -> u64 {
    let wanted: Vec<String> = labels.iter().map(|(k, v)| format!("{k}=\"{v}\"")).collect();
    let total: f64 = metrics
        .render()
        .unwrap()
        .lines()
        .filter_map(|line| line.strip_prefix(name)?.strip_prefix('{')?.split_once("} "))
        .filter(|(set, _)| {
            let set: Vec<&str> = set.split(',').collect();
            wanted.iter().all(|pair| set.contains(&pair.as_str()))
        })
        .map(|(_, value)| value.trim().parse::<f64>().unwrap())
        .sum();
    total as u64
}

/// Writes counted to `resource`/`subresource`, whatever their controller,
/// verb and outcome.
fn writes_to(metrics: &Metrics, resource: &str, subresource: &str) -> u64 {
    summed(
        metrics,
        "pv_controller_api_writes_total",
        &[("resource", resource), ("subresource", subresource)],
    )
}

/// Writes counted by `controller` to `resource` with `verb`, whatever
/// their subresource and outcome.
pub(crate) fn writes_by(metrics: &Metrics, controller: &str, resource: &str, verb: &str) -> u64 {
    summed(
        metrics,
        "pv_controller_api_writes_total",
        &[
            ("controller", controller),
            ("resource", resource),
            ("verb", verb),
        ],
    )
}

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
    assert_eq!(writes_to(&metrics, "persistentvolumes", "status"), 2);
    assert_eq!(writes_to(&metrics, "persistentvolumes", ""), 1);
    assert_eq!(writes_by(&metrics, pv, "persistentvolumes", "update"), 2);
    assert_eq!(writes_by(&metrics, "other", "pods", "create"), 1);
    assert_eq!(writes_by(&metrics, pv, "pods", "create"), 0);
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
    assert_eq!(
        summed(
            &metrics,
            "pv_controller_events_total",
            &[("outcome", "rejected")]
        ),
        2
    );
    assert_eq!(
        summed(
            &metrics,
            "pv_controller_events_total",
            &[("outcome", "created")]
        ),
        0
    );
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
