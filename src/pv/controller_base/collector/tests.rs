use super::*;
use crate::runtime::metrics::Metrics;

#[test]
fn the_gauges_are_read_at_each_scrape() {
    let metrics = Metrics::new().unwrap();
    let store = Arc::new(PvStore::default());
    let collector =
        StateCollector::new(Arc::clone(&store), WorkQueue::new(), WorkQueue::new(), || 3).unwrap();
    metrics.register(Box::new(collector)).unwrap();
    let text = metrics.render().unwrap();
    assert!(text.contains("pv_controller_queue_depth{queue=\"volume\"} 0"));
    assert!(text.contains("pv_controller_waiting_claims 3"), "{text}");
    assert!(
        text.contains("pv_controller_store_objects{kind=\"persistentvolume\"} 0"),
        "{text}"
    );
}
