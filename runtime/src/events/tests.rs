use super::*;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};

#[test]
fn reference_names_kind_version_and_incarnation() {
    let mut pv = PersistentVolume::default();
    pv.metadata.name = Some("pv1".into());
    pv.metadata.uid = Some("uid-pv1".into());
    pv.metadata.resource_version = Some("42".into());
    let reference = reference_of(&pv);
    assert_eq!(reference.kind.as_deref(), Some("PersistentVolume"));
    assert_eq!(reference.api_version.as_deref(), Some("v1"));
    assert_eq!(reference.name.as_deref(), Some("pv1"));
    assert_eq!(reference.namespace, None);
    assert_eq!(reference.uid.as_deref(), Some("uid-pv1"));
    assert_eq!(reference.resource_version.as_deref(), Some("42"));
    let mut claim = PersistentVolumeClaim::default();
    claim.metadata.namespace = Some("ns".into());
    assert_eq!(reference_of(&claim).namespace.as_deref(), Some("ns"));
}

#[test]
fn stamps_never_repeat() {
    let stamps = Stamps::default();
    let taken: Vec<Timestamp> = (0..1000).map(|_| stamps.next()).collect();
    assert!(taken.windows(2).all(|pair| pair[0] < pair[1]));
}

#[test]
fn a_recorder_needs_a_runtime() {
    let metrics = Arc::new(Metrics::new().expect("metrics"));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    let client = runtime.block_on(async { memapi::MemApi::new().client() });
    let error = EventRecorder::new(client, metrics, "test", "").expect_err("no runtime here");
    assert!(error.to_string().contains("event recorder"), "{error}");
}
