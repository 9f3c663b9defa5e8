//! No write without a precondition where the design requires one
//! (docs/architecture.md, "One write door"): every update and patch of a
//! volume, a claim, a pod or a ResourceClaim carries the resourceVersion
//! and the UID of the copy its decision read, and every delete of one
//! carries the UID it was decided on. A server-side apply of a status
//! (which names only the fields its manager owns), events and the Lease
//! have paths of their own. Every request in memapi's log is a replica's:
//! the test world writes to the store directly.

use memapi::Verb;

use super::steps::{Steps, Violation, describe};

/// The kinds whose writes must be conditional.
const CONDITIONAL: [&str; 4] = [
    "persistentvolumes",
    "persistentvolumeclaims",
    "pods",
    "resourceclaims",
];

/// Every write of the run that lacks a precondition the design requires.
pub(crate) fn unconditional(steps: &Steps) -> Vec<Violation> {
    let mut found = Vec::new();
    for (at, entry, version) in steps.requests() {
        if !CONDITIONAL.contains(&entry.resource.as_str()) {
            continue;
        }
        let named = &entry.preconditions;
        let missing = match entry.verb {
            Verb::Update | Verb::Patch if !entry.apply => {
                match (&named.resource_version, &named.uid) {
                    (Some(_), Some(_)) => continue,
                    (None, Some(_)) => "no resourceVersion",
                    (Some(_), None) => "no UID",
                    (None, None) => "neither resourceVersion nor UID",
                }
            }
            Verb::Delete if named.uid.is_none() => "no UID",
            Verb::DeleteCollection => "a collection",
            _ => continue,
        };
        found.push(Violation {
            invariant: "unconditional-write",
            object: format!(
                "{} {}",
                entry.resource,
                entry.name.as_deref().unwrap_or_default()
            ),
            version,
            step: describe(at, entry),
            detail: format!("{} sent with {missing} as precondition", entry.verb),
        });
    }
    found
}
