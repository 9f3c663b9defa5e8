use super::*;

#[test]
fn the_defaults_are_kubernetes_1_35s() {
    let gates = FeatureGates::default();
    assert!(gates.enabled(Feature::DynamicResourceAllocation));
    assert!(gates.enabled(Feature::DraAdminAccess));
    assert!(gates.enabled(Feature::DraPrioritizedList));
    assert!(!gates.enabled(Feature::DraExtendedResource));
    assert_eq!("".parse::<FeatureGates>(), Ok(FeatureGates::default()));
}

#[test]
fn known_gates_are_set_the_last_one_winning() {
    let gates: FeatureGates = "DRAAdminAccess=false, DRAExtendedResource=T,DRAAdminAccess=0"
        .parse()
        .expect("parses");
    assert!(!gates.enabled(Feature::DraAdminAccess));
    assert!(gates.enabled(Feature::DraExtendedResource));
    assert!(gates.enabled(Feature::DraPrioritizedList));
    assert_eq!(
        gates.to_string(),
        "DRAAdminAccess=false,DRAExtendedResource=true,DRAPrioritizedList=true,DynamicResourceAllocation=true"
    );
}

#[test]
fn unknown_malformed_invalid_and_locked_gates_are_refused() {
    let error = "DRAAdminAcces=true".parse::<FeatureGates>().unwrap_err();
    assert_eq!(error, FeatureGateError::Unknown("DRAAdminAcces".into()));
    assert!(
        error
            .to_string()
            .contains("knows DRAAdminAccess, DRAExtendedResource"),
        "{error}"
    );
    assert_eq!(
        "DRAAdminAccess".parse::<FeatureGates>(),
        Err(FeatureGateError::Malformed("DRAAdminAccess".into()))
    );
    assert!(matches!(
        "DRAPrioritizedList=maybe".parse::<FeatureGates>(),
        Err(FeatureGateError::Invalid { .. })
    ));
    let locked = "DynamicResourceAllocation=false"
        .parse::<FeatureGates>()
        .unwrap_err();
    assert_eq!(
        locked.to_string(),
        "cannot set feature gate DynamicResourceAllocation to false, feature is locked to true"
    );
}
