use super::*;
use crate::events::reference_of;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};

fn pv_ref() -> ObjectReference {
    let mut pv = PersistentVolume::default();
    pv.metadata.name = Some("pv1".into());
    pv.metadata.uid = Some("uid-pv1".into());
    pv.metadata.resource_version = Some("42".into());
    reference_of(&pv)
}

fn claim_ref() -> ObjectReference {
    let mut claim = PersistentVolumeClaim::default();
    claim.metadata.name = Some("claim1".into());
    claim.metadata.namespace = Some("ns".into());
    claim.metadata.uid = Some("uid-claim1".into());
    reference_of(&claim)
}

fn at(seconds: i64) -> Timestamp {
    Timestamp::from_second(seconds).expect("valid timestamp")
}

#[test]
fn event_has_the_fields_client_go_sets() {
    let now = at(1_700_000_000);
    let event = make_event(
        &claim_ref(),
        EventType::Warning,
        "ProvisioningFailed",
        "no class".into(),
        "persistentvolume-controller",
        "pod-a",
        now,
    );
    assert_eq!(event.metadata.namespace.as_deref(), Some("ns"));
    assert_eq!(
        event.metadata.name,
        Some(format!("claim1.{:x}", now.as_nanosecond()))
    );
    assert_eq!(event.involved_object, claim_ref());
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    assert_eq!(event.reason.as_deref(), Some("ProvisioningFailed"));
    assert_eq!(event.message.as_deref(), Some("no class"));
    assert_eq!(event.count, Some(1));
    assert_eq!(event.first_timestamp, Some(Time(now)));
    assert_eq!(event.last_timestamp, Some(Time(now)));
    assert_eq!(
        event.source,
        Some(EventSource {
            component: Some("persistentvolume-controller".into()),
            host: None
        })
    );
    assert_eq!(
        event.reporting_component.as_deref(),
        Some("persistentvolume-controller")
    );
    assert_eq!(event.reporting_instance.as_deref(), Some("pod-a"));
    assert_eq!(event.event_time, None, "a legacy event has no eventTime");
    assert_eq!(event.series, None);
}

#[test]
fn events_about_volumes_go_to_the_default_namespace() {
    let event = make_event(
        &pv_ref(),
        EventType::Normal,
        "VolumeRecycled",
        "Volume recycled".into(),
        "persistentvolume-controller",
        "",
        at(1),
    );
    assert_eq!(event.metadata.namespace.as_deref(), Some("default"));
    assert_eq!(event.involved_object.namespace, None);
    assert_eq!(
        event.involved_object.resource_version.as_deref(),
        Some("42")
    );
    assert_eq!(event.reporting_instance, None, "no empty instance");
}

#[test]
fn names_stay_valid_dns_subdomains() {
    let now = at(1_700_000_000);
    let suffix = format!("{:x}", now.as_nanosecond());
    let long = format!("{}-{}", "a".repeat(235), "b".repeat(17));
    let name = event_name(&long, "persistentvolume-controller", now);
    assert!(is_dns_subdomain(&name), "{name}");
    assert!(name.starts_with(&"a".repeat(235)), "{name}");
    assert!(
        name.ends_with(&format!("a.{suffix}")),
        "the cut '-' is gone"
    );
    for invalid in ["", "UPPER", "-x", "ünï"] {
        assert_eq!(
            event_name(invalid, "persistentvolume-controller", now),
            format!("persistentvolume-controller.{suffix}"),
            "{invalid:?}"
        );
    }
    assert!(is_dns_subdomain("a.b-c.1"));
    assert!(!is_dns_subdomain("a..b"));
    assert!(!is_dns_subdomain("a-.b"));
    assert!(!is_dns_subdomain(&"a".repeat(254)));
}

/// An event's name for any object and component name: a valid name, the
/// same for the same inputs.
mod name_properties;
