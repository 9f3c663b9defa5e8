use super::*;
use k8s_openapi::api::core::v1::{HostPathVolumeSource, PersistentVolumeSpec};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::jiff::Timestamp;

fn volume(name: &str, capacity: &str) -> PersistentVolume {
    PersistentVolume {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            uid: Some("uid-1".to_string()),
            ..Default::default()
        },
        spec: Some(PersistentVolumeSpec {
            capacity: Some([("storage".to_string(), Quantity(capacity.to_string()))].into()),
            ..Default::default()
        }),
        status: None,
    }
}

fn is_dns_subdomain(name: &str) -> bool {
    name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

#[test]
fn timeout_is_the_larger_of_minimum_and_size_rule() {
    assert_eq!(timeout_for(&volume("v", "1Gi"), 60, 30), 60);
    assert_eq!(timeout_for(&volume("v", "10Gi"), 60, 30), 300);
    assert_eq!(timeout_for(&volume("v", "2500Mi"), 60, 30), 60);
    assert_eq!(timeout_for(&volume("v", "100Gi"), 300, 30), 3000);
    assert_eq!(timeout_for(&volume("v", "1500Mi"), 0, 30), 30);
}

#[test]
fn short_names_are_kept_and_long_ones_hashed_into_a_valid_name() {
    assert_eq!(pod_name("pv1"), "recycler-for-pv1");
    let long_a = format!("{}a", "x".repeat(252));
    let long_b = format!("{}b", "x".repeat(252));
    let (a, b) = (pod_name(&long_a), pod_name(&long_b));
    assert_ne!(a, b);
    assert_eq!(a.len(), 253);
    assert!(is_dns_subdomain(&a), "{a}");
    // A cut that lands on a dot or dash must not leave an invalid label.
    let dotted = format!("{}.{}", "y".repeat(220), "z".repeat(32));
    let name = pod_name(&dotted);
    assert!(is_dns_subdomain(&name), "{name}");
    assert_eq!(pod_name(&dotted), name, "the name is deterministic");
}

#[test]
fn pod_gets_name_deadline_uid_and_volume_source() {
    let config = RecyclerPodConfig {
        template: default_template(),
        minimum_timeout: 60,
        timeout_increment: 30,
    };
    let source = Volume {
        host_path: Some(HostPathVolumeSource {
            path: "/tmp/data".to_string(),
            type_: None,
        }),
        ..Default::default()
    };
    let pod = build_pod(&config, &volume("pv1", "4Gi"), source);
    assert_eq!(pod.metadata.name.as_deref(), Some("recycler-for-pv1"));
    assert_eq!(pod.metadata.generate_name, None);
    assert_eq!(pod.metadata.namespace.as_deref(), Some("default"));
    let spec = pod.spec.expect("spec");
    assert_eq!(spec.active_deadline_seconds, Some(120));
    assert_eq!(spec.restart_policy.as_deref(), Some("Never"));
    let volumes = spec.volumes.expect("volumes");
    assert_eq!(volumes[0].name, "vol");
    assert_eq!(
        volumes[0].host_path.as_ref().map(|h| h.path.as_str()),
        Some("/tmp/data")
    );
    let container = &spec.containers[0];
    assert_eq!(container.image.as_deref(), Some(DEFAULT_IMAGE));
    assert_eq!(
        container.args.as_ref().map(|a| a[1].as_str()),
        Some(SCRUB_SCRIPT)
    );
    assert_eq!(
        pod.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(ANN_RECYCLED_VOLUME_UID))
            .map(String::as_str),
        Some("uid-1")
    );
}

#[test]
fn only_the_recorded_live_pod_of_this_very_release_is_adopted() {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    let pod = |uid: &str, volume_uid: &str, claim_uid: &str, deleting: bool| Pod {
        metadata: ObjectMeta {
            uid: Some(uid.to_string()),
            annotations: Some(
                [
                    (ANN_RECYCLED_VOLUME_UID.to_string(), volume_uid.to_string()),
                    (ANN_RELEASED_CLAIM_UID.to_string(), claim_uid.to_string()),
                ]
                .into(),
            ),
            deletion_timestamp: deleting
                .then(|| Time(Timestamp::from_second(1).expect("timestamp"))),
            ..Default::default()
        },
        ..Default::default()
    };
    let recording = |uid: Option<&str>| {
        let mut recorded = volume("pv", "1Gi");
        recorded.metadata.annotations =
            uid.map(|uid| [(ANN_RECYCLER_POD_UID.to_string(), uid.to_string())].into());
        recorded
    };
    let wanted = pod("", "pv-uid", "claim-2", false);
    let cases = [
        (
            "the recorded pod of this release",
            pod("p1", "pv-uid", "claim-2", false),
            Some("p1"),
            true,
        ),
        (
            "a pod the volume does not record",
            pod("forged", "pv-uid", "claim-2", false),
            Some("p1"),
            false,
        ),
        (
            "no pod recorded",
            pod("forged", "pv-uid", "claim-2", false),
            None,
            false,
        ),
        (
            "an empty record",
            pod("", "pv-uid", "claim-2", false),
            Some(""),
            false,
        ),
        (
            "the recorded pod of an earlier release",
            pod("p1", "pv-uid", "claim-1", false),
            Some("p1"),
            false,
        ),
        (
            "the recorded pod of a re-created volume",
            pod("p1", "old-uid", "claim-2", false),
            Some("p1"),
            false,
        ),
        (
            "the recorded pod, being deleted",
            pod("p1", "pv-uid", "claim-2", true),
            Some("p1"),
            false,
        ),
        ("unmarked", Pod::default(), Some("p1"), false),
    ];
    for (name, found, recorded, adopt) in cases {
        assert_eq!(
            is_recorded_pod(&found, &recording(recorded)) && made_for_this_release(&found, &wanted),
            adopt,
            "{name}"
        );
    }
}

#[test]
fn templates_without_volumes_or_unreadable_are_refused() {
    let dir = std::env::temp_dir().join(format!("recycler-template-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let no_volume = dir.join("novol.yaml");
    std::fs::write(
            &no_volume,
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: x\nspec:\n  containers:\n  - name: c\n    image: busybox\n",
        )
        .expect("write");
    assert!(matches!(
        load_template(&no_volume),
        Err(TemplateError::NoVolume { .. })
    ));
    let good = dir.join("good.yaml");
    std::fs::write(
            &good,
            "apiVersion: v1\nkind: Pod\nmetadata:\n  namespace: kube-system\nspec:\n  volumes:\n  - name: scrub\n  containers:\n  - name: c\n    image: busybox\n",
        )
        .expect("write");
    let pod = load_template(&good).expect("valid template");
    assert_eq!(pod.metadata.namespace.as_deref(), Some("kube-system"));
    let garbage = dir.join("garbage.yaml");
    std::fs::write(&garbage, "spec: [unclosed").expect("write");
    assert!(matches!(
        load_template(&garbage),
        Err(TemplateError::Parse { .. })
    ));
    assert!(matches!(
        load_template(&dir.join("missing.yaml")),
        Err(TemplateError::Read { .. })
    ));
    std::fs::remove_dir_all(&dir).expect("cleanup");
}

/// The recycler pod's name for any volume name: a valid pod name (a DNS
/// subdomain of at most 253 bytes), the same for the same volume, and a
/// different one for volumes whose names differ only past the cut.
mod name_properties;
