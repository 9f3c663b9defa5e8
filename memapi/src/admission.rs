//! The admission plugins of a Kubernetes 1.20 apiserver that touch volumes
//! and claims:
//!
//! - StorageObjectInUseProtection (mutating, on create): every PV gets the
//!   `kubernetes.io/pv-protection` finalizer and every PVC the
//!   `kubernetes.io/pvc-protection` one. Optional here
//!   ([`MemApiConfig::protection_finalizers`](super::MemApiConfig)), since no
//!   controller removes them.
//! - PersistentVolumeClaimResize (validating, on update of a claim): a
//!   claim's storage request may grow only when it is Bound and its storage
//!   class exists, is the same before and after, and sets
//!   `allowVolumeExpansion: true`; otherwise 403 Forbidden. Always on, as on
//!   a real server. It runs after validation, so a 422 comes first.
//! - OwnerReferencesPermissionEnforcement (validating, on create and
//!   update, when [`MemApiConfig::owner_references_permission_enforcement`](super::MemApiConfig)
//!   is set, as `--enable-admission-plugins` sets it): a request that
//!   changes an object's ownerReferences needs `delete` on the object
//!   (not on a create), and one that makes a reference
//!   `blockOwnerDeletion: true` needs `update` on the owner's
//!   `finalizers` subresource; otherwise 403 Forbidden in the API
//!   server's words. `pods/status` is exempt, as upstream. Only requests
//!   of a named user are checked (see `rbac.rs`).
//!
//! They apply to requests through the API only, never to the test levers.

use super::object::{self, set_at, str_at, value_at};
use super::rbac::{Attributes, User};
use super::resources::{self, ResourceKind};
use super::status::ApiError;
use super::store::Store;
use k8s_names::{ANN_BETA_STORAGE_CLASS, FINALIZER_PV_PROTECTION, FINALIZER_PVC_PROTECTION};
use quantity::Amount;
use serde_json::{Value, json};

/// The mutating admission of a create: adds the protection finalizer to a
/// new PV or PVC (unless already there) when the server is configured to.
pub(crate) fn admit_create(store: &Store, kind: &ResourceKind, obj: &mut Value) {
    if !store.protection_finalizers || !kind.group.is_empty() {
        return;
    }
    let finalizer = match kind.plural {
        "persistentvolumes" => FINALIZER_PV_PROTECTION,
        "persistentvolumeclaims" => FINALIZER_PVC_PROTECTION,
        _ => return,
    };
    let mut finalizers: Vec<Value> = value_at(obj, "metadata.finalizers")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if !finalizers.iter().any(|f| f.as_str() == Some(finalizer)) {
        finalizers.push(json!(finalizer));
        set_at(obj, "metadata.finalizers", Value::Array(finalizers));
    }
}

/// The validating admission of a main-resource update of a claim
/// (PersistentVolumeClaimResize); `new` is the validated object to store.
pub(crate) fn validate_claim_update(
    store: &Store,
    new: &Value,
    old: &Value,
) -> Result<(), ApiError> {
    let size = |o: &Value| {
        str_at(o, "spec.resources.requests.storage")
            .and_then(|q| Amount::parse(q).ok())
            .unwrap_or(Amount::ZERO)
    };
    if size(new) <= size(old) {
        return Ok(());
    }
    let forbidden = |why: &str| {
        Err(ApiError::forbidden(
            "",
            "persistentvolumeclaims",
            super::object::name(new),
            why,
        ))
    };
    if str_at(old, "status.phase") != Some("Bound") {
        return forbidden("Only bound persistent volume claims can be expanded");
    }
    if !allows_resize(store, new, old) {
        return forbidden(
            "only dynamically provisioned pvc can be resized and the storageclass that provisions the pvc must support resize",
        );
    }
    Ok(())
}

/// The class of a claim as `GetPersistentVolumeClaimClass` reads it: the
/// beta annotation first, then `spec.storageClassName`.
fn claim_class(claim: &Value) -> &str {
    value_at(claim, "metadata.annotations")
        .and_then(|a| a.get(ANN_BETA_STORAGE_CLASS))
        .and_then(Value::as_str)
        .or_else(|| str_at(claim, "spec.storageClassName"))
        .unwrap_or_default()
}

/// Whether the claim's (unchanged) storage class allows volume expansion.
fn allows_resize(store: &Store, new: &Value, old: &Value) -> bool {
    let class = claim_class(new);
    if class.is_empty() || class != claim_class(old) {
        return false;
    }
    resources::by_path("storage.k8s.io", "v1", "storageclasses")
        .and_then(|kind| store.get(kind, "", class))
        .and_then(|sc| value_at(&sc, "allowVolumeExpansion").and_then(Value::as_bool))
        .unwrap_or(false)
}

/// OwnerReferencesPermissionEnforcement: whether `user` may make the
/// ownerReferences of `new` (a create when `old` is `None`) what they are.
pub(crate) fn validate_owner_references(
    store: &Store,
    user: Option<&User>,
    kind: &ResourceKind,
    subresource: Option<&str>,
    new: &Value,
    old: Option<&Value>,
) -> Result<(), ApiError> {
    let Some(user) = user else {
        return Ok(());
    };
    let exempt = kind.group.is_empty() && kind.plural == "pods" && subresource == Some("status");
    if !store.owner_references_permission_enforcement || exempt {
        return Ok(());
    }
    let references = |o: &Value| {
        value_at(o, "metadata.ownerReferences")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let new_references = references(new);
    let old_references = old.map(references);
    let changing = match &old_references {
        None => !new_references.is_empty(),
        Some(old) => *old != new_references,
    };
    if !changing {
        return Ok(());
    }
    let (namespace, name) = (object::namespace(new), object::name(new));
    let forbidden = |why: String| Err(ApiError::forbidden(kind.group, kind.plural, name, &why));
    if old.is_some() {
        let delete = Attributes {
            verb: "delete",
            group: kind.group,
            resource: kind.plural,
            subresource,
            namespace,
            name,
        };
        if !store.rbac.allows(user, &delete) {
            return forbidden(
                "cannot set an ownerRef on a resource you can't delete: , <nil>".to_string(),
            );
        }
    }
    let blocking = |r: &Value| r.get("blockOwnerDeletion").and_then(Value::as_bool) == Some(true);
    for reference in new_references.iter().filter(|r| blocking(r)) {
        let was_blocking = old_references
            .iter()
            .flatten()
            .find(|o| o.get("uid") == reference.get("uid"))
            .is_some_and(blocking);
        if was_blocking {
            continue;
        }
        let field = |key: &str| reference.get(key).and_then(Value::as_str).unwrap_or("");
        let Some(owner) = resources::by_type(field("apiVersion"), field("kind")) else {
            return forbidden(format!(
                "cannot set blockOwnerDeletion in this case because cannot find RESTMapping for APIVersion {} Kind {}: , <nil>",
                field("apiVersion"),
                field("kind")
            ));
        };
        let finalizers = Attributes {
            verb: "update",
            group: owner.group,
            resource: owner.plural,
            subresource: Some("finalizers"),
            namespace: if owner.namespaced { namespace } else { "" },
            name: field("name"),
        };
        if !store.rbac.allows(user, &finalizers) {
            return forbidden(
                "cannot set blockOwnerDeletion if an ownerReference refers to a resource you can't set finalizers on: , <nil>"
                    .to_string(),
            );
        }
    }
    Ok(())
}
