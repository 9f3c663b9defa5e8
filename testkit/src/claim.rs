//! The PersistentVolumeClaim builder.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{
    PersistentVolumeClaim, PersistentVolumeClaimSpec, PersistentVolumeClaimStatus,
    VolumeResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    LabelSelector, LabelSelectorRequirement, ObjectMeta,
};

use crate::{ROX, RWO, annotation_value, non_empty, storage, strings};

/// A claim under construction; start one with [`claim`], finish it with
/// [`ClaimBuilder::build`], [`ClaimBuilder::arc`] or `.into()`. The field is
/// public so that a test can reach what no method sets.
#[derive(Clone, Debug)]
pub struct ClaimBuilder(pub PersistentVolumeClaim);

/// A claim in namespace `default` with the given UID (`""`: none) and
/// storage request: phase Pending, access modes ReadWriteOnce +
/// ReadOnlyMany, volume mode Filesystem, no class (nil), no selector, no
/// volume name.
pub fn claim(name: &str, uid: &str, request: &str) -> ClaimBuilder {
    ClaimBuilder(PersistentVolumeClaim {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some("default".to_string()),
            uid: non_empty(uid),
            ..Default::default()
        },
        spec: Some(PersistentVolumeClaimSpec {
            access_modes: Some(strings(&[RWO, ROX])),
            resources: Some(VolumeResourceRequirements {
                requests: Some(storage(request)),
                ..Default::default()
            }),
            volume_mode: Some("Filesystem".to_string()),
            ..Default::default()
        }),
        status: Some(PersistentVolumeClaimStatus {
            phase: Some("Pending".to_string()),
            ..Default::default()
        }),
    })
}

/// The claims of a list of builders, for a row's claim lists.
pub fn claims<const N: usize>(list: [ClaimBuilder; N]) -> Vec<PersistentVolumeClaim> {
    list.into_iter().map(ClaimBuilder::build).collect()
}

impl ClaimBuilder {
    fn spec(&mut self) -> &mut PersistentVolumeClaimSpec {
        self.0.spec.get_or_insert_with(Default::default)
    }

    fn status(&mut self) -> &mut PersistentVolumeClaimStatus {
        self.0.status.get_or_insert_with(Default::default)
    }

    fn selector_mut(&mut self) -> &mut LabelSelector {
        self.spec().selector.get_or_insert_with(Default::default)
    }

    /// Moves the claim to another namespace.
    #[must_use]
    pub fn namespace(mut self, namespace: &str) -> Self {
        self.0.metadata.namespace = Some(namespace.to_string());
        self
    }

    /// Sets `spec.volumeName` (`""`: none).
    #[must_use]
    pub fn volume_name(mut self, volume: &str) -> Self {
        self.spec().volume_name = non_empty(volume);
        self
    }

    /// Sets the phase; Bound also sets the status access modes, capacity
    /// and current attributes class from the spec (as upstream's framework
    /// does), any other phase clears modes and capacity.
    #[must_use]
    pub fn phase(mut self, phase: &str) -> Self {
        self.status().phase = Some(phase.to_string());
        if phase == "Bound" {
            let spec = self.0.spec.clone().unwrap_or_default();
            let status = self.status();
            status.access_modes = spec.access_modes;
            status.capacity = spec.resources.and_then(|r| r.requests);
            status.current_volume_attributes_class_name = spec.volume_attributes_class_name;
        } else {
            let status = self.status();
            status.access_modes = None;
            status.capacity = None;
        }
        self
    }

    /// Sets the status capacity, as the volume reports it (bound claims).
    #[must_use]
    pub fn capacity(mut self, capacity: &str) -> Self {
        self.status().capacity = Some(storage(capacity));
        self
    }

    /// Sets `spec.storageClassName`; `""` is an explicit empty class, which
    /// for a claim differs from none.
    #[must_use]
    pub fn class(mut self, class: &str) -> Self {
        self.spec().storage_class_name = Some(class.to_string());
        self
    }

    /// Sets the requested access modes (strings, so that a test can also
    /// write one the controller does not know).
    #[must_use]
    pub fn modes(mut self, list: &[&str]) -> Self {
        self.spec().access_modes = Some(strings(list));
        self
    }

    /// Sets the volume mode (`""`: the field absent).
    #[must_use]
    pub fn volume_mode(mut self, mode: &str) -> Self {
        self.spec().volume_mode = non_empty(mode);
        self
    }

    /// Sets `spec.volumeAttributesClassName` (`""` stays an empty name).
    #[must_use]
    pub fn vac(mut self, class: &str) -> Self {
        self.spec().volume_attributes_class_name = Some(class.to_string());
        self
    }

    /// Adds annotations with upstream's test values: the mock plugin for
    /// provisioner keys, `yes` for the others.
    #[must_use]
    pub fn annotations(mut self, keys: &[&str]) -> Self {
        let map = self
            .0
            .metadata
            .annotations
            .get_or_insert_with(BTreeMap::new);
        for key in keys {
            map.insert((*key).to_string(), annotation_value(key));
        }
        self
    }

    /// Adds one annotation with the given value.
    #[must_use]
    pub fn annotation(mut self, key: &str, value: &str) -> Self {
        self.0
            .metadata
            .annotations
            .get_or_insert_with(BTreeMap::new)
            .insert(key.to_string(), value.to_string());
        self
    }

    /// Adds `matchLabels` to the label selector, creating the selector if
    /// the claim has none (`&[]`: an empty selector, which selects all).
    #[must_use]
    pub fn selector(mut self, labels: &[(&str, &str)]) -> Self {
        let selector = self.selector_mut();
        for (key, value) in labels {
            selector
                .match_labels
                .get_or_insert_with(BTreeMap::new)
                .insert((*key).to_string(), (*value).to_string());
        }
        self
    }

    /// Adds one `matchExpressions` requirement to the label selector (no
    /// values: the field absent, as for Exists).
    #[must_use]
    pub fn selector_expression(mut self, key: &str, operator: &str, values: &[&str]) -> Self {
        let values = (!values.is_empty()).then(|| strings(values));
        self.selector_mut()
            .match_expressions
            .get_or_insert_with(Vec::new)
            .push(LabelSelectorRequirement {
                key: key.to_string(),
                operator: operator.to_string(),
                values,
            });
        self
    }

    /// Sets `metadata.resourceVersion` (objects offered to a cache without
    /// a server).
    #[must_use]
    pub fn rv(mut self, resource_version: &str) -> Self {
        self.0.metadata.resource_version = Some(resource_version.to_string());
        self
    }

    /// The claim.
    #[must_use]
    pub fn build(self) -> PersistentVolumeClaim {
        self.0
    }

    /// The claim, shared as the controller's caches hold it.
    #[must_use]
    pub fn arc(self) -> Arc<PersistentVolumeClaim> {
        Arc::new(self.0)
    }
}

impl From<ClaimBuilder> for PersistentVolumeClaim {
    fn from(builder: ClaimBuilder) -> Self {
        builder.0
    }
}
