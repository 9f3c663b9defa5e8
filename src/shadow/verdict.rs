//! The verdict on one decision of shadow mode: whether what the cluster
//! shows of its subject agrees with it, differs, or leaves it open, and
//! what it shows, for people.

use super::BindJudge;
use super::decisions::{Decision, Expected, Subject};
use super::views::{Field, View};

/// The verdict on one decision.
pub(super) enum Verdict {
    Agree,
    Differ(String),
    Open(String),
}

/// Whether `object` (what the cluster shows of the decision's subject;
/// `None`: gone) agrees with `decision`, differs, or is still open; a bind
/// to another volume agrees when `judge` finds it as good.
pub(super) fn verdict(
    decision: &Decision,
    object: Option<&View<'_>>,
    judge: Option<&BindJudge>,
) -> Verdict {
    let deleting = object.is_some_and(|o| o.deleting);
    let seen = || summary(object, decision);
    let Some(object) = object else {
        return match &decision.expected {
            Expected::Gone
            | Expected::Finalizer { present: false, .. }
            | Expected::ReservedFor(_)
            | Expected::Field { value: None, .. } => Verdict::Agree,
            _ => Verdict::Open(seen()),
        };
    };
    let met = match &decision.expected {
        Expected::BoundTo(ours) => match object.volume_name() {
            Some(theirs) if theirs == ours => true,
            Some(theirs) => {
                let equivalent = match (&decision.subject, judge) {
                    (Subject::Object { key, .. }, Some(judge)) => {
                        (judge.equivalent)(key, ours, theirs)
                    }
                    _ => false,
                };
                return if equivalent {
                    Verdict::Agree
                } else {
                    Verdict::Differ(seen())
                };
            }
            _ => false,
        },
        Expected::Field { field, value } => {
            let current = object.field(*field);
            current == value.as_deref() || bound_since(decision, current)
        }
        Expected::Annotation { keys, value } => keys
            .iter()
            .any(|k| object.annotation(k) == Some(value.as_str())),
        Expected::Annotated(keys) => keys.iter().any(|k| object.annotation(k).is_some()),
        Expected::NoAnnotation(key) => object.annotation(key).is_none(),
        Expected::Finalizer { name, present } => object.has_finalizer(name) == *present,
        Expected::ReservedFor(uids) => object.reserved_for() == *uids,
        Expected::Recorded(entries) => entries.is_subset(&object.recorded()),
        Expected::Exists => true,
        Expected::Gone => deleting,
    };
    if met {
        Verdict::Agree
    } else {
        Verdict::Open(seen())
    }
}

/// What the cluster shows of a decision's subject, for people.
fn summary(object: Option<&View<'_>>, decision: &Decision) -> String {
    let Some(object) = object else {
        return "gone".to_string();
    };
    match &decision.expected {
        Expected::BoundTo(_) => match object.volume_name() {
            Some(volume) => format!("bound to volume {volume}"),
            None => format!(
                "not bound (phase {})",
                object.field(Field::Phase).unwrap_or("none")
            ),
        },
        Expected::Field { field, .. } => format!(
            "{} = {}",
            field.path(),
            object.field(*field).unwrap_or("none")
        ),
        Expected::Annotation { keys, .. } => format!(
            "annotation {} = {}",
            keys.first().copied().unwrap_or(""),
            keys.iter()
                .find_map(|k| object.annotation(k))
                .unwrap_or("none")
        ),
        Expected::Annotated(keys) => format!(
            "annotation {}",
            if keys.iter().any(|k| object.annotation(k).is_some()) {
                "there"
            } else {
                "missing"
            }
        ),
        Expected::NoAnnotation(key) => format!("annotation {key} still there"),
        Expected::Finalizer { .. } => format!("finalizers {:?}", object.finalizers()),
        Expected::ReservedFor(_) => format!("reserved for {:?}", object.reserved_for()),
        Expected::Recorded(_) => format!("recorded entries {:?}", object.recorded()),
        Expected::Exists => "exists".to_string(),
        Expected::Gone => "not deleted".to_string(),
    }
}

/// Whether a phase decision on the way to a binding (a volume made
/// Available or Pending, a claim left Pending) was overtaken by the
/// binding itself: the other controller may bind without writing the
/// phase first, as this one does when the binding comes at once.
fn bound_since(decision: &Decision, current: Option<&str>) -> bool {
    let waypoint = matches!(
        &decision.expected,
        Expected::Field { field: Field::Phase, value: Some(phase) }
            if phase == "Available" || phase == "Pending"
    );
    waypoint && matches!(decision.kind, "volume_phase" | "claim_phase") && current == Some("Bound")
}
