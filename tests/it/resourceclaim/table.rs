//! Upstream's `TestSyncHandler` rows (`pkg/controller/resourceclaim`),
//! ported to resource.k8s.io/v1 and run in both modes, then rows of our
//! own for the cases the issue names. Where memapi differs from upstream's
//! fake clientset the row says so: a claim whose last finalizer is removed
//! while it is being deleted is gone (the fake keeps it), and a generated
//! name has a random suffix (`*` in expectations).

use pv_controller::resourceclaim::Features;

use super::harness::{Creates, Row, claim_key, pod_key, run_table, statuses};
use super::objects::*;

fn upstream_create_rows() -> Vec<Row> {
    vec![
        Row {
            name: "create",
            pods: vec![pod_with_resource()],
            templates: vec![template()],
            key: pod_key(&pod_with_resource()),
            expected_claims: vec![fresh_claim()],
            expected_statuses: statuses(POD, &[(ENTRY, Some(FRESH))]),
            creates: Creates::ONE,
            ..Row::default()
        },
        Row {
            name: "create with admin and feature gate off",
            pods: vec![pod_with_resource()],
            templates: vec![template_with_admin_access()],
            key: pod_key(&pod_with_resource()),
            features: Features {
                admin_access: false,
                ..Features::default()
            },
            expect_error: true,
            events: vec![
                "Warning FailedResourceClaimCreation PodResourceClaim acme-resource: admin access is requested, but the feature is disabled",
            ],
            ..Row::default()
        },
        Row {
            name: "create with admin and feature gate on",
            pods: vec![pod_with_resource()],
            templates: vec![template_with_admin_access()],
            key: pod_key(&pod_with_resource()),
            expected_claims: vec![with_admin_access(fresh_claim())],
            expected_statuses: statuses(POD, &[(ENTRY, Some(FRESH))]),
            creates: Creates {
                created_admin: 1,
                ..Creates::default()
            },
            ..Row::default()
        },
        Row {
            name: "nop",
            pods: vec![pod_with_resource().recorded(ENTRY, Some(GENERATED))],
            templates: vec![template()],
            claims: vec![generated_claim()],
            key: pod_key(&pod_with_resource()),
            expected_claims: vec![generated_claim()],
            expected_statuses: statuses(POD, &[(ENTRY, Some(GENERATED))]),
            ..Row::default()
        },
        Row {
            name: "recreate",
            pods: vec![pod_with_resource().recorded(ENTRY, Some(GENERATED))],
            templates: vec![template()],
            key: pod_key(&pod_with_resource()),
            expected_claims: vec![fresh_claim()],
            expected_statuses: statuses(POD, &[(ENTRY, Some(FRESH))]),
            creates: Creates::ONE,
            ..Row::default()
        },
        Row {
            name: "missing-template",
            pods: vec![pod_with_resource()],
            key: pod_key(&pod_with_resource()),
            expect_error: true,
            events: vec![
                "Warning FailedResourceClaimCreation PodResourceClaim acme-resource: resource claim template \"my-template\": resourceclaimtemplate.resource.k8s.io \"my-template\" not found",
            ],
            ..Row::default()
        },
        Row {
            name: "find-existing-claim-by-label",
            pods: vec![pod_with_resource()],
            claims: vec![generated_claim()],
            key: pod_key(&pod_with_resource()),
            expected_claims: vec![generated_claim()],
            expected_statuses: statuses(POD, &[(ENTRY, Some(GENERATED))]),
            ..Row::default()
        },
        Row {
            name: "find-created-claim-in-cache",
            pods: vec![pod_with_resource()],
            claims_in_store: vec![generated_claim()],
            key: pod_key(&pod_with_resource()),
            expected_statuses: statuses(POD, &[(ENTRY, Some(GENERATED))]),
            direct_only: Some(
                "the claim is only in the controller's cache, a create whose watch event is late; no server state stages that for a running controller",
            ),
            ..Row::default()
        },
        Row {
            name: "no-such-pod",
            key: pod_key(&pod_with_resource()),
            ..Row::default()
        },
        Row {
            name: "pod-deleted",
            pods: vec![pod_with_resource().deleting()],
            key: pod_key(&pod_with_resource()),
            ..Row::default()
        },
        Row {
            name: "no-volumes",
            pods: vec![test_pod()],
            key: pod_key(&test_pod()),
            ..Row::default()
        },
        Row {
            name: "create-with-other-claim",
            pods: vec![pod_with_resource()],
            templates: vec![template()],
            claims: vec![claim(LEGACY, "not-my-namespace", None)],
            key: pod_key(&pod_with_resource()),
            expected_claims: vec![claim(LEGACY, "not-my-namespace", None), fresh_claim()],
            expected_statuses: statuses(POD, &[(ENTRY, Some(FRESH))]),
            creates: Creates::ONE,
            ..Row::default()
        },
        Row {
            name: "wrong-claim-owner",
            pods: vec![pod_with_resource()],
            claims: vec![claim(LEGACY, NAMESPACE, None)],
            key: pod_key(&pod_with_resource()),
            expected_claims: vec![claim(LEGACY, NAMESPACE, None)],
            expect_error: true,
            events: vec!["Warning FailedResourceClaimCreation PodResourceClaim acme-resource"],
            ..Row::default()
        },
        Row {
            name: "create-conflict",
            pods: vec![pod_with_resource()],
            templates: vec![template()],
            key: pod_key(&pod_with_resource()),
            create_conflict: true,
            creates: Creates {
                failed: 1,
                ..Creates::default()
            },
            expect_error: true,
            events: vec![
                "Warning FailedResourceClaimCreation PodResourceClaim acme-resource: create ResourceClaim test-pod-acme-resource-: fake conflict",
            ],
            ..Row::default()
        },
    ]
}

fn reserved() -> ResourceClaim {
    test_claim().allocated().reserved_for(&pod_with_resource())
}

fn upstream_claim_rows() -> Vec<Row> {
    vec![
        Row {
            name: "stay-reserved-seen",
            pods: vec![pod_with_resource()],
            claims: vec![reserved()],
            key: claim_key(&reserved()),
            expected_claims: vec![reserved()],
            // Running, the pod's sync finds no claim of its own (the
            // reserved one has no annotation) and no template to make one.
            settled_events: Some(vec![
                "Warning FailedResourceClaimCreation PodResourceClaim acme-resource: resource claim template \"my-template\": resourceclaimtemplate.resource.k8s.io \"my-template\" not found",
            ]),
            ..Row::default()
        },
        Row {
            name: "stay-reserved-not-seen",
            pods_later: vec![pod_with_resource()],
            claims: vec![reserved()],
            key: claim_key(&reserved()),
            expected_claims: vec![reserved()],
            settled_events: Some(vec![
                "Warning FailedResourceClaimCreation PodResourceClaim acme-resource: resource claim template \"my-template\": resourceclaimtemplate.resource.k8s.io \"my-template\" not found",
            ]),
            ..Row::default()
        },
        Row {
            name: "clear-reserved-structured",
            claims: vec![reserved().structured()],
            key: claim_key(&reserved()),
            expected_claims: vec![test_claim()],
            ..Row::default()
        },
        Row {
            name: "dont-clear-reserved-structured",
            pods: vec![pod_with_resource()],
            claims: vec![reserved().structured().reserved_for(&other_pod())],
            key: claim_key(&reserved()),
            expected_claims: vec![reserved().structured()],
            settled_events: Some(vec![
                "Warning FailedResourceClaimCreation PodResourceClaim acme-resource: resource claim template \"my-template\": resourceclaimtemplate.resource.k8s.io \"my-template\" not found",
            ]),
            ..Row::default()
        },
        Row {
            // Upstream's fake keeps the claim without finalizers; a server
            // removes it.
            name: "clear-reserved-structured-deleted",
            claims: vec![reserved().structured().deleting()],
            key: claim_key(&reserved()),
            ..Row::default()
        },
        Row {
            name: "structured-deleted",
            claims: vec![test_claim().allocated().structured().deleting()],
            key: claim_key(&reserved()),
            ..Row::default()
        },
        Row {
            name: "clear-reserved-when-done",
            pods: vec![pod_with_resource().phase("Succeeded")],
            claims: vec![reserved().without_owner()],
            key: claim_key(&reserved()),
            expected_claims: vec![test_claim().allocated().without_owner()],
            ..Row::default()
        },
        Row {
            name: "remove-reserved",
            pods: vec![test_pod()],
            claims: vec![reserved().reserved_for(&other_pod())],
            key: claim_key(&reserved()),
            expected_claims: vec![reserved()],
            ..Row::default()
        },
        Row {
            name: "delete-claim-when-done",
            pods: vec![pod_with_resource().phase("Succeeded")],
            claims: vec![reserved()],
            key: claim_key(&reserved()),
            ..Row::default()
        },
        Row {
            name: "add-reserved",
            pods: vec![
                pod_with_resource()
                    .scheduled()
                    .recorded(ENTRY, Some(GENERATED)),
            ],
            templates: vec![template()],
            claims: vec![generated_claim().allocated()],
            key: pod_key(&pod_with_resource()),
            expected_claims: vec![
                generated_claim()
                    .allocated()
                    .reserved_for(&pod_with_resource()),
            ],
            expected_statuses: statuses(POD, &[(ENTRY, Some(GENERATED))]),
            ..Row::default()
        },
        Row {
            name: "clean up pod reservation with non-pod reservation present",
            pods: vec![pod_with_resource().phase("Succeeded")],
            claims: vec![reserved().reserved_for_thing()],
            key: claim_key(&reserved()),
            expected_claims: vec![test_claim().allocated().reserved_for_thing()],
            ..Row::default()
        },
    ]
}

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::ResourceClaim;

/// Upstream's rows (Kubernetes 1.35's table, with the row for consumers
/// other than pods added right after it): 14 of a pod's sync, 11 of a
/// claim's.
pub(crate) fn upstream_rows() -> Vec<Row> {
    let mut rows = upstream_create_rows();
    rows.extend(upstream_claim_rows());
    rows
}

#[tokio::test(start_paused = true)]
async fn upstream_sync_handler_rows() {
    run_table(&upstream_rows()).await;
}

/// Our rows: entries left alone, claims not owned, done and replaced pods,
/// consumers that are not pods, a user's claim reserved.
fn own_rows() -> Vec<Row> {
    let odd = {
        let mut pod = test_pod();
        pod.spec
            .get_or_insert_with(Default::default)
            .resource_claims
            .get_or_insert_with(Vec::new)
            .push(serde_json::from_value(serde_json::json!({ "name": "odd" })).expect("entry"));
        pod
    };
    let user_pod = test_pod().named_claim("user", "user-claim").scheduled();
    vec![
        Row {
            name: "no-claim-needed-is-left-alone",
            pods: vec![pod_with_resource().recorded(ENTRY, None)],
            templates: vec![template()],
            key: pod_key(&pod_with_resource()),
            expected_statuses: statuses(POD, &[(ENTRY, None)]),
            ..Row::default()
        },
        Row {
            name: "a-users-claim-is-the-users-to-create",
            pods: vec![test_pod().named_claim("user", "user-claim")],
            templates: vec![template()],
            key: pod_key(&test_pod()),
            ..Row::default()
        },
        Row {
            name: "an-entry-without-name-or-template-is-unsupported",
            pods: vec![odd.clone()],
            key: pod_key(&odd),
            expect_error: true,
            events: vec![
                "Warning FailedResourceClaimCreation PodResourceClaim odd: checking for claim before creating it: pod \"my-namespace/test-pod\", spec.resourceClaim \"odd\": none of the supported fields are set",
            ],
            ..Row::default()
        },
        Row {
            name: "a-recorded-claim-the-pod-does-not-own-is-replaced-and-untouched",
            pods: vec![pod_with_resource().recorded(ENTRY, Some(LEGACY))],
            templates: vec![template()],
            claims: vec![claim(LEGACY, NAMESPACE, None)],
            key: pod_key(&pod_with_resource()),
            expected_claims: vec![claim(LEGACY, NAMESPACE, None), fresh_claim()],
            expected_statuses: statuses(POD, &[(ENTRY, Some(FRESH))]),
            creates: Creates::ONE,
            ..Row::default()
        },
        Row {
            name: "a-claim-of-the-1.27-name-without-annotation-is-not-the-entrys",
            pods: vec![pod_with_resource()],
            templates: vec![template()],
            claims: vec![test_claim()],
            key: pod_key(&pod_with_resource()),
            expected_claims: vec![test_claim(), fresh_claim()],
            expected_statuses: statuses(POD, &[(ENTRY, Some(FRESH))]),
            creates: Creates::ONE,
            ..Row::default()
        },
        Row {
            name: "create-with-prioritized-list-and-feature-gate-off",
            pods: vec![pod_with_resource()],
            templates: vec![template_with_prioritized_list()],
            key: pod_key(&pod_with_resource()),
            features: Features {
                prioritized_list: false,
                ..Features::default()
            },
            expect_error: true,
            events: vec![
                "Warning FailedResourceClaimCreation PodResourceClaim acme-resource: template includes a prioritized list of subrequests, but the feature is disabled",
            ],
            ..Row::default()
        },
        Row {
            name: "flapping-resourceclaim-statuses",
            pods: vec![two_entries_recorded()],
            templates: vec![template()],
            claims: vec![generated_claim()],
            key: pod_key(&two_entries_recorded()),
            expected_claims: vec![generated_claim(), generated_for(SECOND, "*")],
            expected_statuses: statuses(
                POD,
                &[
                    (ENTRY, Some(GENERATED)),
                    (SECOND, Some("test-pod-second-*")),
                ],
            ),
            creates: Creates::ONE,
            ..Row::default()
        },
        Row {
            name: "a-done-pod-gets-no-claim",
            pods: vec![pod_with_resource().phase("Succeeded")],
            templates: vec![template()],
            key: pod_key(&pod_with_resource()),
            ..Row::default()
        },
        Row {
            name: "a-pod-replaced-under-its-name-loses-reservation-and-claim",
            pods: vec![pod(POD, "uid-of-the-new-pod")],
            claims: vec![reserved()],
            key: claim_key(&reserved()),
            ..Row::default()
        },
        Row {
            name: "consumers-other-than-pods-are-kept",
            claims: vec![reserved().reserved_for_thing()],
            key: claim_key(&reserved()),
            expected_claims: vec![test_claim().allocated().reserved_for_thing()],
            ..Row::default()
        },
        Row {
            name: "an-unscheduled-deleted-pods-claim-is-deleted",
            pods: vec![
                pod_with_resource()
                    .recorded(ENTRY, Some(GENERATED))
                    .deleting(),
            ],
            claims: vec![generated_claim()],
            key: claim_key(&generated_claim()),
            expected_statuses: statuses(POD, &[(ENTRY, Some(GENERATED))]),
            ..Row::default()
        },
        Row {
            name: "a-scheduled-deleted-pod-keeps-its-claim",
            pods: vec![
                pod_with_resource()
                    .recorded(ENTRY, Some(GENERATED))
                    .scheduled()
                    .deleting(),
            ],
            claims: vec![
                generated_claim()
                    .allocated()
                    .reserved_for(&pod_with_resource()),
            ],
            key: claim_key(&generated_claim()),
            expected_claims: vec![
                generated_claim()
                    .allocated()
                    .reserved_for(&pod_with_resource()),
            ],
            expected_statuses: statuses(POD, &[(ENTRY, Some(GENERATED))]),
            ..Row::default()
        },
        Row {
            name: "a-scheduled-pod-gets-its-users-claim-reserved",
            pods: vec![user_pod.clone()],
            claims: vec![claim("user-claim", NAMESPACE, None).allocated()],
            key: pod_key(&user_pod),
            expected_claims: vec![
                claim("user-claim", NAMESPACE, None)
                    .allocated()
                    .reserved_for(&user_pod),
            ],
            ..Row::default()
        },
    ]
}

/// The second entry of [`two_entries_recorded`].
const SECOND: &str = "second";

/// `test-pod` with two entries from `my-template`, both recorded in its
/// status by the controller's earlier apply (its managed fields say so);
/// the second entry's claim is gone. Applying only the claim made again
/// would drop the first entry, and the next sync would bring it back and
/// drop the second: the statuses would flap (kubernetes#138407).
fn two_entries_recorded() -> Pod {
    let mut pod = pod_with_resource()
        .template_claim(SECOND, TEMPLATE)
        .recorded(ENTRY, Some(GENERATED))
        .recorded(SECOND, Some("test-pod-second-gone1"));
    pod.metadata.managed_fields = Some(vec![
        serde_json::from_value(serde_json::json!({
            "manager": "ResourceClaimController", "operation": "Apply", "apiVersion": "v1",
            "fieldsType": "FieldsV1", "subresource": "status",
            "fieldsV1": { "f:status": { "f:resourceClaimStatuses": {
                "k:{\"name\":\"acme-resource\"}": { ".": {}, "f:name": {}, "f:resourceClaimName": {} },
                "k:{\"name\":\"second\"}": { ".": {}, "f:name": {}, "f:resourceClaimName": {} },
            } } },
        }))
        .expect("managed fields"),
    ]);
    pod
}

#[tokio::test(start_paused = true)]
async fn own_rows_in_both_modes() {
    run_table(&own_rows()).await;
}
