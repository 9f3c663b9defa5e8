//! What a pod's ephemeral volumes ask for, as plain functions of the pod:
//! each `volumes[].ephemeral` gets a PersistentVolumeClaim named
//! `<pod>-<volume>`, made from the volume's `volumeClaimTemplate` (its
//! labels, annotations and spec) and controlled by the pod, so the garbage
//! collector deletes it with the pod. A claim of that name that the pod
//! does not control is someone else's and is never touched.

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, PersistentVolumeClaimTemplate, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::ResourceExt;

use crate::runtime::keys::ObjectKey;

/// One ephemeral volume of a pod and the claim it asks for.
#[derive(Clone, Copy, Debug)]
pub(crate) struct EphemeralVolume<'a> {
    /// The volume's name in the pod.
    pub(crate) volume: &'a str,
    /// The template of its claim; `None` only in a pod the API server
    /// should not have admitted.
    pub(crate) template: Option<&'a PersistentVolumeClaimTemplate>,
}

/// The ephemeral volumes of `pod`, in the order of its spec.
pub(crate) fn ephemeral_volumes(pod: &Pod) -> impl Iterator<Item = EphemeralVolume<'_>> {
    pod.spec
        .iter()
        .flat_map(|spec| spec.volumes.iter().flatten())
        .filter_map(|volume| {
            let ephemeral = volume.ephemeral.as_ref()?;
            Some(EphemeralVolume {
                volume: &volume.name,
                template: ephemeral.volume_claim_template.as_ref(),
            })
        })
}

/// The name of the claim of `pod`'s ephemeral volume `volume`
/// (`<pod>-<volume>`, as the kubelet and the scheduler expect it).
pub(crate) fn claim_name(pod: &Pod, volume: &str) -> String {
    format!("{}-{volume}", pod.name_any())
}

/// The keys of the claims `pod`'s ephemeral volumes ask for.
pub(crate) fn claim_keys(pod: &Pod) -> Vec<ObjectKey> {
    let namespace = pod.namespace().unwrap_or_default();
    ephemeral_volumes(pod)
        .map(|volume| ObjectKey::new(namespace.clone(), claim_name(pod, volume.volume)))
        .collect()
}

/// Why an existing claim is not the one `pod`'s volume asks for, in
/// upstream's words; `None` when the pod controls it.
pub(crate) fn not_for_pod(pod: &Pod, claim: &PersistentVolumeClaim) -> Option<String> {
    let controlled = claim.namespace() == pod.namespace()
        && claim
            .owner_references()
            .iter()
            .any(|owner| owner.controller == Some(true) && Some(&owner.uid) == pod.uid().as_ref());
    (!controlled).then(|| {
        format!(
            "PVC {}/{} was not created for pod {}/{} (pod is not owner)",
            claim.namespace().unwrap_or_default(),
            claim.name_any(),
            pod.namespace().unwrap_or_default(),
            pod.name_any()
        )
    })
}

/// Whether `pod` has work for the controller: it is not being deleted and
/// one of its ephemeral volumes has no claim, or a claim the pod does not
/// control (`claim` looks a claim up by key).
pub(crate) fn needs_work(
    pod: &Pod,
    claim: impl Fn(&ObjectKey) -> Option<std::sync::Arc<PersistentVolumeClaim>>,
) -> bool {
    pod.metadata.deletion_timestamp.is_none()
        && claim_keys(pod)
            .iter()
            .any(|key| claim(key).is_none_or(|found| not_for_pod(pod, &found).is_some()))
}

/// The claim of `pod`'s ephemeral volume `volume`, made from `template`:
/// its labels, annotations and spec, in the pod's namespace, controlled by
/// the pod (with blockOwnerDeletion, so the pod's foreground deletion waits
/// for it).
pub(crate) fn claim_for(
    pod: &Pod,
    volume: &str,
    template: &PersistentVolumeClaimTemplate,
) -> PersistentVolumeClaim {
    let meta = template.metadata.as_ref();
    PersistentVolumeClaim {
        metadata: ObjectMeta {
            name: Some(claim_name(pod, volume)),
            namespace: pod.namespace(),
            labels: meta.and_then(|meta| meta.labels.clone()),
            annotations: meta.and_then(|meta| meta.annotations.clone()),
            owner_references: Some(vec![OwnerReference {
                api_version: "v1".to_string(),
                kind: "Pod".to_string(),
                name: pod.name_any(),
                uid: pod.uid().unwrap_or_default(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            }]),
            ..ObjectMeta::default()
        },
        spec: Some(template.spec.clone()),
        status: None,
    }
}

#[cfg(test)]
mod tests;
