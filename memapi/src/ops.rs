//! The write verbs with apiserver semantics: create (generateName, uid,
//! creationTimestamp, defaults, status reset, admission, validation),
//! update with optimistic concurrency, the update strategies of the main
//! resource and the status subresource, and validation, patch, plus the
//! test levers `put` and `remove`. DELETE lives in `delete.rs`.
//!
//! The update strategies are those of Kubernetes 1.20
//! (`PrepareForUpdate` of each kind's strategy and status strategy):
//!
//! - a main-resource update keeps the stored status (kinds with a status
//!   subresource), and a namespace keeps its `spec.finalizers`;
//! - a `/status` update keeps the stored spec and takes everything else
//!   from the body, metadata included: labels, annotations and finalizers
//!   of PVs, PVCs, pods, nodes and namespaces change through `/status` as
//!   they do on the real server; a pod also keeps its stored
//!   `ownerReferences`;
//! - either way uid, creationTimestamp, deletionTimestamp and
//!   deletionGracePeriodSeconds stay as stored, generation is the
//!   server's (counted only where the kind's strategy counts it, see
//!   [`ResourceKind::counts_generation`]), and managedFields stay as
//!   stored unless the body brings a non-empty list.

use super::admission;
use super::apply;
use super::managed;
use super::object::{self, now_rfc3339, set_at, str_at, value_at};
use super::patch::{self, PatchType};
use super::rbac::User;
use super::resources::{Part, ResourceKind};
use super::status::ApiError;
use super::store::Store;
use super::validation;
use serde_json::{Value, json};
use std::sync::Arc;

/// Who is creating an object: a client through HTTP, or a test seeding the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Origin<'a> {
    /// An API request, by the user it names (`None`: nobody, an
    /// administrator) and recorded as the field manager it names: status
    /// is reset, uid and timestamps are always fresh.
    Api(Option<&'a User>, &'a str),
    /// Seeding: the given status, uid and timestamps are kept.
    Seed,
}

/// Checks the body is an object of this kind and fills in apiVersion/kind.
fn normalize(kind: &ResourceKind, body: Value) -> Result<Value, ApiError> {
    let mut obj = match body {
        Value::Object(_) => body,
        _ => {
            return Err(ApiError::bad_request(
                "the request body is not a JSON object",
            ));
        }
    };
    if let Some(k) = str_at(&obj, "kind").filter(|k| !k.is_empty() && *k != kind.kind) {
        return Err(ApiError::bad_request(format!(
            "the object kind {k:?} does not match the resource kind {:?}",
            kind.kind
        )));
    }
    obj["kind"] = json!(kind.kind);
    obj["apiVersion"] = json!(kind.api_version());
    if !value_at(&obj, "metadata").is_some_and(Value::is_object) {
        obj["metadata"] = json!({});
    }
    Ok(obj)
}

/// Puts the object in the URL's namespace (or "default" when seeding),
/// refusing a body namespace that contradicts the URL.
fn place(kind: &ResourceKind, url_ns: Option<&str>, obj: &mut Value) -> Result<(), ApiError> {
    if !kind.namespaced {
        object::remove_at(obj, "metadata.namespace");
        return Ok(());
    }
    let body_ns = object::namespace(obj).to_string();
    let ns = match (url_ns, body_ns.is_empty()) {
        (Some(u), true) => u.to_string(),
        (Some(u), false) if u != body_ns => {
            return Err(ApiError::bad_request(format!(
                "the namespace of the provided object ({body_ns}) does not match the namespace sent on the request ({u})"
            )));
        }
        (None, true) => "default".to_string(),
        (_, false) => body_ns,
    };
    set_at(obj, "metadata.namespace", json!(ns));
    Ok(())
}

/// Sets the kind's defaults on fields that are absent.
fn apply_defaults(kind: &ResourceKind, obj: &mut Value) {
    for (path, value) in kind.defaults {
        if value_at(obj, path).is_none_or(Value::is_null) {
            set_at(obj, path, json!(value));
        }
    }
}

/// Creates an object. Returns the stored object.
///
/// In the real server's order: name generation, defaults and status reset,
/// admission and validation (API requests only), then the name-taken check,
/// and last the identity (uid, creationTimestamp) of the stored object.
pub(crate) fn create(
    store: &mut Store,
    kind: &'static ResourceKind,
    url_ns: Option<&str>,
    body: Value,
    origin: Origin<'_>,
) -> Result<Arc<Value>, ApiError> {
    let mut obj = normalize(kind, body)?;
    place(kind, url_ns, &mut obj)?;
    if object::name(&obj).is_empty() {
        generate_name(store, kind, &mut obj)?;
    }
    let keep = origin == Origin::Seed;
    if !keep {
        object::remove_at(&mut obj, "metadata.deletionTimestamp");
        object::remove_at(&mut obj, "metadata.deletionGracePeriodSeconds");
    }
    if kind.counts_generation() && (!keep || value_at(&obj, "metadata.generation").is_none()) {
        set_at(&mut obj, "metadata.generation", json!(1));
    }
    apply_defaults(kind, &mut obj);
    if let Origin::Api(_, manager) = origin {
        managed::record_update(None, &mut obj, manager, "");
    }
    set_create_phase(kind, &mut obj, keep);
    if let Origin::Api(user, _) = origin {
        store.drop_fields(kind, &mut obj);
        stamp_taint_times(kind, &mut obj);
        admission::admit_create(store, kind, &mut obj);
        validation::on_create(kind, &obj)?;
        admission::validate_owner_references(store, user, kind, None, &obj, None)?;
    }
    let (ns, name) = (object::namespace(&obj), object::name(&obj));
    if store.get(kind, ns, name).is_some() {
        return Err(ApiError::already_exists(kind.group, kind.plural, name));
    }
    if !keep || str_at(&obj, "metadata.uid").is_none() {
        let uid = store.rng.uuid();
        set_at(&mut obj, "metadata.uid", json!(uid));
    }
    if !keep || str_at(&obj, "metadata.creationTimestamp").is_none() {
        set_at(&mut obj, "metadata.creationTimestamp", json!(now_rfc3339()));
    }
    Ok(store.commit(kind, obj))
}

/// The longest prefix the API server keeps of a `generateName`, so that
/// the name with its 5 random characters fits 63 (`maxGeneratedNameLength`
/// of apiserver's `names.SimpleNameGenerator`).
const MAX_GENERATED_PREFIX: usize = 58;

/// Names an object from its `generateName` (a free name with 5 random
/// characters of the apiserver's alphabet appended to the prefix, cut to
/// [`MAX_GENERATED_PREFIX`] first), or fails with 422 when it has neither.
fn generate_name(store: &mut Store, kind: &ResourceKind, obj: &mut Value) -> Result<(), ApiError> {
    let Some(mut prefix) = str_at(obj, "metadata.generateName").map(str::to_string) else {
        return Err(ApiError::invalid(
            kind.group,
            kind.kind,
            "",
            "metadata.name: Required value: name or generateName is required",
        ));
    };
    if prefix.len() > MAX_GENERATED_PREFIX {
        let mut end = MAX_GENERATED_PREFIX;
        while !prefix.is_char_boundary(end) {
            end -= 1;
        }
        prefix.truncate(end);
    }
    let ns = object::namespace(obj).to_string();
    let name = loop {
        let candidate = format!("{prefix}{}", store.rng.alnum(5));
        if store.get(kind, &ns, &candidate).is_none() {
            break candidate;
        }
    };
    set_at(obj, "metadata.name", json!(name));
    Ok(())
}

/// Resets the status of a kind with a create phase (or, when seeding
/// with `keep`, only fills a missing phase).
fn set_create_phase(kind: &ResourceKind, obj: &mut Value, keep: bool) {
    let Some(phase) = kind.create_phase else {
        if !keep && kind.clears_status_on_create() {
            object::remove_at(obj, "status");
        }
        return;
    };
    if !keep {
        set_at(obj, "status", json!({ "phase": phase }));
        if kind.is_persistent_volume() {
            set_at(obj, PHASE_TRANSITION_TIME, json!(now_rfc3339()));
        }
    } else if str_at(obj, "status.phase").is_none() {
        set_at(obj, "status.phase", json!(phase));
    }
}

/// Fails with 409 when the body carries a resourceVersion other than the stored one.
fn check_rv(kind: &ResourceKind, obj: &Value, stored: &Value) -> Result<(), ApiError> {
    let rv = object::resource_version(obj);
    if rv.is_empty() || rv == object::resource_version(stored) {
        Ok(())
    } else {
        Err(ApiError::conflict(
            kind.group,
            kind.plural,
            object::name(stored),
            "the object has been modified; please apply your changes to the latest version and try again",
        ))
    }
}

/// Fails with 409 when a PUT's body names a UID other than the stored
/// object's, in the words of the storage layer's precondition check
/// (`storage.Preconditions.Check`, its `StorageError` wrapped in a
/// Conflict by `InterpretUpdateError`), as kube-apiserver 1.20.2 answers.
fn check_uid_precondition(
    kind: &ResourceKind,
    obj: &Value,
    stored: &Value,
) -> Result<(), ApiError> {
    let (wanted, have) = (object::uid(obj), object::uid(stored));
    if wanted.is_empty() || wanted == have {
        return Ok(());
    }
    Err(ApiError::conflict(
        kind.group,
        kind.plural,
        object::name(stored),
        &format!(
            "StorageError: invalid object, Code: 4, Key: {}, ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: UID in precondition: {wanted}, UID in object meta: {have}",
            storage_key(kind, stored)
        ),
    ))
}

/// The etcd key kube-apiserver stores an object under:
/// `/registry/<prefix>/[<namespace>/]<name>`, the prefix being the
/// resource's plural but where the API server's storage names it otherwise.
fn storage_key(kind: &ResourceKind, obj: &Value) -> String {
    let prefix = match (kind.group, kind.plural) {
        ("", "nodes") => "minions",
        (_, plural) => plural,
    };
    let name = object::name(obj);
    if kind.namespaced {
        format!("/registry/{prefix}/{}/{name}", object::namespace(obj))
    } else {
        format!("/registry/{prefix}/{name}")
    }
}

/// Fails with 422 when a write would change the object's UID, as
/// `ValidateObjectMetaUpdate` refuses it (the common fields' check; a
/// `/status` write is refused by its strategy's validation of the metadata
/// too, so the cause comes twice): what a patch naming another UID gets,
/// once its resourceVersion, if it names one, held.
fn check_uid_unchanged(
    kind: &ResourceKind,
    obj: &Value,
    stored: &Value,
    part: Part,
) -> Result<(), ApiError> {
    let (new, old) = (object::uid(obj), object::uid(stored));
    if new.is_empty() || new == old {
        return Ok(());
    }
    let immutable = validation::FieldError::invalid("metadata.uid", new, "field is immutable");
    let errs = match part {
        Part::Main => vec![immutable],
        Part::Status => vec![immutable.clone(), immutable],
    };
    validation::check(kind.group, kind.kind, object::name(stored), &errs)
}

/// Who writes: the user (for RBAC and admission) and the field manager
/// the write is recorded as (`None`: a server-side apply, whose entry the
/// apply itself keeps).
#[derive(Clone, Copy)]
pub(crate) struct Writer<'a> {
    /// The user the request names.
    pub(crate) user: Option<&'a User>,
    /// The field manager of an `Update` operation.
    pub(crate) manager: Option<&'a str>,
}

/// Replaces an object (PUT). Returns the stored object.
///
/// A body that names a UID names it as a precondition
/// (`rest.defaultUpdatedObjectInfo.Preconditions`), which the storage layer
/// checks before anything else about the stored object, the
/// resourceVersion included ([`check_uid_precondition`]).
pub(crate) fn update(
    store: &mut Store,
    kind: &'static ResourceKind,
    url_ns: Option<&str>,
    name: &str,
    body: Value,
    part: Part,
    writer: Writer<'_>,
) -> Result<Arc<Value>, ApiError> {
    write(
        store,
        kind,
        Target { url_ns, name },
        body,
        part,
        writer,
        Via::Put,
    )
}

/// The object a write names: the URL's namespace and name.
#[derive(Clone, Copy)]
struct Target<'a> {
    url_ns: Option<&'a str>,
    name: &'a str,
}

/// How a write came: a PUT, whose body's UID is a precondition, or a
/// PATCH (an apply too), whose patched object's UID is a field like any
/// other, and immutable.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Via {
    Put,
    Patch,
}

/// Stores `body` over the object `target` names, as an update does: the
/// preconditions, the update strategy, validation and admission, then
/// [`store_over`].
fn write(
    store: &mut Store,
    kind: &'static ResourceKind,
    target: Target<'_>,
    body: Value,
    part: Part,
    writer: Writer<'_>,
    via: Via,
) -> Result<Arc<Value>, ApiError> {
    let Target { url_ns, name } = target;
    let user = writer.user;
    let mut obj = normalize(kind, body)?;
    let body_name = object::name(&obj);
    if body_name.is_empty() {
        set_at(&mut obj, "metadata.name", json!(name));
    } else if body_name != name {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({body_name}) does not match the name on the URL ({name})"
        )));
    }
    place(kind, url_ns, &mut obj)?;
    let stored = store
        .get(kind, object::namespace(&obj), name)
        .ok_or_else(|| ApiError::not_found(kind.group, kind.plural, name))?;
    if via == Via::Put {
        check_uid_precondition(kind, &obj, &stored)?;
    }
    check_rv(kind, &obj, &stored)?;
    check_uid_unchanged(kind, &obj, &stored, part)?;
    let mut new = prepare_for_update(kind, obj, &stored, part);
    keep_managed_fields(&mut new, &stored);
    for path in IDENTITY {
        object::copy_at(&stored, &mut new, path);
    }
    apply_defaults(kind, &mut new);
    store.drop_fields(kind, &mut new);
    stamp_taint_times(kind, &mut new);
    if let Some(manager) = writer.manager {
        let subresource = if part == Part::Status { "status" } else { "" };
        managed::record_update(Some(&stored), &mut new, manager, subresource);
    }
    validation::on_update(kind, &new, &stored, part)?;
    if part == Part::Main && kind.group.is_empty() && kind.plural == "persistentvolumeclaims" {
        admission::validate_claim_update(store, &new, &stored)?;
    }
    let subresource = (part == Part::Status).then_some("status");
    admission::validate_owner_references(store, user, kind, subresource, &new, Some(&stored))?;
    Ok(store_over(store, kind, &stored, new))
}

/// Sets `timeAdded` to now on every device taint of a ResourceSlice that
/// has none, as the API server does on create and update.
fn stamp_taint_times(kind: &ResourceKind, obj: &mut Value) {
    if !kind.is_resource_slice() {
        return;
    }
    let Some(devices) = obj
        .pointer_mut("/spec/devices")
        .and_then(Value::as_array_mut)
    else {
        return;
    };
    let now = now_rfc3339();
    for taint in devices
        .iter_mut()
        .filter_map(|d| d.get_mut("taints").and_then(Value::as_array_mut))
        .flatten()
    {
        if taint.get("timeAdded").is_none_or(Value::is_null)
            && let Some(t) = taint.as_object_mut()
        {
            t.insert("timeAdded".into(), json!(now));
        }
    }
}

/// The update strategies (`PrepareForUpdate`) of Kubernetes 1.20: what an
/// update keeps from the stored object (see the module documentation).
fn prepare_for_update(kind: &ResourceKind, mut new: Value, stored: &Value, part: Part) -> Value {
    match part {
        Part::Status => {
            object::copy_at(stored, &mut new, "spec");
            if kind.is_pod() {
                object::copy_at(stored, &mut new, "metadata.ownerReferences");
            }
            if kind.clears_status_on_create() {
                // ResetObjectMetaForStatus: a status write changes no metadata.
                for path in STATUS_KEEPS_METADATA {
                    object::copy_at(stored, &mut new, path);
                }
            }
        }
        Part::Main => {
            if kind.has_status {
                object::copy_at(stored, &mut new, "status");
            }
            if kind.group.is_empty() && kind.plural == "namespaces" {
                object::copy_at(stored, &mut new, "spec.finalizers");
            }
        }
    }
    new
}

/// An update without managedFields (absent, or an empty list) keeps the
/// stored ones, as the API server's field manager does: only a list with
/// entries replaces them, so clients unaware of the field never wipe it.
fn keep_managed_fields(new: &mut Value, stored: &Value) {
    let given = value_at(new, "metadata.managedFields")
        .and_then(Value::as_array)
        .is_some_and(|list| !list.is_empty());
    if !given {
        object::copy_at(stored, new, "metadata.managedFields");
    }
}

/// The metadata a status write of a ResourceClaim keeps from the stored
/// object (apimachinery's `ResetObjectMetaForStatus`).
const STATUS_KEEPS_METADATA: [&str; 4] = [
    "metadata.labels",
    "metadata.annotations",
    "metadata.finalizers",
    "metadata.ownerReferences",
];

/// Fields that identify an object across writes; clients cannot change them.
const IDENTITY: [&str; 4] = [
    "metadata.uid",
    "metadata.creationTimestamp",
    "metadata.deletionTimestamp",
    "metadata.deletionGracePeriodSeconds",
];

/// Stores `new` over `stored`: applies defaults, generation and PV phase
/// timestamps, removes a deleting object whose last finalizer is gone (see
/// [`deleted_by_update`]), and skips no-op writes (no new resourceVersion,
/// no event).
fn store_over(
    store: &mut Store,
    kind: &'static ResourceKind,
    stored: &Arc<Value>,
    mut new: Value,
) -> Arc<Value> {
    apply_defaults(kind, &mut new);
    // `BeforeUpdate` keeps the stored generation whatever the request
    // says; the kinds that count it add one when the spec changes.
    let generation = value_at(stored, "metadata.generation").and_then(Value::as_i64);
    if kind.counts_generation() && value_at(&new, "spec") != value_at(stored, "spec") {
        set_at(
            &mut new,
            "metadata.generation",
            json!(generation.unwrap_or(0) + 1),
        );
    } else if let Some(g) = generation {
        set_at(&mut new, "metadata.generation", json!(g));
    } else {
        object::remove_at(&mut new, "metadata.generation");
    }
    // A server without the field (before 1.28, or its feature gate off)
    // never stamps it.
    if kind.is_persistent_volume() && !store.drops(kind, PHASE_TRANSITION_TIME) {
        stamp_phase_transition(stored, &mut new);
    }
    if deleted_by_update(&new) {
        // As etcd reports it, DELETED carries the last stored state.
        return store
            .commit_removal(kind, (**stored).clone())
            .unwrap_or_else(|| stored.clone());
    }
    set_at(
        &mut new,
        "metadata.resourceVersion",
        json!(object::resource_version(stored)),
    );
    if new == **stored {
        return stored.clone();
    }
    store.commit(kind, new)
}

/// Whether a write removes the object (`ShouldDeleteDuringUpdate`): it is
/// being deleted, its last finalizer is gone and no grace period runs (a
/// pod in graceful deletion waits for its kubelet whatever its finalizers).
fn deleted_by_update(new: &Value) -> bool {
    value_at(new, "metadata.deletionTimestamp").is_some()
        && !object::has_finalizers(new)
        && object::i64_at(new, "metadata.deletionGracePeriodSeconds").unwrap_or(0) == 0
}

/// Where a PV records when its phase last changed.
const PHASE_TRANSITION_TIME: &str = "status.lastPhaseTransitionTime";

/// Sets `status.lastPhaseTransitionTime` when the PV phase changed and the
/// writer did not set the timestamp itself.
fn stamp_phase_transition(stored: &Value, new: &mut Value) {
    let phase_changed = str_at(new, "status.phase") != str_at(stored, "status.phase");
    let stamp = PHASE_TRANSITION_TIME;
    let stamp_untouched = value_at(new, stamp) == value_at(stored, stamp);
    if phase_changed && stamp_untouched && str_at(new, "status.phase").is_some() {
        set_at(new, stamp, json!(now_rfc3339()));
    }
}

/// One PATCH request: its type and body, and for a server-side apply who
/// applies and whether it forces.
pub(crate) struct PatchRequest<'a> {
    /// The patch type.
    pub(crate) patch_type: PatchType,
    /// The body.
    pub(crate) body: &'a [u8],
    /// `fieldManager` (required for an apply).
    pub(crate) field_manager: Option<&'a str>,
    /// `force`.
    pub(crate) force: bool,
}

/// Patches an object (PATCH). A server-side apply of a missing object creates it.
pub(crate) fn patch(
    store: &mut Store,
    kind: &'static ResourceKind,
    url_ns: Option<&str>,
    name: &str,
    request: &PatchRequest<'_>,
    part: Part,
    writer: Writer<'_>,
) -> Result<Arc<Value>, ApiError> {
    let ns = if kind.namespaced {
        url_ns.unwrap_or("default")
    } else {
        ""
    };
    if request.patch_type == PatchType::Apply {
        let applied = patch::parse_apply(request.body)?;
        let manager = request
            .field_manager
            .filter(|m| !m.is_empty())
            .ok_or_else(|| ApiError::bad_request("PATCH, fieldManager must be set for apply"))?;
        if str_at(&applied, "apiVersion").is_none() || str_at(&applied, "kind").is_none() {
            return Err(ApiError::bad_request(
                "an apply body must set apiVersion and kind",
            ));
        }
        let apply_request = apply::Request {
            manager,
            force: request.force,
            subresource: if part == Part::Status { "status" } else { "" },
        };
        let Some(stored) = store.get(kind, ns, name) else {
            if part != Part::Main {
                return Err(ApiError::not_found(kind.group, kind.plural, name));
            }
            let mut obj = apply::apply(&json!({ "metadata": {} }), &applied, &apply_request)?;
            set_at(&mut obj, "metadata.name", json!(name));
            return create(store, kind, url_ns, obj, Origin::Api(writer.user, manager));
        };
        let doc = apply::apply(&stored, &applied, &apply_request)?;
        if object::name(&doc) != name {
            return Err(ApiError::bad_request(
                "a patch may not change metadata.name",
            ));
        }
        let applier = Writer {
            user: writer.user,
            manager: None,
        };
        return write(
            store,
            kind,
            Target { url_ns, name },
            doc,
            part,
            applier,
            Via::Patch,
        );
    }
    let Some(stored) = store.get(kind, ns, name) else {
        return Err(ApiError::not_found(kind.group, kind.plural, name));
    };
    let mut doc = (*stored).clone();
    patch::apply(request.patch_type, &mut doc, request.body)?;
    if object::name(&doc) != name {
        return Err(ApiError::bad_request(
            "a patch may not change metadata.name",
        ));
    }
    write(
        store,
        kind,
        Target { url_ns, name },
        doc,
        part,
        writer,
        Via::Patch,
    )
}

/// Test lever: replaces the whole object, status included, or creates it.
/// Identity fields the caller left out are kept from the stored object.
pub(crate) fn put(
    store: &mut Store,
    kind: &'static ResourceKind,
    body: Value,
) -> Result<Arc<Value>, ApiError> {
    let mut obj = normalize(kind, body)?;
    place(kind, None, &mut obj)?;
    match store.get(kind, object::namespace(&obj), object::name(&obj)) {
        None => create(store, kind, None, obj, Origin::Seed),
        Some(stored) => {
            for path in IDENTITY {
                if let (None, Some(v)) = (value_at(&obj, path), value_at(&stored, path)) {
                    set_at(&mut obj, path, v.clone());
                }
            }
            Ok(store_over(store, kind, &stored, obj))
        }
    }
}

/// Test lever: removes an object whatever its finalizers. Returns whether it existed.
pub(crate) fn remove(store: &mut Store, kind: &'static ResourceKind, ns: &str, name: &str) -> bool {
    store
        .get(kind, ns, name)
        .is_some_and(|stored| store.commit_removal(kind, (*stored).clone()).is_some())
}
