use super::*;

#[test]
fn every_metric_registers_and_renders() {
    let metrics = Metrics::new().unwrap();
    let pv = PvMetrics::new(&metrics).unwrap();
    pv.retroactive_storage_class(true);
    pv.volume_operation_completed("", "delete", Duration::from_millis(300));
    pv.volume_operation_failed("kubernetes.io/nfs", "delete");
    let text = metrics.render().unwrap();
    assert!(text.contains("retroactive_storageclass_total 1"), "{text}");
    assert!(text.contains("retroactive_storageclass_errors_total 1"));
    assert!(text.contains(
            "volume_operation_total_seconds_bucket{operation_name=\"delete\",plugin_name=\"N/A\",le=\"0.5\"} 1"
        ));
    assert!(text.contains(
            "volume_operation_total_errors{operation_name=\"delete\",plugin_name=\"kubernetes.io/nfs\"} 1"
        ));
}
