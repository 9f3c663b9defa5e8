//! The kinds table: which resources memapi serves and how they behave.
//!
//! One row per resource (group, version, plural, kind, scope, status
//! subresource, short names, field selectors, defaults). Adding a kind is
//! adding a row; everything else (routing, discovery, seeding) reads it.
//! Here too is [`Part`], which part of a resource a write addresses: the
//! write verbs and validation both decide by it.

/// Which part of an object a write addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Part {
    /// The main resource: for kinds with a status subresource, status is kept.
    Main,
    /// The `/status` subresource: only status is taken.
    Status,
}

/// One served resource, as a row of the kinds table.
#[derive(Debug, PartialEq, Eq)]
pub struct ResourceKind {
    /// API group, "" for core.
    pub group: &'static str,
    /// API version, e.g. "v1".
    pub version: &'static str,
    /// Resource plural, the URL segment.
    pub plural: &'static str,
    /// Kind, e.g. "PersistentVolume".
    pub kind: &'static str,
    /// Whether objects live in a namespace.
    pub namespaced: bool,
    /// Whether the resource has a `/status` subresource (and so main
    /// resource writes keep the stored status).
    pub has_status: bool,
    /// kubectl short names.
    pub short_names: &'static [&'static str],
    /// Field selector paths allowed besides `metadata.name` and `metadata.namespace`.
    pub fields: &'static [&'static str],
    /// Defaults applied to every stored object: (dotted path, string value), set when absent.
    pub defaults: &'static [(&'static str, &'static str)],
    /// Phase a create through the API resets `status` to (`None`: status untouched).
    pub create_phase: Option<&'static str>,
}

impl ResourceKind {
    /// `apiVersion` as written in objects: "v1" or "group/version".
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// Whether the server counts `metadata.generation` for this kind: 1 on
    /// create, one more on every change of the spec. Of the kinds served,
    /// only DeviceClass and ResourceSlice (their strategies'
    /// `PrepareForCreate` and `PrepareForUpdate`); PVs, PVCs, pods and the
    /// other core kinds of 1.20, StorageClasses, ResourceClaims and their
    /// templates leave it as created (unset) and updates cannot change it.
    pub fn counts_generation(&self) -> bool {
        self.group == "resource.k8s.io" && matches!(self.plural, "deviceclasses" | "resourceslices")
    }

    /// Whether this row is the PersistentVolume kind (which has phase-transition timestamps).
    pub fn is_persistent_volume(&self) -> bool {
        self.group.is_empty() && self.plural == "persistentvolumes"
    }

    /// Whether a create through the API drops the status the client sent,
    /// though the kind has no phase to reset it to (a ResourceClaim's
    /// `PrepareForCreate`: its allocation and reservations are written
    /// only through `/status`).
    pub fn clears_status_on_create(&self) -> bool {
        self.group == "resource.k8s.io" && self.has_status
    }

    /// Whether this row is a review (TokenReview, SubjectAccessReview):
    /// created to be answered, never stored (see `reviews.rs`).
    pub fn is_review(&self) -> bool {
        matches!(self.group, "authentication.k8s.io" | "authorization.k8s.io")
    }

    /// Whether this row is the ResourceSlice kind (validated, see
    /// `validation/slices.rs`).
    pub fn is_resource_slice(&self) -> bool {
        self.group == "resource.k8s.io" && self.plural == "resourceslices"
    }

    /// Whether this row is the Pod kind (deleted gracefully, see `delete.rs`).
    pub fn is_pod(&self) -> bool {
        self.group.is_empty() && self.plural == "pods"
    }
}

const PHASE: &str = "status.phase";

/// All served resources.
pub static KINDS: &[ResourceKind] = &[
    ResourceKind {
        group: "",
        version: "v1",
        plural: "persistentvolumes",
        kind: "PersistentVolume",
        namespaced: false,
        has_status: true,
        short_names: &["pv"],
        fields: &[PHASE],
        defaults: &[
            ("spec.persistentVolumeReclaimPolicy", "Retain"),
            ("spec.volumeMode", "Filesystem"),
        ],
        create_phase: Some("Pending"),
    },
    ResourceKind {
        group: "",
        version: "v1",
        plural: "persistentvolumeclaims",
        kind: "PersistentVolumeClaim",
        namespaced: true,
        has_status: true,
        short_names: &["pvc"],
        fields: &[PHASE],
        defaults: &[("spec.volumeMode", "Filesystem")],
        create_phase: Some("Pending"),
    },
    ResourceKind {
        group: "",
        version: "v1",
        plural: "pods",
        kind: "Pod",
        namespaced: true,
        has_status: true,
        short_names: &["po"],
        fields: &["spec.nodeName", PHASE],
        defaults: &[],
        create_phase: Some("Pending"),
    },
    ResourceKind {
        group: "",
        version: "v1",
        plural: "nodes",
        kind: "Node",
        namespaced: false,
        has_status: true,
        short_names: &["no"],
        fields: &[],
        defaults: &[],
        create_phase: None,
    },
    ResourceKind {
        group: "",
        version: "v1",
        plural: "namespaces",
        kind: "Namespace",
        namespaced: false,
        has_status: true,
        short_names: &["ns"],
        fields: &[PHASE],
        defaults: &[],
        create_phase: Some("Active"),
    },
    ResourceKind {
        group: "",
        version: "v1",
        plural: "events",
        kind: "Event",
        namespaced: true,
        has_status: false,
        short_names: &["ev"],
        fields: &[
            "involvedObject.name",
            "involvedObject.namespace",
            "involvedObject.kind",
            "involvedObject.uid",
            "reason",
            "type",
        ],
        defaults: &[],
        create_phase: None,
    },
    ResourceKind {
        group: "storage.k8s.io",
        version: "v1",
        plural: "storageclasses",
        kind: "StorageClass",
        namespaced: false,
        has_status: false,
        short_names: &["sc"],
        fields: &[],
        defaults: &[
            ("reclaimPolicy", "Delete"),
            ("volumeBindingMode", "Immediate"),
        ],
        create_phase: None,
    },
    ResourceKind {
        group: "storage.k8s.io",
        version: "v1",
        plural: "volumeattributesclasses",
        kind: "VolumeAttributesClass",
        namespaced: false,
        has_status: false,
        short_names: &["vac"],
        fields: &[],
        defaults: &[],
        create_phase: None,
    },
    ResourceKind {
        group: "events.k8s.io",
        version: "v1",
        plural: "events",
        kind: "Event",
        namespaced: true,
        has_status: false,
        short_names: &["ev"],
        fields: &[
            "regarding.name",
            "regarding.namespace",
            "regarding.kind",
            "regarding.uid",
            "reason",
            "type",
        ],
        defaults: &[],
        create_phase: None,
    },
    ResourceKind {
        group: "resource.k8s.io",
        version: "v1",
        plural: "resourceclaims",
        kind: "ResourceClaim",
        namespaced: true,
        has_status: true,
        short_names: &[],
        fields: &[],
        defaults: &[],
        create_phase: None,
    },
    ResourceKind {
        group: "resource.k8s.io",
        version: "v1",
        plural: "resourceclaimtemplates",
        kind: "ResourceClaimTemplate",
        namespaced: true,
        has_status: false,
        short_names: &[],
        fields: &[],
        defaults: &[],
        create_phase: None,
    },
    ResourceKind {
        group: "resource.k8s.io",
        version: "v1",
        plural: "deviceclasses",
        kind: "DeviceClass",
        namespaced: false,
        has_status: false,
        short_names: &[],
        fields: &[],
        defaults: &[],
        create_phase: None,
    },
    ResourceKind {
        group: "resource.k8s.io",
        version: "v1",
        plural: "resourceslices",
        kind: "ResourceSlice",
        namespaced: false,
        has_status: false,
        short_names: &[],
        fields: &["spec.driver", "spec.nodeName", "spec.pool.name"],
        defaults: &[],
        create_phase: None,
    },
    ResourceKind {
        group: "authentication.k8s.io",
        version: "v1",
        plural: "tokenreviews",
        kind: "TokenReview",
        namespaced: false,
        has_status: false,
        short_names: &[],
        fields: &[],
        defaults: &[],
        create_phase: None,
    },
    ResourceKind {
        group: "authorization.k8s.io",
        version: "v1",
        plural: "subjectaccessreviews",
        kind: "SubjectAccessReview",
        namespaced: false,
        has_status: false,
        short_names: &[],
        fields: &[],
        defaults: &[],
        create_phase: None,
    },
    ResourceKind {
        group: "coordination.k8s.io",
        version: "v1",
        plural: "leases",
        kind: "Lease",
        namespaced: true,
        has_status: false,
        short_names: &[],
        fields: &[],
        defaults: &[],
        create_phase: None,
    },
];

/// The resource served at `/apis/{group}/{version}/{plural}` (or `/api/v1/{plural}`).
pub(crate) fn by_path(group: &str, version: &str, plural: &str) -> Option<&'static ResourceKind> {
    KINDS
        .iter()
        .find(|k| k.group == group && k.version == version && k.plural == plural)
}

/// The resource of an object with this `apiVersion` and `kind`.
pub(crate) fn by_type(api_version: &str, kind: &str) -> Option<&'static ResourceKind> {
    let (group, version) = split_api_version(api_version);
    KINDS
        .iter()
        .find(|k| k.group == group && k.version == version && k.kind == kind)
}

/// Splits "group/version" (or "v1") into (group, version).
pub(crate) fn split_api_version(api_version: &str) -> (&str, &str) {
    match api_version.split_once('/') {
        Some((g, v)) => (g, v),
        None => ("", api_version),
    }
}

/// The API groups served besides core, in table order, without duplicates.
pub(crate) fn groups() -> Vec<(&'static str, &'static str)> {
    let mut out: Vec<(&'static str, &'static str)> = Vec::new();
    for k in KINDS.iter().filter(|k| !k.group.is_empty()) {
        if !out.contains(&(k.group, k.version)) {
            out.push((k.group, k.version));
        }
    }
    out
}
