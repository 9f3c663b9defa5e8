use super::*;

#[test]
fn the_samples_read_as_their_types() {
    let volume: PersistentVolume = serde_json::from_str(SAMPLE_VOLUME).expect("volume");
    let claim: PersistentVolumeClaim = serde_json::from_str(SAMPLE_CLAIM).expect("claim");
    let expected = [
        serde_json::to_vec(&volume).expect("volume"),
        serde_json::to_vec(&claim).expect("claim"),
    ]
    .concat();
    assert_eq!(dictionary(), expected.as_slice());
}
