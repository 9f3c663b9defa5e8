//! What an intended write decides, in terms the cluster can be checked
//! against: one write may hold several decisions (a claim's spec update
//! binds it and hands it to a provisioner), and the writes of one decision
//! spread over several objects are folded into one (binding a claim writes
//! the volume's claimRef and phase and the claim's volumeName and phase:
//! one `bind` decision, judged on the claim).

use std::collections::BTreeSet;

use serde_json::Value;

use crate::runtime::keys::ObjectKey;

/// Which object (or which object to come) a decision is judged on.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Subject {
    /// An object of a resource (plural), by key.
    Object {
        /// The resource plural, `persistentvolumeclaims`.
        resource: &'static str,
        /// Its key.
        key: ObjectKey,
    },
    /// The ResourceClaim generated for a pod's entry: any claim of the
    /// namespace controlled by that pod and annotated with the entry.
    Generated {
        /// The pod's namespace.
        namespace: String,
        /// The pod's UID.
        pod_uid: String,
        /// The entry of `spec.resourceClaims`.
        entry: String,
    },
}

impl Subject {
    /// `resource namespace/name`, for reports.
    pub(crate) fn describe(&self) -> String {
        match self {
            Self::Object { resource, key } => format!("{resource} {key}"),
            Self::Generated {
                namespace,
                pod_uid,
                entry,
            } => format!("resourceclaims {namespace}/(pod {pod_uid}, entry {entry})"),
        }
    }
}

/// What the cluster must come to show for the decision to agree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Expected {
    /// The claim bound to this volume (or an equivalent one).
    BoundTo(String),
    /// A field (JSON pointer) with this value, or absent (`None`).
    Field {
        /// The pointer, e.g. `/status/phase`.
        pointer: &'static str,
        /// The value.
        value: Option<Value>,
    },
    /// An annotation with this value under any of these keys.
    Annotation {
        /// The keys (a beta and a GA spelling).
        keys: &'static [&'static str],
        /// The value.
        value: String,
    },
    /// An annotation gone.
    NoAnnotation(&'static str),
    /// A finalizer present or not.
    Finalizer {
        /// The finalizer.
        name: String,
        /// Whether it is there.
        present: bool,
    },
    /// `status.reservedFor` naming exactly these UIDs.
    ReservedFor(BTreeSet<String>),
    /// `status.resourceClaimStatuses` recording a claim for these entries.
    Recorded(BTreeSet<String>),
    /// The object exists.
    Exists,
    /// The object is gone or being deleted.
    Gone,
}

/// One decision of one write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Decision {
    /// What kind of decision (the metric's `kind`).
    pub(crate) kind: &'static str,
    /// What it is judged on.
    pub(crate) subject: Subject,
    /// The UID of the object judged on, when known: another incarnation
    /// of the name is another object.
    pub(crate) uid: Option<String>,
    /// What must come.
    pub(crate) expected: Expected,
    /// This controller's choice, for people.
    pub(crate) ours: String,
}

/// The resources whose objects decisions are judged on, by plural.
pub(crate) fn judged_resource(plural: &str) -> Option<&'static str> {
    [CLAIMS, VOLUMES, PODS, RESOURCE_CLAIMS]
        .into_iter()
        .find(|resource| *resource == plural)
}

const CLAIMS: &str = "persistentvolumeclaims";
const VOLUMES: &str = "persistentvolumes";
const PODS: &str = "pods";
const RESOURCE_CLAIMS: &str = "resourceclaims";

/// The annotation keys of a claim's provisioner.
const PROVISIONER_KEYS: &[&str] = &[
    "volume.kubernetes.io/storage-provisioner",
    "volume.beta.kubernetes.io/storage-provisioner",
];
const SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";
const POD_CLAIM_NAME: &str = "resource.kubernetes.io/pod-claim-name";

/// The annotations decisions are made of and judged on.
pub(crate) const JUDGED_ANNOTATIONS: [&str; 4] = [
    PROVISIONER_KEYS[0],
    PROVISIONER_KEYS[1],
    SELECTED_NODE,
    POD_CLAIM_NAME,
];

fn text<'a>(object: &'a Value, pointer: &str) -> Option<&'a str> {
    object
        .pointer(pointer)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

fn annotation<'a>(object: &'a Value, key: &str) -> Option<&'a str> {
    object
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(key))
        .and_then(Value::as_str)
}

fn finalizers(object: &Value) -> BTreeSet<String> {
    object
        .pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(str::to_string)
        .collect()
}

fn key_of(object: &Value) -> ObjectKey {
    ObjectKey::new(
        text(object, "/metadata/namespace").unwrap_or(""),
        text(object, "/metadata/name").unwrap_or(""),
    )
}

fn uid_of(object: &Value) -> Option<String> {
    text(object, "/metadata/uid").map(str::to_string)
}

/// The UIDs of `status.reservedFor`.
pub(crate) fn reserved_for(object: &Value) -> BTreeSet<String> {
    object
        .pointer("/status/reservedFor")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| c.get("uid").and_then(Value::as_str))
        .map(str::to_string)
        .collect()
}

/// The entries of `status.resourceClaimStatuses` that name a claim.
pub(crate) fn recorded(object: &Value) -> BTreeSet<String> {
    object
        .pointer("/status/resourceClaimStatuses")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|s| s.get("resourceClaimName").is_some_and(|n| !n.is_null()))
        .filter_map(|s| s.get("name").and_then(Value::as_str))
        .map(str::to_string)
        .collect()
}

/// The pod that controls an object, if one does: its UID.
pub(crate) fn controlling_pod(object: &Value) -> Option<&str> {
    object
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)?
        .iter()
        .find(|r| {
            r.get("kind") == Some(&Value::from("Pod"))
                && r.get("controller") == Some(&Value::Bool(true))
        })
        .and_then(|r| r.get("uid").and_then(Value::as_str))
}

/// The decisions of a write of `resource` by `verb` (`create`, `update`,
/// `apply`, `delete`), from the object as it was (`before`) to the object
/// as it would be (`after`).
pub(crate) fn of_write(
    resource: &str,
    verb: &str,
    before: Option<&Value>,
    after: Option<&Value>,
) -> Vec<Decision> {
    match (verb, before, after) {
        ("create", _, Some(after)) => created(resource, after),
        ("delete", Some(before), _) => deleted(resource, before),
        ("update", Some(before), Some(after)) => match resource {
            CLAIMS => claim_update(before, after),
            VOLUMES => volume_update(before, after),
            RESOURCE_CLAIMS => resource_claim_update(before, after),
            _ => Vec::new(),
        },
        ("apply", _, Some(after)) if resource == PODS => {
            let entries = recorded(after);
            let key = key_of(after);
            vec![Decision {
                kind: "record_claims",
                ours: format!("record claims of entries {entries:?}"),
                subject: Subject::Object {
                    resource: PODS,
                    key,
                },
                uid: before.and_then(uid_of),
                expected: Expected::Recorded(entries),
            }]
        }
        _ => Vec::new(),
    }
}

fn created(resource: &str, object: &Value) -> Vec<Decision> {
    let key = key_of(object);
    let (kind, resource) = match resource {
        CLAIMS => ("create_claim", CLAIMS),
        VOLUMES => ("provision", VOLUMES),
        PODS => ("recycle", PODS),
        RESOURCE_CLAIMS => {
            let (Some(pod_uid), Some(entry)) =
                (controlling_pod(object), annotation(object, POD_CLAIM_NAME))
            else {
                return Vec::new();
            };
            return vec![Decision {
                kind: "generate_claim",
                ours: format!("create a claim for entry {entry}"),
                subject: Subject::Generated {
                    namespace: key.namespace.clone(),
                    pod_uid: pod_uid.to_string(),
                    entry: entry.to_string(),
                },
                uid: None,
                expected: Expected::Exists,
            }];
        }
        _ => return Vec::new(),
    };
    vec![Decision {
        kind,
        ours: format!("create {resource} {key}"),
        subject: Subject::Object { resource, key },
        uid: None,
        expected: Expected::Exists,
    }]
}

fn deleted(resource: &str, object: &Value) -> Vec<Decision> {
    let kind = match resource {
        VOLUMES => "delete_volume",
        RESOURCE_CLAIMS => "delete_claim",
        // Recycler pods are deleted once they did their work: part of the
        // recycle, not a decision of its own.
        _ => return Vec::new(),
    };
    let key = key_of(object);
    vec![Decision {
        kind,
        ours: format!("delete {resource} {key}"),
        subject: Subject::Object {
            resource: match resource {
                VOLUMES => VOLUMES,
                _ => RESOURCE_CLAIMS,
            },
            key,
        },
        uid: uid_of(object),
        expected: Expected::Gone,
    }]
}

fn subject(resource: &'static str, object: &Value) -> (Subject, Option<String>) {
    (
        Subject::Object {
            resource,
            key: key_of(object),
        },
        uid_of(object),
    )
}

fn claim_update(before: &Value, after: &Value) -> Vec<Decision> {
    let (subject, uid) = subject(CLAIMS, after);
    let mut decisions = Vec::new();
    let mut push = |kind, expected, ours: String| {
        decisions.push(Decision {
            kind,
            subject: subject.clone(),
            uid: uid.clone(),
            expected,
            ours,
        });
    };
    let volume = text(after, "/spec/volumeName");
    if volume.is_some() && volume != text(before, "/spec/volumeName") {
        let volume = volume.unwrap_or_default().to_string();
        push(
            "bind",
            Expected::BoundTo(volume.clone()),
            format!("bind to volume {volume}"),
        );
    }
    let class = text(after, "/spec/storageClassName");
    if class.is_some() && text(before, "/spec/storageClassName").is_none() {
        let class = class.unwrap_or_default().to_string();
        push(
            "default_class",
            Expected::Field {
                pointer: "/spec/storageClassName",
                value: Some(Value::from(class.clone())),
            },
            format!("give storage class {class}"),
        );
    }
    let provisioner = PROVISIONER_KEYS.iter().find_map(|k| annotation(after, k));
    let before_provisioner = PROVISIONER_KEYS.iter().find_map(|k| annotation(before, k));
    if let Some(provisioner) = provisioner.filter(|p| Some(*p) != before_provisioner) {
        push(
            "provisioning",
            Expected::Annotation {
                keys: PROVISIONER_KEYS,
                value: provisioner.to_string(),
            },
            format!("hand to provisioner {provisioner}"),
        );
    }
    if annotation(before, SELECTED_NODE).is_some() && annotation(after, SELECTED_NODE).is_none() {
        push(
            "reschedule",
            Expected::NoAnnotation(SELECTED_NODE),
            "give the node choice back to the scheduler".to_string(),
        );
    }
    let phase = text(after, "/status/phase");
    if phase != text(before, "/status/phase")
        && let Some(phase) = phase.filter(|p| *p != "Bound")
    {
        push(
            "claim_phase",
            Expected::Field {
                pointer: "/status/phase",
                value: Some(Value::from(phase)),
            },
            format!("claim phase {phase}"),
        );
    }
    decisions
}

fn volume_update(before: &Value, after: &Value) -> Vec<Decision> {
    let (subject, uid) = subject(VOLUMES, after);
    let mut decisions = Vec::new();
    let claim_uid = text(after, "/spec/claimRef/uid");
    if claim_uid.is_some() && claim_uid != text(before, "/spec/claimRef/uid") {
        // The volume's half of a bind: judged on the claim.
        let claim = ObjectKey::new(
            text(after, "/spec/claimRef/namespace").unwrap_or(""),
            text(after, "/spec/claimRef/name").unwrap_or(""),
        );
        let volume = text(after, "/metadata/name").unwrap_or("").to_string();
        decisions.push(Decision {
            kind: "bind",
            ours: format!("bind to volume {volume}"),
            subject: Subject::Object {
                resource: CLAIMS,
                key: claim,
            },
            uid: claim_uid.map(str::to_string),
            expected: Expected::BoundTo(volume),
        });
    }
    if claim_uid.is_none() && text(before, "/spec/claimRef/uid").is_some() {
        decisions.push(Decision {
            kind: "unbind",
            ours: "unbind the volume".to_string(),
            subject: subject.clone(),
            uid: uid.clone(),
            expected: Expected::Field {
                pointer: "/spec/claimRef/uid",
                value: None,
            },
        });
    }
    let phase = text(after, "/status/phase");
    if phase != text(before, "/status/phase")
        && let Some(phase) = phase.filter(|p| *p != "Bound")
    {
        decisions.push(Decision {
            kind: "volume_phase",
            ours: format!("volume phase {phase}"),
            subject: subject.clone(),
            uid: uid.clone(),
            expected: Expected::Field {
                pointer: "/status/phase",
                value: Some(Value::from(phase)),
            },
        });
    }
    let (old, new) = (finalizers(before), finalizers(after));
    for (name, present) in new
        .difference(&old)
        .map(|f| (f, true))
        .chain(old.difference(&new).map(|f| (f, false)))
    {
        decisions.push(Decision {
            kind: "volume_finalizer",
            ours: format!(
                "{} finalizer {name}",
                if present { "add" } else { "remove" }
            ),
            subject: subject.clone(),
            uid: uid.clone(),
            expected: Expected::Finalizer {
                name: name.clone(),
                present,
            },
        });
    }
    decisions
}

fn resource_claim_update(before: &Value, after: &Value) -> Vec<Decision> {
    let (subject, uid) = subject(RESOURCE_CLAIMS, after);
    let mut decisions = Vec::new();
    let (old, new) = (reserved_for(before), reserved_for(after));
    if old != new {
        decisions.push(Decision {
            kind: "reservation",
            ours: format!("reserved for {new:?}"),
            subject: subject.clone(),
            uid: uid.clone(),
            expected: Expected::ReservedFor(new),
        });
    }
    if before
        .pointer("/status/allocation")
        .is_some_and(|a| !a.is_null())
        && after
            .pointer("/status/allocation")
            .is_none_or(Value::is_null)
    {
        decisions.push(Decision {
            kind: "deallocate",
            ours: "clear the allocation".to_string(),
            subject: subject.clone(),
            uid: uid.clone(),
            expected: Expected::Field {
                pointer: "/status/allocation",
                value: None,
            },
        });
    }
    for name in finalizers(before).difference(&finalizers(after)) {
        decisions.push(Decision {
            kind: "remove_finalizer",
            ours: format!("remove finalizer {name}"),
            subject: subject.clone(),
            uid: uid.clone(),
            expected: Expected::Finalizer {
                name: name.clone(),
                present: false,
            },
        });
    }
    decisions
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_bind_is_one_decision_on_the_claim_from_either_side() {
        let volume_before = json!({ "metadata": { "name": "v1", "uid": "pv-uid" }, "spec": {}, "status": { "phase": "Available" } });
        let volume_after = json!({ "metadata": { "name": "v1", "uid": "pv-uid" },
            "spec": { "claimRef": { "namespace": "ns", "name": "c", "uid": "c-uid" } }, "status": { "phase": "Bound" } });
        let from_volume = of_write(VOLUMES, "update", Some(&volume_before), Some(&volume_after));
        assert_eq!(from_volume.len(), 1, "{from_volume:?}");
        assert_eq!(from_volume[0].kind, "bind");
        assert_eq!(from_volume[0].expected, Expected::BoundTo("v1".into()));
        let claim_before = json!({ "metadata": { "namespace": "ns", "name": "c", "uid": "c-uid" }, "spec": {}, "status": { "phase": "Pending" } });
        let claim_after = json!({ "metadata": { "namespace": "ns", "name": "c", "uid": "c-uid",
            "annotations": { "pv.kubernetes.io/bind-completed": "yes" } }, "spec": { "volumeName": "v1" }, "status": { "phase": "Bound" } });
        let from_claim = of_write(CLAIMS, "update", Some(&claim_before), Some(&claim_after));
        assert_eq!(from_claim.len(), 1, "{from_claim:?}");
        assert_eq!(from_claim[0].subject, from_volume[0].subject);
        assert_eq!(from_claim[0].uid, from_volume[0].uid);
    }

    #[test]
    fn phases_finalizers_hand_offs_and_deletes_are_decisions() {
        let before = json!({ "metadata": { "name": "v1", "uid": "u", "finalizers": ["kubernetes.io/pv-controller"] },
            "spec": { "claimRef": { "namespace": "ns", "name": "c", "uid": "c-uid" } }, "status": { "phase": "Bound" } });
        let after = json!({ "metadata": { "name": "v1", "uid": "u" }, "spec": {}, "status": { "phase": "Released" } });
        let kinds: Vec<&str> = of_write(VOLUMES, "update", Some(&before), Some(&after))
            .iter()
            .map(|d| d.kind)
            .collect();
        assert_eq!(kinds, ["unbind", "volume_phase", "volume_finalizer"]);
        let claim =
            json!({ "metadata": { "namespace": "ns", "name": "c", "uid": "c" }, "spec": {} });
        let handed = json!({ "metadata": { "namespace": "ns", "name": "c", "uid": "c",
            "annotations": { "volume.beta.kubernetes.io/storage-provisioner": "p", "volume.kubernetes.io/storage-provisioner": "p" } }, "spec": {} });
        let decisions = of_write(CLAIMS, "update", Some(&claim), Some(&handed));
        assert_eq!(decisions.len(), 1);
        assert_eq!(decisions[0].kind, "provisioning");
        let deleted = of_write(VOLUMES, "delete", Some(&after), None);
        assert_eq!(deleted[0].expected, Expected::Gone);
        assert!(of_write(PODS, "delete", Some(&after), None).is_empty());
    }

    #[test]
    fn a_generated_resource_claim_is_judged_by_its_pod_and_entry() {
        let claim = json!({ "metadata": { "namespace": "ns", "generateName": "p-gpu-",
            "annotations": { POD_CLAIM_NAME: "gpu" },
            "ownerReferences": [ { "kind": "Pod", "uid": "pod-uid", "controller": true, "name": "p", "apiVersion": "v1" } ] } });
        let decisions = of_write(RESOURCE_CLAIMS, "create", None, Some(&claim));
        assert_eq!(
            decisions[0].subject,
            Subject::Generated {
                namespace: "ns".into(),
                pod_uid: "pod-uid".into(),
                entry: "gpu".into()
            }
        );
    }
}
