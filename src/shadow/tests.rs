use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::resource::v1::ResourceClaim;
use serde_json::json;

use super::decisions::of_write;
use super::*;
use crate::runtime::plan::Verb;
use crate::runtime::shadow::Shadow;

/// A typed object from JSON, for tests that write objects as JSON.
pub(crate) fn typed<K: serde::de::DeserializeOwned>(json: serde_json::Value) -> K {
    serde_json::from_value(json).unwrap()
}

impl Comparison {
    /// The kinds of the decisions waiting for the cluster.
    fn kinds_pending(&self) -> std::collections::BTreeSet<&'static str> {
        self.lock()
            .pending
            .values()
            .flatten()
            .map(|p| p.decision.kind)
            .collect()
    }
}

fn shadow() -> (Comparison, Metrics) {
    let metrics = Metrics::new().unwrap();
    let shadow = Comparison::new(
        &ShadowConfig {
            window: Duration::from_secs(30),
        },
        &metrics,
    )
    .unwrap();
    (shadow, metrics)
}

fn claim(volume: Option<&str>) -> PersistentVolumeClaim {
    typed(
        json!({ "metadata": { "namespace": "ns", "name": "c", "uid": "c-uid" },
        "spec": { "volumeName": volume }, "status": { "phase": if volume.is_some() { "Bound" } else { "Pending" } } }),
    )
}

fn volume(phase: &str, deleting: bool) -> PersistentVolume {
    let mut volume: PersistentVolume =
        typed(json!({ "metadata": { "name": "v1", "uid": "u" }, "status": { "phase": phase } }));
    if deleting {
        volume.metadata.deletion_timestamp = Some(typed(json!("2026-11-25T04:04:11Z")));
        volume.metadata.finalizers = Some(vec!["kubernetes.io/pv-protection".to_string()]);
    }
    volume
}

/// The cluster shows claim `c`, bound to `volume` or not.
fn observe_claim(shadow: &Comparison, volume: Option<&str>) {
    let claim = claim(volume);
    shadow.observed_claim(&key(), "c-uid", volume, || View::of(&claim));
}

fn key() -> ObjectKey {
    ObjectKey::new("ns", "c")
}

const BINDER: &str = "persistentvolume-binder-controller";

/// Keeps what a write of `resource` by `controller` from `before` to
/// `after` decides, as the comparison does for a write it is handed.
pub(super) fn intend<K: kube::Resource + std::any::Any>(
    shadow: &Comparison,
    controller: &'static str,
    resource: &str,
    verb: Verb,
    before: Option<&K>,
    after: Option<&K>,
) {
    let decisions = of_write(
        resource,
        verb,
        before.map(View::of).as_ref(),
        after.map(View::of).as_ref(),
    );
    shadow.expect(controller, decisions);
}

#[tokio::test(start_paused = true)]
async fn a_bind_the_cluster_makes_too_agrees_and_releases_its_hold() {
    let (shadow, _) = shadow();
    intend(
        &shadow,
        BINDER,
        "persistentvolumeclaims",
        Verb::Update,
        Some(&claim(None)),
        Some(&claim(Some("v1"))),
    );
    let held = Arc::new(());
    shadow.keep("c-uid", "v", Box::new(Arc::clone(&held)));
    assert_eq!(Arc::strong_count(&held), 2);
    observe_claim(&shadow, None);
    assert_eq!(shadow.totals(), (0, 0), "not yet");
    observe_claim(&shadow, Some("v1"));
    assert_eq!(shadow.totals(), (1, 0));
    assert_eq!(Arc::strong_count(&held), 1, "the reservation is let go");
    assert!(shadow.report().differences.is_empty());
}

#[tokio::test(start_paused = true)]
async fn another_volume_differs_unless_equivalent() {
    let (shadow, _) = shadow();
    shadow.set_judge(BindJudge {
        foresee: Box::new(|_, _| None),
        equivalent: Box::new(|_, ours, theirs| (ours, theirs) == ("v1", "v1-twin")),
        would_bind: Box::new(|_, _| Some(Choice::Pending)),
    });
    intend(
        &shadow,
        BINDER,
        "persistentvolumeclaims",
        Verb::Update,
        Some(&claim(None)),
        Some(&claim(Some("v1"))),
    );
    observe_claim(&shadow, Some("v1-twin"));
    assert_eq!(shadow.totals(), (1, 0), "an equivalent volume agrees");
    intend(
        &shadow,
        BINDER,
        "persistentvolumeclaims",
        Verb::Update,
        Some(&claim(None)),
        Some(&claim(Some("v1"))),
    );
    observe_claim(&shadow, Some("v9"));
    assert_eq!(shadow.totals(), (1, 1));
    let report = shadow.report();
    assert_eq!(report.differences[0].ours, "bind to volume v1");
    assert_eq!(report.differences[0].upstream, "bound to volume v9");
}

#[tokio::test(start_paused = true)]
async fn a_decision_nothing_comes_to_differs_after_the_window() {
    let (shadow, metrics) = shadow();
    let before = volume("Bound", false);
    let after = volume("Released", false);
    intend(
        &shadow,
        BINDER,
        "persistentvolumes",
        Verb::Update,
        Some(&before),
        Some(&after),
    );
    shadow.observed(
        "persistentvolumes",
        &ObjectKey::cluster("v1"),
        Some("u"),
        Some(&View::of(&before)),
    );
    tokio::time::advance(Duration::from_secs(29)).await;
    shadow.sweep();
    assert_eq!(shadow.totals(), (0, 0));
    tokio::time::advance(Duration::from_secs(2)).await;
    shadow.sweep();
    assert_eq!(shadow.totals(), (0, 1));
    let report = shadow.report();
    assert_eq!(report.differences[0].kind, "volume_phase");
    assert_eq!(
        report.differences[0].upstream,
        "status.phase = Bound after 30s"
    );
    let text = metrics.render().unwrap();
    assert!(text.contains("pv_controller_shadow_decisions_total{controller=\"persistentvolume-binder-controller\",kind=\"volume_phase\",outcome=\"differ\"} 1"), "{text}");
}

#[tokio::test(start_paused = true)]
async fn a_bind_made_first_by_the_other_controller_is_judged_by_ours() {
    let (shadow, _) = shadow();
    shadow.set_judge(BindJudge {
        foresee: Box::new(|_, _| None),
        equivalent: Box::new(|_, _, _| false),
        would_bind: Box::new(|claim, _| match claim.name.as_str() {
            "c" => Some(Choice::Bind("v1".to_string())),
            "gone" => None,
            _ => Some(Choice::Pending),
        }),
    });
    observe_claim(&shadow, None);
    observe_claim(&shadow, Some("v1"));
    shadow.sweep();
    assert_eq!(shadow.totals(), (0, 0), "judged once the caches caught up");
    assert_eq!(shadow.report().pending, 1);
    tokio::time::advance(THEIR_BIND_WAIT).await;
    shadow.sweep();
    assert_eq!(shadow.totals(), (1, 0));
    let other = ObjectKey::new("ns", "d");
    let d: PersistentVolumeClaim = typed(
        json!({ "metadata": { "namespace": "ns", "name": "d", "uid": "d-uid" }, "spec": {} }),
    );
    shadow.observed_claim(&other, "d-uid", None, || View::of(&d));
    shadow.observed_claim(&other, "d-uid", Some("v2"), || View::of(&d));
    tokio::time::advance(THEIR_BIND_WAIT).await;
    shadow.sweep();
    assert_eq!(shadow.totals(), (1, 1));
    assert_eq!(
        shadow.report().differences[0].ours,
        "leave the claim Pending"
    );
    let gone = ObjectKey::new("ns", "gone");
    shadow.observed_claim(&gone, "g-uid", None, || unreachable!("not waited for"));
    shadow.observed_claim(&gone, "g-uid", Some("v3"), || {
        unreachable!("not waited for")
    });
    tokio::time::advance(THEIR_BIND_WAIT).await;
    shadow.sweep();
    assert_eq!(shadow.totals(), (1, 1), "a claim gone since is not judged");
}

#[tokio::test(start_paused = true)]
async fn a_generated_resource_claim_agrees_when_the_pods_claim_appears() {
    let (shadow, _) = shadow();
    let ours: ResourceClaim = typed(
        json!({ "metadata": { "namespace": "ns", "generateName": "p-gpu-",
        "annotations": { "resource.kubernetes.io/pod-claim-name": "gpu" },
        "ownerReferences": [ { "apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "pod-uid", "controller": true } ] },
        "spec": {} }),
    );
    intend(
        &shadow,
        "resourceclaim-controller",
        "resourceclaims",
        Verb::Create,
        None,
        Some(&ours),
    );
    assert_eq!(shadow.kinds_pending(), ["generate_claim"].into());
    let mut theirs = ours.clone();
    theirs.metadata.name = Some("p-gpu-abcde".to_string());
    shadow.observed(
        "resourceclaims",
        &ObjectKey::new("ns", "p-gpu-abcde"),
        Some("x"),
        Some(&View::of(&theirs)),
    );
    assert_eq!(shadow.totals(), (1, 0));
}

#[tokio::test(start_paused = true)]
async fn a_delete_the_cluster_made_first_agrees_at_once() {
    let (shadow, _) = shadow();
    let released = volume("Released", false);
    let deleting = volume("Released", true);
    intend(
        &shadow,
        BINDER,
        "persistentvolumes",
        Verb::Delete,
        Some(&released),
        None,
    );
    shadow.present(
        "persistentvolumes",
        &ObjectKey::cluster("v1"),
        Some(&View::of(&deleting)),
    );
    assert_eq!(shadow.totals(), (1, 0), "held by a finalizer, but deleted");
    intend(
        &shadow,
        BINDER,
        "persistentvolumes",
        Verb::Delete,
        Some(&released),
        None,
    );
    shadow.present("persistentvolumes", &ObjectKey::cluster("v1"), None);
    assert_eq!(shadow.totals(), (2, 0), "gone already");
    intend(
        &shadow,
        BINDER,
        "persistentvolumes",
        Verb::Delete,
        Some(&released),
        None,
    );
    shadow.present(
        "persistentvolumes",
        &ObjectKey::cluster("v1"),
        Some(&View::of(&released)),
    );
    assert_eq!(
        shadow.totals(),
        (2, 0),
        "still there: the cluster has a window"
    );
}

#[tokio::test(start_paused = true)]
async fn what_is_kept_about_an_object_goes_with_it() {
    let (shadow, _) = shadow();
    let before = volume("Bound", false);
    let after = volume("Released", false);
    intend(
        &shadow,
        BINDER,
        "persistentvolumes",
        Verb::Update,
        Some(&before),
        Some(&after),
    );
    tokio::time::advance(Duration::from_secs(31)).await;
    shadow.sweep();
    observe_claim(&shadow, None);
    {
        let state = shadow.lock();
        assert_eq!(state.unmet.len(), 1);
        assert!(state.unbound.contains("c-uid"));
    }
    shadow.forget("persistentvolumes", &ObjectKey::cluster("v1"), Some("u"));
    shadow.forget("persistentvolumeclaims", &key(), Some("c-uid"));
    let state = shadow.lock();
    assert!(state.unmet.is_empty());
    assert!(state.unbound.is_empty());
}

#[tokio::test(start_paused = true)]
async fn an_operation_is_judged_by_what_it_shows_first_on_the_cluster() {
    use crate::pv::{DELETE, FirstSign, Foreseen, PROVISION, RECYCLE, delete, provision, recycle};
    let (shadow, _) = shadow();
    let version = Arc::new(std::sync::Mutex::new("1".to_string()));
    let seen = Arc::clone(&version);
    shadow.set_judge(BindJudge {
        foresee: Box::new(move |kind, object| {
            let version = Some(seen.lock().unwrap().clone());
            let sign = match (kind, object.name.as_str()) {
                (RECYCLE, "v1") => FirstSign::Pod("default".into(), "recycler-for-v1".into()),
                (DELETE, "v1" | "shown") => FirstSign::Gone,
                (DELETE, "odd") => FirstSign::Failed,
                (DELETE, "external") => FirstSign::Nothing,
                (PROVISION, "c") => FirstSign::Handed,
                _ => return None,
            };
            Some(Foreseen {
                shown: object.name == "shown",
                sign,
                version,
            })
        }),
        equivalent: Box::new(|_, _, _| false),
        would_bind: Box::new(|_, _| None),
    });
    shadow.start(BINDER, &recycle("v1", "u"));
    shadow.start(BINDER, &provision("ns", "c", "c-uid"));
    shadow.start(BINDER, &delete("external", "e"));
    shadow.start(BINDER, &recycle("unknown", "x"));
    assert_eq!(
        shadow.kinds_pending(),
        ["provisioning", "recycle"].into(),
        "nothing started; an external delete and an unknown volume are no decision"
    );
    let pod: k8s_openapi::api::core::v1::Pod = typed(
        json!({ "metadata": { "namespace": "default", "name": "recycler-for-v1", "uid": "p" } }),
    );
    shadow.observed(
        "pods",
        &ObjectKey::new("default", "recycler-for-v1"),
        Some("p"),
        Some(&View::of(&pod)),
    );
    assert_eq!(shadow.totals(), (1, 0), "the recycler pod is there");
    shadow.start(BINDER, &recycle("v1", "u"));
    assert_eq!(
        shadow.kinds_pending(),
        ["provisioning"].into(),
        "the same recycle started again on the same volume is the same decision"
    );
    let handed: PersistentVolumeClaim = typed(json!({
        "metadata": { "namespace": "ns", "name": "c", "uid": "c-uid",
            "annotations": { "volume.kubernetes.io/storage-provisioner": "example.com/nfs" } },
        "spec": {} }));
    shadow.observed(
        "persistentvolumeclaims",
        &key(),
        Some("c-uid"),
        Some(&View::of(&handed)),
    );
    assert_eq!(shadow.totals(), (2, 0), "handed to its provisioner");
    shadow.start(BINDER, &delete("odd", "o"));
    let failed: PersistentVolume = typed(
        json!({ "metadata": { "name": "odd", "uid": "o" }, "status": { "phase": "Failed" } }),
    );
    shadow.observed(
        "persistentvolumes",
        &ObjectKey::cluster("odd"),
        Some("o"),
        Some(&View::of(&failed)),
    );
    assert_eq!(shadow.totals(), (3, 0), "no plugin deletes it: Failed");
    *version.lock().unwrap() = "2".to_string();
    shadow.start(BINDER, &recycle("v1", "u"));
    assert_eq!(
        shadow.kinds_pending(),
        ["recycle"].into(),
        "on a newer version of the volume, a recycle is a new decision"
    );
    shadow.start(BINDER, &delete("v1", "u"));
    shadow.observed(
        "persistentvolumes",
        &ObjectKey::cluster("v1"),
        Some("u"),
        None,
    );
    assert_eq!(shadow.totals(), (4, 0), "deleted");
    tokio::time::advance(Duration::from_secs(31)).await;
    shadow.sweep();
    assert_eq!(
        shadow.totals(),
        (4, 1),
        "the second recycle's pod never came: a difference"
    );
    shadow.start(BINDER, &delete("shown", "s"));
    assert_eq!(
        shadow.totals(),
        (5, 1),
        "a delete the cluster made first agrees at once"
    );
    assert!(shadow.kinds_pending().is_empty());
}
