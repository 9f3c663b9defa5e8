//! The objects of a bind storm: N volume/claim pairs of a mix of sizes,
//! classes, access modes and selectors, a share of them in a
//! WaitForFirstConsumer class, each claim with a volume of exactly its own
//! shape. The perfect assignment is therefore known: every claim can get a
//! volume of exactly its request, and any claim bound to a larger one is
//! "oversized".

use k8s_openapi::api::core::v1::{
    HostPathVolumeSource, ObjectReference, PersistentVolume, PersistentVolumeClaim,
};
use k8s_openapi::api::storage::v1::StorageClass;
use testkit::{RWO, RWX, claim, storage_class, volume};

/// The label every object of the bench carries, for the clean-up.
pub(crate) const LABEL: (&str, &str) = ("bench", "bind-storm");

/// The class binding on first consumer; its pairs are pre-bound by the
/// bench as the scheduler would (claimRef on the volume, selected node on
/// the claim), and the controller completes the binding.
pub(crate) const WAIT_CLASS: &str = "bench-wait";

/// The StorageClasses of the mix: two immediate ones and one delayed.
pub(crate) fn classes() -> Vec<StorageClass> {
    let no_provisioner = "kubernetes.io/no-provisioner";
    vec![
        storage_class("bench-fast", no_provisioner, "Immediate"),
        storage_class("bench-slow", no_provisioner, "Immediate"),
        storage_class(WAIT_CLASS, no_provisioner, "WaitForFirstConsumer"),
    ]
}

/// The shape of pair `i`.
#[derive(Clone, Debug)]
pub(crate) struct Shape {
    /// Request of the claim and capacity of the volume, in Gi.
    pub(crate) gib: u64,
    /// StorageClass name ("" for none).
    pub(crate) class: &'static str,
    /// Access modes of both.
    pub(crate) modes: &'static [&'static str],
    /// Whether the volume is labelled and the claim selects the label.
    pub(crate) selector: bool,
}

impl Shape {
    /// Pair `i` of the full mix, or of the plain one (sizes only, as in
    /// issue 11's measurement).
    pub(crate) fn of(i: usize, plain: bool) -> Self {
        let gib = 1 + (i * 7 % 10) as u64;
        if plain {
            return Self {
                gib,
                class: "",
                modes: &[RWO],
                selector: false,
            };
        }
        let class = match i % 10 {
            0..=3 => "",
            4..=5 => "bench-fast",
            6..=8 => "bench-slow",
            _ => WAIT_CLASS,
        };
        let modes: &[&str] = if i.is_multiple_of(3) { &[RWX] } else { &[RWO] };
        Self {
            gib,
            class,
            modes,
            selector: i % 4 == 1,
        }
    }

    /// Whether the bench pre-binds this pair, as the scheduler would.
    pub(crate) fn delayed(&self) -> bool {
        self.class == WAIT_CLASS
    }
}

/// The name of pair `i`'s objects.
pub(crate) fn name(prefix: &str, i: usize) -> String {
    format!("{prefix}-{i:06}")
}

/// Claim `i`, in `namespace`.
pub(crate) fn claim_of(
    prefix: &str,
    i: usize,
    shape: &Shape,
    namespace: &str,
) -> PersistentVolumeClaim {
    let mut builder = claim(&name(prefix, i), "", &format!("{}Gi", shape.gib))
        .namespace(namespace)
        .modes(shape.modes);
    if !shape.class.is_empty() {
        builder = builder.class(shape.class);
    }
    if shape.selector {
        builder = builder.selector(&[("tier", "gold")]);
    }
    if shape.delayed() {
        builder = builder.annotation(k8s_names::ANN_SELECTED_NODE, "node-1");
    }
    let mut claim = builder.build();
    claim.status = None;
    labelled(&mut claim.metadata);
    claim
}

/// Volume `i`; pre-bound to the claim of that name and UID when its pair
/// is delayed.
pub(crate) fn volume_of(
    prefix: &str,
    i: usize,
    shape: &Shape,
    claim: Option<(&str, &str)>,
) -> PersistentVolume {
    let mut builder = volume(&name(prefix, i), &format!("{}Gi", shape.gib)).modes(shape.modes);
    if !shape.class.is_empty() {
        builder = builder.class(shape.class);
    }
    if shape.selector {
        builder = builder.labels(&[("tier", "gold")]);
    }
    let mut volume = builder.build();
    volume.status = None;
    labelled(&mut volume.metadata);
    if let Some(spec) = volume.spec.as_mut() {
        spec.gce_persistent_disk = None;
        spec.host_path = Some(HostPathVolumeSource {
            path: format!("/tmp/bench/{}", name(prefix, i)),
            type_: None,
        });
        if let Some((namespace, uid)) = claim {
            spec.claim_ref = Some(ObjectReference {
                kind: Some("PersistentVolumeClaim".to_string()),
                api_version: Some("v1".to_string()),
                namespace: Some(namespace.to_string()),
                name: Some(name(prefix, i)),
                uid: Some(uid.to_string()),
                ..ObjectReference::default()
            });
            volume
                .metadata
                .annotations
                .get_or_insert_with(Default::default)
                .insert(
                    k8s_names::ANN_BOUND_BY_CONTROLLER.to_string(),
                    "yes".to_string(),
                );
        }
    }
    volume
}

fn labelled(meta: &mut k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) {
    meta.labels
        .get_or_insert_with(Default::default)
        .insert(LABEL.0.to_string(), LABEL.1.to_string());
}
