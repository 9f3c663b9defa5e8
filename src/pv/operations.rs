//! The names of the controller's long operations, spelled as upstream's
//! (`recycle-<pv>[<uid>]`, `delete-<pv>[<uid>]`,
//! `provision-<ns>/<claim>[<uid>]`), so the operation tracker runs at most
//! one recycle or delete per volume and one provisioning per claim. The
//! kind of each (`recycle`, `delete`, `provision`) is the `operation_name`
//! label of upstream's `volume_operation_total_*` series.

use crate::runtime::keys::ObjectKey;
use crate::runtime::operations::OperationName;

/// The kind of a volume's recycle.
pub(crate) const RECYCLE: &str = "recycle";

/// The kind of a volume's delete.
pub(crate) const DELETE: &str = "delete";

/// The kind of a claim's provisioning.
pub(crate) const PROVISION: &str = "provision";

/// The recycle operation of a volume: `recycle-<pv>[<uid>]`.
pub(crate) fn recycle(pv_name: &str, pv_uid: &str) -> OperationName {
    OperationName::new(RECYCLE, ObjectKey::new("", pv_name), pv_uid)
}

/// The delete operation of a volume: `delete-<pv>[<uid>]`.
pub(crate) fn delete(pv_name: &str, pv_uid: &str) -> OperationName {
    OperationName::new(DELETE, ObjectKey::new("", pv_name), pv_uid)
}

/// The provision operation of a claim: `provision-<ns>/<claim>[<uid>]`.
pub(crate) fn provision(namespace: &str, claim_name: &str, claim_uid: &str) -> OperationName {
    OperationName::new(PROVISION, ObjectKey::new(namespace, claim_name), claim_uid)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_spelled_as_upstream() {
        let recycle = recycle("pv1", "u1");
        assert_eq!(recycle.to_string(), "recycle-pv1[u1]");
        assert_eq!(recycle.kind(), "recycle");
        let delete = delete("pv1", "u1");
        assert_eq!(delete.to_string(), "delete-pv1[u1]");
        assert_eq!(delete.kind(), "delete");
        let provision = provision("ns", "claim", "u2");
        assert_eq!(provision.to_string(), "provision-ns/claim[u2]");
        assert_eq!(provision.kind(), "provision");
    }
}
