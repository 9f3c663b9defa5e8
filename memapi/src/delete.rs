//! DELETE as the real apiserver does it (Kubernetes 1.20's generic
//! registry `Store.Delete`, `rest.BeforeDelete` and the pod strategy's
//! `CheckGracefulDelete`).
//!
//! - Preconditions (uid, resourceVersion) are checked first, in
//!   `rest.BeforeDelete`'s words.
//! - Pods are deleted gracefully: the first DELETE sets
//!   `deletionTimestamp` to now plus the grace period and
//!   `deletionGracePeriodSeconds` to it. The period is the DeleteOptions'
//!   `gracePeriodSeconds`, else the pod's
//!   `spec.terminationGracePeriodSeconds`, else 30 (the API default); it is
//!   0 for a pod not scheduled to a node and for a pod that has Succeeded
//!   or Failed. A pod with a period above 0 lingers (watchers see MODIFIED)
//!   until a later DELETE with a shorter period, down to 0 (what the kubelet
//!   sends), removes it; a DELETE without a shorter period changes nothing.
//!   With a period of 0 the pod is written with its deletionTimestamp
//!   (MODIFIED) and then removed (DELETED), as on the real server.
//! - Any object with finalizers, pods included, only gets its
//!   deletionTimestamp (now, grace 0, generation bumped) and stays until an
//!   update removes its last finalizer.
//! - Other objects are removed at once.
//!
//! DELETE on a collection (`deletecollection`) deletes, one by one as
//! above, every object the request's namespace, label and field selectors
//! match, with the same DeleteOptions, and answers with the list of what
//! it deleted (the generic registry's `DeleteCollection`).

use super::object::{self, i64_at, rfc3339_in, rfc3339_shift, set_at, str_at, value_at};
use super::resources::ResourceKind;
use super::selectors::Filter;
use super::status::ApiError;
use super::store::Store;
use serde_json::{Value, json};
use std::sync::Arc;

/// The grace period a pod gets when neither the request nor its spec says.
const DEFAULT_TERMINATION_GRACE_SECONDS: i64 = 30;

/// Deletes an object (DELETE). `options` is the DeleteOptions body, whose
/// preconditions and `gracePeriodSeconds` are honoured. Returns the object
/// as last stored (still there when waiting for finalizers or a grace period).
pub(crate) fn delete(
    store: &mut Store,
    kind: &'static ResourceKind,
    ns: &str,
    name: &str,
    options: Option<&Value>,
) -> Result<Arc<Value>, ApiError> {
    let stored = store
        .get(kind, ns, name)
        .ok_or_else(|| ApiError::not_found(kind.group, kind.plural, name))?;
    check_preconditions(kind, &stored, options)?;
    if kind.is_pod() {
        let requested = options
            .and_then(|o| o.get("gracePeriodSeconds"))
            .and_then(Value::as_i64);
        return delete_pod(store, kind, &stored, requested);
    }
    if object::has_finalizers(&stored) {
        return Ok(mark_as_deleting(store, kind, &stored));
    }
    remove_now(store, kind, &stored)
}

/// Deletes every object of `kind` that `filter` matches (DELETE on the
/// collection), each as [`delete`] does with the same `options`. Returns
/// the answers of the single deletes, in key order; stops at the first
/// refusal (a failed precondition), as the real server reports the first
/// error.
pub(crate) fn delete_collection(
    store: &mut Store,
    kind: &'static ResourceKind,
    filter: &Filter,
    options: Option<&Value>,
) -> Result<Vec<Arc<Value>>, ApiError> {
    let keys: Vec<(String, String)> = store
        .iter(kind)
        .filter(|(_, obj)| filter.matches(obj))
        .map(|(key, _)| key.clone())
        .collect();
    keys.iter()
        .map(|(ns, name)| delete(store, kind, ns, name, options))
        .collect()
}

/// Fails with 409 when a precondition of the DeleteOptions does not hold,
/// in the words of `rest.BeforeDelete`, which checks them on the object
/// read before anything else and names the object by its kind, not its
/// resource (`Operation cannot be fulfilled on PersistentVolume "v1"`).
fn check_preconditions(
    kind: &ResourceKind,
    stored: &Value,
    options: Option<&Value>,
) -> Result<(), ApiError> {
    let pre = options.and_then(|o| value_at(o, "preconditions"));
    let checks = [
        (
            "UID",
            "uid",
            "metadata.uid",
            "The object might have been deleted and then recreated",
        ),
        (
            "ResourceVersion",
            "resourceVersion",
            "metadata.resourceVersion",
            "The object might have been modified",
        ),
    ];
    for (field, key, path, why) in checks {
        if let Some(want) = pre.and_then(|p| p.get(key)).and_then(Value::as_str) {
            let have = str_at(stored, path).unwrap_or_default();
            if want != have {
                return Err(ApiError::conflict(
                    kind.group,
                    kind.kind,
                    object::name(stored),
                    &format!(
                        "the {field} in the precondition ({want}) does not match the {field} in record ({have}). {why}"
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// Removes the object now; watchers see DELETED.
fn remove_now(
    store: &mut Store,
    kind: &'static ResourceKind,
    last: &Value,
) -> Result<Arc<Value>, ApiError> {
    store
        .commit_removal(kind, last.clone())
        .ok_or_else(|| ApiError::not_found(kind.group, kind.plural, object::name(last)))
}

/// Bumps `metadata.generation` when the object has one, as the first
/// deletion request does on the real server.
fn bump_generation(obj: &mut Value) {
    if let Some(g) = i64_at(obj, "metadata.generation").filter(|g| *g > 0) {
        set_at(obj, "metadata.generation", json!(g + 1));
    }
}

/// `markAsDeleting`: deletionTimestamp now (or kept when already set and
/// not in the future), grace 0. No write when nothing changes.
fn mark_as_deleting(
    store: &mut Store,
    kind: &'static ResourceKind,
    stored: &Arc<Value>,
) -> Arc<Value> {
    let mut new = (**stored).clone();
    let now = object::now_rfc3339();
    match str_at(stored, "metadata.deletionTimestamp") {
        None => {
            bump_generation(&mut new);
            set_at(&mut new, "metadata.deletionTimestamp", json!(now));
        }
        Some(ts) if ts > now.as_str() => set_at(&mut new, "metadata.deletionTimestamp", json!(now)),
        Some(_) => {}
    }
    set_at(&mut new, "metadata.deletionGracePeriodSeconds", json!(0));
    if new == **stored {
        return stored.clone();
    }
    store.commit(kind, new)
}

/// The grace period a first DELETE gives a pod (`CheckGracefulDelete`).
fn pod_grace_period(pod: &Value, requested: Option<i64>) -> i64 {
    let unscheduled = str_at(pod, "spec.nodeName").unwrap_or_default().is_empty();
    let terminated = matches!(str_at(pod, "status.phase"), Some("Succeeded" | "Failed"));
    if unscheduled || terminated {
        return 0;
    }
    requested
        .or_else(|| i64_at(pod, "spec.terminationGracePeriodSeconds"))
        .unwrap_or(DEFAULT_TERMINATION_GRACE_SECONDS)
}

/// Graceful deletion of a pod (see the module documentation).
fn delete_pod(
    store: &mut Store,
    kind: &'static ResourceKind,
    stored: &Arc<Value>,
    requested: Option<i64>,
) -> Result<Arc<Value>, ApiError> {
    let Some(since) = str_at(stored, "metadata.deletionTimestamp") else {
        let period = pod_grace_period(stored, requested);
        let mut new = (**stored).clone();
        bump_generation(&mut new);
        set_at(
            &mut new,
            "metadata.deletionTimestamp",
            json!(rfc3339_in(period)),
        );
        set_at(
            &mut new,
            "metadata.deletionGracePeriodSeconds",
            json!(period),
        );
        let written = store.commit(kind, new);
        return finish_graceful(store, kind, written, period);
    };
    let grace = i64_at(stored, "metadata.deletionGracePeriodSeconds").unwrap_or(0);
    if grace == 0 {
        if object::has_finalizers(stored) {
            return Ok(mark_as_deleting(store, kind, stored));
        }
        return remove_now(store, kind, stored);
    }
    let Some(period) = requested.filter(|p| *p < grace) else {
        return Ok(stored.clone());
    };
    let mut new = (**stored).clone();
    let moved = rfc3339_shift(since, period - grace).unwrap_or_else(|| rfc3339_in(period));
    set_at(&mut new, "metadata.deletionTimestamp", json!(moved));
    set_at(
        &mut new,
        "metadata.deletionGracePeriodSeconds",
        json!(period),
    );
    let written = store.commit(kind, new);
    finish_graceful(store, kind, written, period)
}

/// After a graceful-deletion write: the pod stays while it has finalizers
/// or time left, and is removed otherwise.
fn finish_graceful(
    store: &mut Store,
    kind: &'static ResourceKind,
    written: Arc<Value>,
    period: i64,
) -> Result<Arc<Value>, ApiError> {
    if object::has_finalizers(&written) || period > 0 {
        return Ok(written);
    }
    remove_now(store, kind, &written)
}
