//! Counted runs of the ResourceClaim controller: a pod status write that
//! fails again and again, one pod with 50 template claims, a 1,000-pod
//! storm, a done pod's claim, a claim the pod does not own, a pod that
//! vanished while the watch was down, and the claim gauges.

use k8s_names::ANN_POD_CLAIM_NAME;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::ResourceClaim;
use memapi::{MemApi, Reactor, Verb};

use super::harness::{Creates, Row, Running, claims_only, creates, seeded};
use super::objects::*;
use pv_controller::resourceclaim::Features;

fn status_writes(api: &MemApi) -> (u64, u64) {
    let requests = api.requests();
    (
        requests.count(Verb::Patch, "pods", Some("status")),
        requests.count_code(Verb::Patch, "pods", Some("status"), 200),
    )
}

fn claim_creates(api: &MemApi) -> u64 {
    api.requests().count(Verb::Create, "resourceclaims", None)
}

/// The claims each pod (by UID) controls.
fn claims_per_owner(api: &MemApi) -> std::collections::BTreeMap<String, usize> {
    let mut owners = std::collections::BTreeMap::new();
    for claim in api.list::<ResourceClaim>() {
        for owner in claim.metadata.owner_references.iter().flatten() {
            *owners.entry(owner.uid.clone()).or_insert(0) += 1;
        }
    }
    owners
}

/// memapi with `test-pod` (one entry from `my-template`) and the template.
fn pod_and_template() -> MemApi {
    seeded(&Row {
        pods: vec![pod_with_resource()],
        templates: vec![template()],
        ..Row::default()
    })
}

#[tokio::test(start_paused = true)]
async fn a_failing_pod_status_write_never_makes_a_second_claim() {
    const FAILURES: u32 = 6;
    let api = pod_and_template();
    api.add_reactor(
        Reactor::on(Verb::Patch, "pods")
            .subresource("status")
            .error(500)
            .times(FAILURES),
    );
    let running = Running::start(&api, claims_only(Features::default())).await;
    running.settle().await;
    let creates = creates(&running.metrics);
    running.stop().await;

    let claims = api.list::<ResourceClaim>();
    assert_eq!(claims.len(), 1, "exactly one claim: {claims:?}");
    assert_eq!(claim_creates(&api), 1);
    assert_eq!(creates, Creates::ONE, "one create, none failed");
    assert_eq!(
        status_writes(&api),
        (u64::from(FAILURES) + 1, 1),
        "every failed status write retried, one stored"
    );
    let pod = api.get::<Pod>(Some(NAMESPACE), POD).expect("pod");
    let recorded = pod
        .status
        .and_then(|s| s.resource_claim_statuses)
        .expect("recorded");
    assert_eq!(recorded[0].resource_claim_name, claims[0].metadata.name);
}

#[tokio::test(start_paused = true)]
async fn a_pod_with_50_template_claims_gets_50_claims_and_one_status_write() {
    let mut pod = test_pod();
    for i in 0..50 {
        pod = pod.template_claim(&format!("claim-{i}"), TEMPLATE);
    }
    let api = seeded(&Row {
        pods: vec![pod],
        templates: vec![template()],
        ..Row::default()
    });
    let running = Running::start(&api, claims_only(Features::default())).await;
    running.settle().await;
    running.stop().await;

    let claims = api.list::<ResourceClaim>();
    assert_eq!(claims.len(), 50);
    let entries: BTreeSet<String> = claims
        .iter()
        .filter_map(|c| {
            c.metadata
                .annotations
                .as_ref()?
                .get(ANN_POD_CLAIM_NAME)
                .cloned()
        })
        .collect();
    assert_eq!(entries.len(), 50, "one claim per entry");
    assert_eq!(status_writes(&api), (1, 1), "one status write for all 50");
    let pod = api.get::<Pod>(Some(NAMESPACE), POD).expect("pod");
    let recorded = pod
        .status
        .and_then(|s| s.resource_claim_statuses)
        .expect("recorded");
    assert_eq!(recorded.len(), 50);
    for status in &recorded {
        let name = status.resource_claim_name.as_deref().expect("a claim");
        assert!(
            name.starts_with(&format!("{POD}-{}-", status.name)),
            "{name}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn a_storm_of_1000_pods_gets_1000_claims_and_1000_status_writes() {
    const PODS: usize = 1000;
    let pods: Vec<Pod> = (0..PODS)
        .map(|i| {
            pod(&format!("storm-{i}"), &format!("uid-storm-{i}")).template_claim(ENTRY, TEMPLATE)
        })
        .collect();
    let api = seeded(&Row {
        pods,
        templates: vec![template()],
        ..Row::default()
    });
    let running = Running::start(&api, claims_only(Features::default())).await;
    running.settle().await;
    let creates = creates(&running.metrics);
    running.stop().await;

    let claims = api.list::<ResourceClaim>().len();
    let owners = claims_per_owner(&api);
    let duplicates: usize = owners.values().map(|n| n - 1).sum();
    let writes = status_writes(&api);
    println!(
        "storm: {PODS} pods, {claims} claims, {} claim creates, {} pod status writes ({} stored), {duplicates} duplicates",
        claim_creates(&api),
        writes.0,
        writes.1
    );
    assert_eq!(claims, PODS);
    assert_eq!(owners.len(), PODS);
    assert_eq!(duplicates, 0);
    assert_eq!(claim_creates(&api), PODS as u64);
    assert_eq!(
        creates,
        Creates {
            created: PODS as u64,
            ..Creates::default()
        }
    );
    assert_eq!(writes, (PODS as u64, PODS as u64));
}

#[tokio::test(start_paused = true)]
async fn a_done_pods_claim_loses_its_reservation_and_is_deleted_while_the_pod_exists() {
    let running_pod = pod_with_resource()
        .scheduled()
        .recorded(ENTRY, Some(GENERATED))
        .phase("Running");
    let api = seeded(&Row {
        pods: vec![running_pod.clone()],
        claims: vec![
            generated_claim()
                .allocated()
                .structured()
                .reserved_for(&running_pod),
        ],
        templates: vec![template()],
        ..Row::default()
    });
    let running = Running::start(&api, claims_only(Features::default())).await;
    running.settle().await;
    assert_eq!(
        api.list::<ResourceClaim>().len(),
        1,
        "a running pod keeps its claim"
    );
    api.reset_requests();

    api.put(&running_pod.clone().phase("Succeeded"))
        .expect("pod done");
    running.settle().await;
    running.stop().await;

    assert!(
        api.list::<ResourceClaim>().is_empty(),
        "the claim is deleted"
    );
    assert!(
        api.get::<Pod>(Some(NAMESPACE), POD).is_some(),
        "the pod still exists"
    );
    let log = api.requests();
    let writes: Vec<(Verb, Option<String>)> = log
        .log()
        .iter()
        .filter(|r| r.resource == "resourceclaims" && r.verb != Verb::Watch && r.verb != Verb::List)
        .map(|r| (r.verb, r.subresource.clone()))
        .collect();
    assert_eq!(
        writes,
        vec![
            (Verb::Patch, Some("status".to_string())),
            (Verb::Patch, None),
            (Verb::Delete, None),
        ],
        "reservation and allocation cleared, finalizer removed, then deleted"
    );
}

/// A done pod's generated claim that carries the scheduler's finalizer
/// and an allocation but no reservation: deleting it only marks it
/// Terminating, and that version must reach the claim's sync, which
/// clears the allocation and removes the finalizer.
#[tokio::test(start_paused = true)]
async fn a_deleted_claim_with_the_finalizer_is_deallocated_and_goes() {
    let api = seeded(&Row {
        pods: vec![
            pod_with_resource()
                .scheduled()
                .recorded(ENTRY, Some(GENERATED))
                .phase("Succeeded"),
        ],
        claims: vec![generated_claim().allocated().structured()],
        templates: vec![template()],
        ..Row::default()
    });
    let running = Running::start(&api, claims_only(Features::default())).await;
    running.settle().await;
    running.stop().await;
    let left = api.list::<ResourceClaim>();
    assert!(left.is_empty(), "no claim left Terminating: {left:?}");
    assert_eq!(
        api.requests().count(Verb::Delete, "resourceclaims", None),
        1
    );
}

/// The same end when the finalizer's removal after the release fails
/// once: the retry deletes the claim, and its Terminating version still
/// gets the finalizer removed.
#[tokio::test(start_paused = true)]
async fn a_claim_whose_finalizer_removal_failed_once_still_goes() {
    let running_pod = pod_with_resource()
        .scheduled()
        .recorded(ENTRY, Some(GENERATED))
        .phase("Running");
    let api = seeded(&Row {
        pods: vec![running_pod.clone()],
        claims: vec![
            generated_claim()
                .allocated()
                .structured()
                .reserved_for(&running_pod),
        ],
        templates: vec![template()],
        ..Row::default()
    });
    let running = Running::start(&api, claims_only(Features::default())).await;
    running.settle().await;
    api.add_reactor(
        Reactor::on(Verb::Patch, "resourceclaims")
            .main_resource()
            .error(500)
            .times(1),
    );
    api.put(&running_pod.clone().phase("Succeeded"))
        .expect("pod done");
    running.settle().await;
    running.stop().await;
    let left = api.list::<ResourceClaim>();
    assert!(left.is_empty(), "no claim left Terminating: {left:?}");
}

#[tokio::test(start_paused = true)]
async fn a_claim_not_owned_by_the_pod_is_never_written() {
    let api = seeded(&Row {
        pods: vec![
            pod_with_resource().recorded(ENTRY, Some(LEGACY)),
            pod_with_resource_named("second", "uid-second"),
        ],
        claims: vec![
            claim(LEGACY, NAMESPACE, None),
            claim("second-acme-resource", NAMESPACE, Some(&test_pod())),
        ],
        templates: vec![template()],
        ..Row::default()
    });
    let running = Running::start(&api, claims_only(Features::default())).await;
    running.settle().await;
    running.stop().await;
    let touched: Vec<String> = api
        .requests()
        .log()
        .iter()
        .filter(|r| {
            r.resource == "resourceclaims"
                && matches!(r.verb, Verb::Update | Verb::Patch | Verb::Delete)
        })
        .filter_map(|r| r.name.clone())
        .collect();
    assert!(touched.is_empty(), "claims written: {touched:?}");
    let names: BTreeSet<String> = api
        .list::<ResourceClaim>()
        .iter()
        .filter_map(|c| c.metadata.name.clone())
        .collect();
    assert!(names.contains(LEGACY) && names.contains("second-acme-resource"));
    assert_eq!(names.len(), 4, "each pod got a claim of its own: {names:?}");
}

fn pod_with_resource_named(name: &str, uid: &str) -> Pod {
    pod(name, uid).template_claim(ENTRY, TEMPLATE)
}

#[tokio::test(start_paused = true)]
async fn a_pod_gone_while_the_watch_was_down_is_handled_as_deleted() {
    let scheduled = test_pod().named_claim("gpu", "shared").scheduled();
    let api = seeded(&Row {
        pods: vec![scheduled.clone()],
        claims: vec![
            claim("shared", NAMESPACE, None)
                .allocated()
                .structured()
                .reserved_for(&scheduled),
        ],
        ..Row::default()
    });
    let running = Running::start(&api, claims_only(Features::default())).await;
    running.settle().await;
    assert_eq!(reserved_count(&api, "shared"), 1);

    // The next pod watch is served only after 10 minutes, and the current
    // one ends after kube's 290 s watch timeout: the pod goes meanwhile and
    // its DELETED event reaches no one; the history is compacted, so the
    // watcher relists and finds the pod missing.
    api.add_reactor(Reactor::on(Verb::Watch, "pods").delay(Duration::from_secs(600)));
    tokio::time::sleep(Duration::from_secs(300)).await;
    assert!(api.remove::<Pod>(Some(NAMESPACE), POD));
    api.compact();
    tokio::time::sleep(Duration::from_secs(700)).await;
    running.settle().await;
    running.stop().await;

    assert_eq!(
        reserved_count(&api, "shared"),
        0,
        "the reservation is removed"
    );
    let claim = api
        .get::<ResourceClaim>(Some(NAMESPACE), "shared")
        .expect("a user's claim stays");
    assert!(
        claim.status.and_then(|s| s.allocation).is_none(),
        "and deallocated"
    );
    let pod_gets = api.requests().count(Verb::Get, "pods", None);
    assert_eq!(pod_gets, 0, "known deleted: no lookup");
}

fn reserved_count(api: &MemApi, name: &str) -> usize {
    api.get::<ResourceClaim>(Some(NAMESPACE), name)
        .and_then(|c| c.status)
        .and_then(|s| s.reserved_for)
        .map_or(0, |r| r.len())
}

/// The non-zero series of `resourceclaim_controller_resource_claims`, as
/// `allocated/admin_access/source` → count.
fn claim_gauge(running: &Running) -> BTreeMap<String, i64> {
    let text = running.metrics.render().expect("render");
    text.lines()
        .filter_map(|line| line.strip_prefix("resourceclaim_controller_resource_claims{"))
        .filter_map(|line| line.split_once("} "))
        .map(|(labels, value)| {
            let label = |name: &str| {
                labels
                    .split(',')
                    .find_map(|pair| pair.strip_prefix(&format!("{name}=\"")))
                    .map(|v| v.trim_end_matches('"').to_string())
                    .unwrap_or_default()
            };
            (
                format!(
                    "{}/{}/{}",
                    label("allocated"),
                    label("admin_access"),
                    label("source")
                ),
                value.trim().parse().expect("count"),
            )
        })
        .collect()
}

fn expect(entries: &[(&str, i64)]) -> BTreeMap<String, i64> {
    entries
        .iter()
        .map(|(k, v)| ((*k).to_string(), *v))
        .collect()
}

fn change(api: &MemApi, name: &str, edit: impl FnOnce(&mut ResourceClaim)) {
    let mut stored = api
        .get::<ResourceClaim>(Some(NAMESPACE), name)
        .expect("claim");
    edit(&mut stored);
    api.put(&stored).expect("put");
}

/// Upstream's `TestResourceClaimEventHandler`, on the running process:
/// the claim gauge follows creates, allocations, deallocations and
/// deletions of users' claims, claims with admin access made from a
/// template, and the scheduler's extended-resource claims; label sets
/// without claims are not exported.
#[tokio::test(start_paused = true)]
async fn the_claim_gauge_follows_the_claims() {
    let api = MemApi::new();
    let running = Running::start(&api, claims_only(Features::default())).await;
    running.settle().await;
    assert!(claim_gauge(&running).is_empty());
    api.create(&claim("first", NAMESPACE, None))
        .expect("create");
    running.settle().await;
    assert_eq!(claim_gauge(&running), expect(&[("false/false/", 1)]));
    change(&api, "first", |c| {
        c.metadata.labels = Some([("foo".to_string(), "bar".to_string())].into());
    });
    running.settle().await;
    assert_eq!(claim_gauge(&running), expect(&[("false/false/", 1)]));
    change(&api, "first", |c| *c = c.clone().allocated());
    running.settle().await;
    assert_eq!(claim_gauge(&running), expect(&[("true/false/", 1)]));
    api.create(&claim("second", NAMESPACE, None).allocated())
        .expect("create allocated");
    running.settle().await;
    assert_eq!(claim_gauge(&running), expect(&[("true/false/", 2)]));
    change(&api, "first", |c| c.status = None);
    running.settle().await;
    assert_eq!(
        claim_gauge(&running),
        expect(&[("false/false/", 1), ("true/false/", 1)])
    );
    assert!(api.remove::<ResourceClaim>(Some(NAMESPACE), "first"));
    assert!(api.remove::<ResourceClaim>(Some(NAMESPACE), "second"));
    running.settle().await;
    assert!(claim_gauge(&running).is_empty());

    api.create(&with_admin_access(generated_named("admin")))
        .expect("create admin");
    running.settle().await;
    assert_eq!(
        claim_gauge(&running),
        expect(&[("false/true/resource_claim_template", 1)])
    );
    change(&api, "admin", |c| *c = c.clone().allocated());
    running.settle().await;
    assert_eq!(
        claim_gauge(&running),
        expect(&[("true/true/resource_claim_template", 1)])
    );
    assert!(api.remove::<ResourceClaim>(Some(NAMESPACE), "admin"));

    let mut extended = claim("test-pod-extended-resources-1", NAMESPACE, None);
    extended.metadata.annotations = Some(
        [(
            k8s_names::ANN_EXTENDED_RESOURCE_CLAIM.to_string(),
            "true".to_string(),
        )]
        .into(),
    );
    api.create(&extended.allocated()).expect("create extended");
    running.settle().await;
    assert_eq!(
        claim_gauge(&running),
        expect(&[("true/false/extended_resource", 1)])
    );
    assert!(api.remove::<ResourceClaim>(Some(NAMESPACE), "test-pod-extended-resources-1"));
    running.settle().await;
    assert!(claim_gauge(&running).is_empty());
    running.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_follower_makes_no_claim_until_it_leads() {
    let api = pod_and_template();
    let (lead, leads) = tokio::sync::oneshot::channel::<()>();
    let running = Running::elected_after(&api, claims_only(Features::default()), async move {
        leads.await.is_ok()
    })
    .await;
    running.settle().await;
    assert!(
        api.list::<ResourceClaim>().is_empty(),
        "a follower writes nothing"
    );
    assert_eq!(
        api.requests().count(Verb::Create, "resourceclaims", None),
        0
    );
    lead.send(()).expect("leads");
    running.settle().await;
    running.stop().await;
    assert_eq!(
        api.list::<ResourceClaim>().len(),
        1,
        "the leader makes the claim"
    );
}

#[tokio::test(start_paused = true)]
async fn a_claim_deleted_while_the_watch_was_down_is_made_again() {
    let api = pod_and_template();
    let running = Running::start(&api, claims_only(Features::default())).await;
    running.settle().await;
    let first = api.list::<ResourceClaim>();
    assert_eq!(first.len(), 1);
    let first = first[0].metadata.name.clone().expect("name");

    // The claim watch is down (the next one is served after 10 minutes,
    // the current one ends after 290 s) when the claim is deleted; the
    // relist after the compaction does not list it.
    api.add_reactor(Reactor::on(Verb::Watch, "resourceclaims").delay(Duration::from_secs(600)));
    tokio::time::sleep(Duration::from_secs(300)).await;
    assert!(api.remove::<ResourceClaim>(Some(NAMESPACE), &first));
    api.compact();
    tokio::time::sleep(Duration::from_secs(700)).await;
    running.settle().await;
    running.stop().await;

    let claims = api.list::<ResourceClaim>();
    assert_eq!(claims.len(), 1, "a new claim: {claims:?}");
    let second = claims[0].metadata.name.clone().expect("name");
    assert_ne!(second, first);
    let pod = api.get::<Pod>(Some(NAMESPACE), POD).expect("pod");
    let recorded = pod
        .status
        .and_then(|s| s.resource_claim_statuses)
        .expect("recorded");
    assert_eq!(
        recorded[0].resource_claim_name.as_deref(),
        Some(second.as_str())
    );
}

#[tokio::test(start_paused = true)]
async fn a_claim_watch_that_keeps_failing_stops_the_controller() {
    let api = MemApi::new();
    api.add_reactor(
        Reactor::on(Verb::List, "resourceclaims")
            .error(500)
            .always(),
    );
    let app = pv_controller::App::start(
        crate::harness::clients(&api),
        pv_controller::AppConfig {
            controllers: pv_controller::ControllerSelection::new([
                k8s_names::RESOURCE_CLAIM_CONTROLLER,
            ]),
            watch_failure_limit: Duration::from_secs(30),
            ..pv_controller::AppConfig::default()
        },
    )
    .await
    .expect("the process starts");
    let readiness = app.health().readiness;
    let result = tokio::time::timeout(Duration::from_secs(120), app.run(std::future::pending()))
        .await
        .expect("it stops by itself");
    let error = result.expect_err("a failing watch is an error");
    assert!(error.to_string().contains("resourceclaim"), "{error}");
    assert!(!readiness.is_ready(), "never ready without its claims");
}

/// A template made after its pod was synced queues that pod at once: the
/// pod that failed for 20 minutes (its retry backed off to the most, 1000
/// s) gets its claim within a second of the template.
#[tokio::test(start_paused = true)]
async fn a_new_template_gives_its_waiting_pod_a_claim_at_once() {
    let api = seeded(&Row {
        pods: vec![pod_with_resource()],
        ..Row::default()
    });
    let running = Running::start(&api, claims_only(Features::default())).await;
    tokio::time::sleep(Duration::from_secs(20 * 60)).await;
    assert!(api.list::<ResourceClaim>().is_empty(), "no template yet");
    api.create(&template()).expect("template");
    tokio::time::sleep(Duration::from_secs(1)).await;
    let claims = api.list::<ResourceClaim>();
    running.stop().await;
    assert_eq!(claims.len(), 1, "made at once: {claims:?}");
}

/// The claim the scheduler made for a pod's extended resources (recorded
/// in `status.extendedResourceClaimStatus`, owned by the pod, allocated
/// with the finalizer) is released, deallocated and deleted once the pod
/// is done.
#[tokio::test(start_paused = true)]
async fn a_done_pods_extended_resource_claim_is_released_and_deleted() {
    const EXTENDED: &str = "test-pod-extended-resources-abcde";
    let running_pod: Pod = {
        let mut pod = test_pod().scheduled().phase("Running");
        pod.status
            .get_or_insert_with(Default::default)
            .extended_resource_claim_status = Some(
            serde_json::from_value(serde_json::json!({
                "resourceClaimName": EXTENDED, "requestMappings": [],
            }))
            .expect("extended status"),
        );
        pod
    };
    let mut extended = claim(EXTENDED, NAMESPACE, Some(&running_pod))
        .allocated()
        .structured()
        .reserved_for(&running_pod);
    extended.metadata.annotations = Some(
        [(
            k8s_names::ANN_EXTENDED_RESOURCE_CLAIM.to_string(),
            "true".to_string(),
        )]
        .into(),
    );
    let api = seeded(&Row {
        pods: vec![running_pod.clone()],
        claims: vec![extended],
        ..Row::default()
    });
    let running = Running::start(&api, claims_only(Features::default())).await;
    running.settle().await;
    assert_eq!(
        reserved_count(&api, EXTENDED),
        1,
        "the running pod keeps it"
    );
    api.put(&running_pod.phase("Succeeded")).expect("pod done");
    running.settle().await;
    running.stop().await;
    assert!(
        api.get::<ResourceClaim>(Some(NAMESPACE), EXTENDED)
            .is_none(),
        "released, deallocated and deleted"
    );
}

/// A generated claim is controlled by its pod without
/// `blockOwnerDeletion`, and the pod records it by server-side apply as
/// `ResourceClaimController`.
#[tokio::test(start_paused = true)]
async fn a_generated_claim_is_owned_and_recorded_as_upstream_does() {
    let api = pod_and_template();
    let running = Running::start(&api, claims_only(Features::default())).await;
    running.settle().await;
    running.stop().await;
    let claims = api.list::<ResourceClaim>();
    assert_eq!(claims.len(), 1);
    let owner = &claims[0].metadata.owner_references.as_ref().expect("owned")[0];
    assert_eq!(
        (owner.controller, owner.block_owner_deletion),
        (Some(true), None)
    );
    let pod = api.get::<Pod>(Some(NAMESPACE), POD).expect("pod");
    let managers: Vec<(Option<String>, Option<String>, Option<String>)> = pod
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .map(|m| {
            (
                m.manager.clone(),
                m.operation.clone(),
                m.subresource.clone(),
            )
        })
        .collect();
    assert_eq!(
        managers,
        [(
            Some("ResourceClaimController".to_string()),
            Some("Apply".to_string()),
            Some("status".to_string())
        )]
    );
    assert_eq!(
        api.requests().count(Verb::Patch, "pods", Some("status")),
        1,
        "one status write"
    );
}
