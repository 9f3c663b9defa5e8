//! What an intended write or operation decides, in terms the cluster can
//! be checked against: one write may hold several decisions (a claim's
//! spec update binds it and hands it to a provisioner), and the writes of
//! one decision spread over several objects are folded into one (binding a
//! claim writes the volume's claimRef and phase and the claim's volumeName
//! and phase: one `bind` decision, judged on the claim). An operation is
//! judged by what it shows first on the cluster: a recycle's pod, a
//! deleted volume gone, a volume no plugin can recycle or delete Failed, a
//! claim handed to its provisioner.

use std::collections::BTreeSet;

use k8s_names::{
    ANN_BETA_STORAGE_PROVISIONER, ANN_POD_CLAIM_NAME, ANN_SELECTED_NODE, ANN_STORAGE_PROVISIONER,
};

use super::views::{Field, View};
use crate::pv::{DELETE, FirstSign, PROVISION, RECYCLE};
use crate::runtime::keys::ObjectKey;
use crate::runtime::operations::OperationName;
use crate::runtime::plan::Verb;

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
    /// A field with this value, or absent (`None`).
    Field {
        /// The field.
        field: Field,
        /// The value.
        value: Option<String>,
    },
    /// An annotation with this value under any of these keys.
    Annotation {
        /// The keys (a beta and a GA spelling).
        keys: &'static [&'static str],
        /// The value.
        value: String,
    },
    /// An annotation under any of these keys, whatever its value.
    Annotated(&'static [&'static str]),
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
const PROVISIONER_KEYS: &[&str] = &[ANN_STORAGE_PROVISIONER, ANN_BETA_STORAGE_PROVISIONER];

fn key_of(object: &View<'_>) -> ObjectKey {
    ObjectKey::new(object.namespace, object.name)
}

fn uid_of(object: &View<'_>) -> Option<String> {
    object.uid.map(str::to_string)
}

/// The decisions of a write of `resource` by `verb`, from the object as it
/// was (`before`) to the object as it would be (`after`).
pub(crate) fn of_write(
    resource: &str,
    verb: Verb,
    before: Option<&View<'_>>,
    after: Option<&View<'_>>,
) -> Vec<Decision> {
    match (verb, before, after) {
        (Verb::Create, _, Some(after)) => created(resource, after),
        (Verb::Delete, Some(before), _) => deleted(resource, before),
        (Verb::Update, Some(before), Some(after)) => match resource {
            CLAIMS => claim_update(before, after),
            VOLUMES => volume_update(before, after),
            RESOURCE_CLAIMS => resource_claim_update(before, after),
            _ => Vec::new(),
        },
        (Verb::Apply, _, Some(after)) if resource == PODS => {
            let entries = after.recorded();
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

/// The decision of starting `operation`, judged by what it shows first
/// on the cluster (`first_sign`, the binder's foresight for a recycle or a
/// delete): a recycler pod, the volume unbound, gone or Failed, the claim
/// handed to a provisioner. A delete an external program does is no
/// decision.
pub(crate) fn of_start(operation: &OperationName, first_sign: FirstSign) -> Vec<Decision> {
    let object = operation.object().clone();
    let uid = Some(operation.uid().to_string());
    let on_volume = |kind: &'static str, ours: String, expected: Expected| Decision {
        kind,
        ours,
        subject: Subject::Object {
            resource: VOLUMES,
            key: object.clone(),
        },
        uid: uid.clone(),
        expected,
    };
    let failed = Expected::Field {
        field: Field::Phase,
        value: Some("Failed".to_string()),
    };
    let decision = match (operation.kind(), first_sign) {
        (RECYCLE, FirstSign::Pod(namespace, name)) => Decision {
            kind: "recycle",
            ours: format!("recycle {VOLUMES} {object} with pod {namespace}/{name}"),
            subject: Subject::Object {
                resource: PODS,
                key: ObjectKey::new(namespace, name),
            },
            uid: None,
            expected: Expected::Exists,
        },
        (RECYCLE, FirstSign::Unbound) => on_volume(
            "recycle",
            format!("recycle {VOLUMES} {object}"),
            Expected::Field {
                field: Field::ClaimRefUid,
                value: None,
            },
        ),
        (RECYCLE, FirstSign::Failed) => on_volume(
            "recycle",
            "fail the recycle: no plugin recycles the volume".to_string(),
            failed,
        ),
        (DELETE, FirstSign::Gone) => on_volume(
            "delete_volume",
            format!("delete {VOLUMES} {object}"),
            Expected::Gone,
        ),
        (DELETE, FirstSign::Failed) => on_volume(
            "delete_volume",
            "fail the delete: no plugin deletes the volume".to_string(),
            failed,
        ),
        // The claim is handed to its provisioner (the annotation kept by
        // an in-process plugin's provisioning as by an external
        // provisioner's).
        (PROVISION, FirstSign::Handed) => Decision {
            kind: "provisioning",
            ours: "hand to a provisioner".to_string(),
            subject: Subject::Object {
                resource: CLAIMS,
                key: object,
            },
            uid,
            expected: Expected::Annotated(PROVISIONER_KEYS),
        },
        _ => return Vec::new(),
    };
    vec![decision]
}

fn created(resource: &str, object: &View<'_>) -> Vec<Decision> {
    let key = key_of(object);
    let (kind, resource) = match resource {
        CLAIMS => ("create_claim", CLAIMS),
        RESOURCE_CLAIMS => {
            let (Some(pod_uid), Some(entry)) =
                (object.owner_pod, object.annotation(ANN_POD_CLAIM_NAME))
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

fn deleted(resource: &str, object: &View<'_>) -> Vec<Decision> {
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

fn subject(resource: &'static str, object: &View<'_>) -> (Subject, Option<String>) {
    (
        Subject::Object {
            resource,
            key: key_of(object),
        },
        uid_of(object),
    )
}

fn claim_update(before: &View<'_>, after: &View<'_>) -> Vec<Decision> {
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
    let volume = after.volume_name();
    if volume.is_some() && volume != before.volume_name() {
        let volume = volume.unwrap_or_default().to_string();
        push(
            "bind",
            Expected::BoundTo(volume.clone()),
            format!("bind to volume {volume}"),
        );
    }
    let class = after.field(Field::StorageClass);
    if class.is_some() && before.field(Field::StorageClass).is_none() {
        let class = class.unwrap_or_default().to_string();
        push(
            "default_class",
            Expected::Field {
                field: Field::StorageClass,
                value: Some(class.clone()),
            },
            format!("give storage class {class}"),
        );
    }
    let provisioner = PROVISIONER_KEYS.iter().find_map(|k| after.annotation(k));
    let before_provisioner = PROVISIONER_KEYS.iter().find_map(|k| before.annotation(k));
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
    if before.annotation(ANN_SELECTED_NODE).is_some()
        && after.annotation(ANN_SELECTED_NODE).is_none()
    {
        push(
            "reschedule",
            Expected::NoAnnotation(ANN_SELECTED_NODE),
            "give the node choice back to the scheduler".to_string(),
        );
    }
    let phase = after.field(Field::Phase);
    if phase != before.field(Field::Phase)
        && let Some(phase) = phase.filter(|p| *p != "Bound")
    {
        push(
            "claim_phase",
            Expected::Field {
                field: Field::Phase,
                value: Some(phase.to_string()),
            },
            format!("claim phase {phase}"),
        );
    }
    decisions
}

fn volume_update(before: &View<'_>, after: &View<'_>) -> Vec<Decision> {
    let (subject, uid) = subject(VOLUMES, after);
    let mut decisions = Vec::new();
    let claim_uid = after.field(Field::ClaimRefUid);
    if claim_uid.is_some() && claim_uid != before.field(Field::ClaimRefUid) {
        // The volume's half of a bind: judged on the claim.
        let (namespace, name) = after.claim_ref().unwrap_or_default();
        let claim = ObjectKey::new(namespace, name);
        let volume = after.name.to_string();
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
    if claim_uid.is_none() && before.field(Field::ClaimRefUid).is_some() {
        decisions.push(Decision {
            kind: "unbind",
            ours: "unbind the volume".to_string(),
            subject: subject.clone(),
            uid: uid.clone(),
            expected: Expected::Field {
                field: Field::ClaimRefUid,
                value: None,
            },
        });
    }
    let phase = after.field(Field::Phase);
    if phase != before.field(Field::Phase)
        && let Some(phase) = phase.filter(|p| *p != "Bound")
    {
        decisions.push(Decision {
            kind: "volume_phase",
            ours: format!("volume phase {phase}"),
            subject: subject.clone(),
            uid: uid.clone(),
            expected: Expected::Field {
                field: Field::Phase,
                value: Some(phase.to_string()),
            },
        });
    }
    let (old, new) = (before.finalizers(), after.finalizers());
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

fn resource_claim_update(before: &View<'_>, after: &View<'_>) -> Vec<Decision> {
    let (subject, uid) = subject(RESOURCE_CLAIMS, after);
    let mut decisions = Vec::new();
    let (old, new) = (before.reserved_for(), after.reserved_for());
    if old != new {
        decisions.push(Decision {
            kind: "reservation",
            ours: format!("reserved for {new:?}"),
            subject: subject.clone(),
            uid: uid.clone(),
            expected: Expected::ReservedFor(new),
        });
    }
    if before.field(Field::Allocation).is_some() && after.field(Field::Allocation).is_none() {
        decisions.push(Decision {
            kind: "deallocate",
            ours: "clear the allocation".to_string(),
            subject: subject.clone(),
            uid: uid.clone(),
            expected: Expected::Field {
                field: Field::Allocation,
                value: None,
            },
        });
    }
    for name in before.finalizers().difference(&after.finalizers()) {
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
mod tests;
