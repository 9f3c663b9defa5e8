use super::*;

#[test]
fn a_short_generate_name_is_pod_claim_and_a_hyphen() {
    assert_eq!(
        generate_name("my-pod", "resource-1a"),
        "my-pod-resource-1a-"
    );
}

#[test]
fn a_long_generate_name_cuts_both_names_and_keeps_the_hyphens() {
    let pod = "p".repeat(60);
    let claim = "c".repeat(40);
    let name = generate_name(&pod, &claim);
    assert!(name.len() <= MAX_GENERATE_NAME, "{name}");
    assert!(name.ends_with("c-"), "{name}");
    let (pod_part, rest) = name.split_once('-').unwrap();
    assert_eq!(pod_part.len(), 60 * 55 / 100);
    assert_eq!(rest.len(), 55 - pod_part.len() + 1);
}

#[test]
fn generate_name_at_the_limit_is_kept_whole() {
    let pod = "p".repeat(30);
    let claim = "c".repeat(25);
    assert_eq!(generate_name(&pod, &claim).len(), 57);
    assert_eq!(generate_name(&pod, &claim), format!("{pod}-{claim}-"));
}

fn pod_with(entries: &serde_json::Value, statuses: &serde_json::Value) -> Pod {
    serde_json::from_value(serde_json::json!({
        "metadata": { "name": "p", "namespace": "ns", "uid": "uid-p" },
        "spec": { "containers": [], "resourceClaims": entries },
        "status": { "resourceClaimStatuses": statuses },
    }))
    .unwrap()
}

#[test]
fn an_entry_names_its_claim_as_upstream_resourceclaim_name() {
    let pod = pod_with(
        &serde_json::json!([
            { "name": "user", "resourceClaimName": "mine" },
            { "name": "made", "resourceClaimTemplateName": "t" },
            { "name": "skip", "resourceClaimTemplateName": "t" },
            { "name": "new", "resourceClaimTemplateName": "t" },
            { "name": "odd" },
        ]),
        &serde_json::json!([
            { "name": "made", "resourceClaimName": "p-made-x6zgt" },
            { "name": "skip" },
        ]),
    );
    let names: Vec<ClaimName<'_>> = pod_claims(&pod)
        .iter()
        .map(|c| claim_name(&pod, c))
        .collect();
    assert_eq!(
        names,
        [
            ClaimName::Named("mine"),
            ClaimName::Generated("p-made-x6zgt"),
            ClaimName::NotNeeded,
            ClaimName::NotRecorded,
            ClaimName::Unsupported,
        ]
    );
    assert!(!names[0].must_check_owner() && names[1].must_check_owner());
}

#[test]
fn a_claim_from_a_template_is_owned_annotated_and_named_after_pod_and_entry() {
    let pod = pod_with(
        &serde_json::json!([{ "name": "gpu", "resourceClaimTemplateName": "t" }]),
        &serde_json::json!([]),
    );
    let template: ResourceClaimTemplate = serde_json::from_value(serde_json::json!({
        "metadata": { "name": "t", "namespace": "ns" },
        "spec": {
            "metadata": { "labels": { "app": "a" }, "annotations": { "note": "n" } },
            "spec": { "devices": { "requests": [ { "name": "r", "exactly": { "deviceClassName": "c" } } ] } },
        },
    }))
    .unwrap();
    let claim = claim_from_template(&pod, &pod_claims(&pod)[0], &template);
    assert_eq!(claim.metadata.generate_name.as_deref(), Some("p-gpu-"));
    assert_eq!(claim.metadata.namespace.as_deref(), Some("ns"));
    let annotations = claim.metadata.annotations.clone().unwrap();
    assert_eq!(
        annotations.get(ANN_POD_CLAIM_NAME).map(String::as_str),
        Some("gpu")
    );
    assert_eq!(annotations.get("note").map(String::as_str), Some("n"));
    assert_eq!(
        claim.metadata.labels,
        template.spec.metadata.clone().unwrap().labels
    );
    let owner = &claim.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!((owner.kind.as_str(), owner.uid.as_str()), ("Pod", "uid-p"));
    assert_eq!(
        (owner.controller, owner.block_owner_deletion),
        (Some(true), None),
        "controller, without blockOwnerDeletion (upstream 1.35)"
    );
    assert_eq!(claim.spec, template.spec.spec);
    assert!(is_for_pod(&pod, &claim));
    assert_eq!(owning_pod(&claim), Some(("p", "uid-p")));
}

fn spec_with(requests: &serde_json::Value) -> ResourceClaimSpec {
    serde_json::from_value(serde_json::json!({ "devices": { "requests": requests } })).unwrap()
}

/// Upstream's `TestGetAdminAccessMetricLabel` (its "nil claim" row has no
/// Rust counterpart: a claim always has a spec).
#[test]
fn admin_access_is_read_from_exact_requests_only() {
    let exactly = |admin: Option<bool>| serde_json::json!({ "name": "r", "exactly": { "deviceClassName": "c", "adminAccess": admin } });
    let rows = [
        ("no requests", ResourceClaimSpec::default(), false),
        (
            "admin access false",
            spec_with(&serde_json::json!([exactly(Some(false))])),
            false,
        ),
        (
            "admin access true",
            spec_with(&serde_json::json!([exactly(Some(true))])),
            true,
        ),
        (
            "prioritized list",
            spec_with(
                &serde_json::json!([{ "name": "r", "firstAvailable": [ { "name": "s", "deviceClassName": "c", "adminAccess": true } ] }]),
            ),
            false,
        ),
        (
            "multiple requests, one with admin access true",
            spec_with(&serde_json::json!([
                exactly(Some(false)),
                exactly(Some(true))
            ])),
            true,
        ),
        (
            "multiple requests, all admin access false or nil",
            spec_with(&serde_json::json!([exactly(None), exactly(Some(false))])),
            false,
        ),
    ];
    for (name, spec, expected) in rows {
        assert_eq!(requests_admin_access(&spec), expected, "{name}");
    }
}

#[test]
fn a_prioritized_list_is_a_request_with_alternatives() {
    assert!(!requests_prioritized_list(&ResourceClaimSpec::default()));
    assert!(requests_prioritized_list(&spec_with(&serde_json::json!([
        { "name": "r", "firstAvailable": [ { "name": "s", "deviceClassName": "c" } ] }
    ]))));
}

#[test]
fn the_source_follows_the_annotations() {
    let with = |annotations: serde_json::Value| -> ResourceClaim {
        serde_json::from_value(serde_json::json!({
            "metadata": { "name": "c", "annotations": annotations }, "spec": {},
        }))
        .unwrap()
    };
    let rows = [
        (serde_json::json!({}), ClaimSource::User),
        (
            serde_json::json!({ ANN_POD_CLAIM_NAME: "" }),
            ClaimSource::User,
        ),
        (
            serde_json::json!({ ANN_POD_CLAIM_NAME: "gpu" }),
            ClaimSource::Template,
        ),
        (
            serde_json::json!({ ANN_EXTENDED_RESOURCE_CLAIM: "false" }),
            ClaimSource::User,
        ),
        (
            serde_json::json!({ ANN_EXTENDED_RESOURCE_CLAIM: "true", ANN_POD_CLAIM_NAME: "gpu" }),
            ClaimSource::ExtendedResource,
        ),
    ];
    for (annotations, expected) in rows {
        assert_eq!(
            claim_source(&with(annotations.clone())),
            expected,
            "{annotations}"
        );
    }
    assert_eq!(ClaimSource::Template.label(), "resource_claim_template");
    assert_eq!(ClaimSource::ExtendedResource.label(), "extended_resource");
}

mod name_properties;
