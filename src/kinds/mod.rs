//! The kinds the process's controllers watch, and what the process keeps
//! of each: one [`Shape`] per kind, handed to the runtime by every
//! controller that asks for the kind. Its trim is the union of what any
//! controller of the process reads (every store of a kind is shared by the
//! controllers that read it); the kinds with a status subresource encode a
//! write as their metadata and the part written. Each shape is a
//! `static`, never a `const`: the runtime tells that two controllers asked
//! for a kind with the same shape by its address. Pods, which three
//! controllers read, and the readings of a pod more than one of them needs
//! are in [`pod`].

pub(crate) mod pod;

use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceClaimTemplate};
use k8s_openapi::api::storage::v1::StorageClass;

use crate::runtime::kinds::{Shape, drop_managed_fields, metadata_and};
pub(crate) use pod::POD;

/// PersistentVolumes: status subresource.
pub(crate) static PERSISTENT_VOLUME: Shape<PersistentVolume> = Shape::new(drop_managed_fields)
    .with_status(|volume, part| metadata_and(&volume.metadata, &volume.spec, &volume.status, part));

/// PersistentVolumeClaims: status subresource.
pub(crate) static PERSISTENT_VOLUME_CLAIM: Shape<PersistentVolumeClaim> =
    Shape::new(drop_managed_fields)
        .with_status(|claim, part| metadata_and(&claim.metadata, &claim.spec, &claim.status, part));

/// StorageClasses: no status.
pub(crate) static STORAGE_CLASS: Shape<StorageClass> = Shape::new(drop_managed_fields);

/// Nodes: read only, and kept without their status.
pub(crate) static NODE: Shape<Node> = Shape::new(trim_node);

/// ResourceClaims: status subresource.
pub(crate) static RESOURCE_CLAIM: Shape<ResourceClaim> = Shape::new(drop_managed_fields)
    .with_status(|claim, part| metadata_and(&claim.metadata, &claim.spec, &claim.status, part));

/// ResourceClaimTemplates: no status.
pub(crate) static RESOURCE_CLAIM_TEMPLATE: Shape<ResourceClaimTemplate> =
    Shape::new(drop_managed_fields);

/// Keeps the node's identity and labels (node affinity, the selected node
/// of a provisioning); its status is large and never read.
fn trim_node(node: &mut Node) {
    drop_managed_fields(node);
    node.status = None;
}
