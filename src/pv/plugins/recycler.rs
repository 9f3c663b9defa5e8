//! The recycler pod: a short-lived pod that mounts a released hostPath or
//! NFS volume at `/scrub` and deletes everything in it.
//!
//! The pod has a deterministic name, `recycler-for-<pv>` (shortened with a
//! hash when the volume name is too long), and carries in annotations the
//! UID of the volume and the UID of the released claim: one release of one
//! volume. Once created, and before it is waited for, its UID is recorded
//! on the volume ([`ANN_RECYCLER_POD_UID`]). A pod of that name found at create
//! time is adopted (waited for instead of duplicated) only when it is the
//! pod the volume records and was made for this very release (same volume
//! and claim UIDs, not being deleted): a pod this controller started before
//! a restart (or the previous leader did). Anyone may be able to create
//! pods in the recycler's namespace, with any name and annotations, and
//! mark them Succeeded; only someone allowed to update PersistentVolumes
//! can make the volume name such a pod. Any other pod of that name (a
//! forged one, one from an earlier release, one still Terminating because
//! its node is gone or a finalizer holds it, one whose UID a crash kept
//! from being recorded) proves nothing about this release's data: it is
//! deleted and the recycle fails with upstream's "old recycler pod found,
//! will retry later", so a fresh pod scrubs the volume once the old one is
//! gone.

use std::path::Path;
use std::time::Duration;

use futures::StreamExt;
use k8s_names::{ANN_RECYCLED_VOLUME_UID, ANN_RECYCLER_POD_UID, ANN_RELEASED_CLAIM_UID};
use k8s_openapi::api::core::v1::{
    Container, Event as CoreEvent, PersistentVolume, Pod, PodSpec, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use quantity::Amount;

use super::{PluginError, RecycleContext, RecycleWrites};
use crate::kinds::pod::PodPhase;
use crate::runtime::api_message::ApiMessage;
use crate::runtime::events::EventType;
use crate::runtime::informer::watch_backoff;
use crate::runtime::keys::ObjectKey;
use crate::runtime::write::WriteError;

/// Namespace of the recycler pod when the template names none.
pub(crate) const DEFAULT_NAMESPACE: &str = "default";

/// Image of the default recycler pod (upstream's current choice).
pub(crate) const DEFAULT_IMAGE: &str = "registry.k8s.io/build-image/debian-base:bookworm-v1.0.4";

/// The default pod's scrub script: fail unless `/scrub` exists and ends up empty.
pub(crate) const SCRUB_SCRIPT: &str =
    "test -e /scrub && find /scrub -mindepth 1 -delete && test -z \"$(ls -A /scrub)\" || exit 1";

/// Prefix of recycler pod names.
pub(crate) const POD_NAME_PREFIX: &str = "recycler-for-";

/// Longest pod name (a DNS subdomain).
const MAX_NAME_LEN: usize = 253;

/// How long past its deadline a recycler pod is waited for before the
/// recycle is given up: the kubelet needs a moment to report the deadline.
pub(crate) const DEADLINE_GRACE: Duration = Duration::from_secs(30);

/// A recycler pod template and its deadline rule.
#[derive(Clone, Debug)]
pub struct RecyclerPodConfig {
    /// The pod to start; its first volume is replaced by the one to scrub.
    pub template: Pod,
    /// Shortest deadline, in seconds.
    pub minimum_timeout: u64,
    /// Seconds of deadline per whole GiB of capacity.
    pub timeout_increment: u64,
}

/// Why a recycler pod template was refused.
#[derive(Debug, thiserror::Error)]
pub enum TemplateError {
    /// The file could not be read.
    #[error("reading recycler pod template {path}: {source}")]
    Read {
        /// The template file.
        path: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The file is not a pod in YAML or JSON.
    #[error("parsing recycler pod template {path}: {message}")]
    Parse {
        /// The template file.
        path: String,
        /// The parser's complaint.
        message: String,
    },
    /// The pod has no volume to replace with the one to scrub.
    #[error("recycler pod template {path} must have at least one volume")]
    NoVolume {
        /// The template file.
        path: String,
    },
}

/// Why recycling with a pod failed; the message becomes the volume's
/// `Recycle failed: …` event.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RecyclerError {
    /// The pod could not be created.
    #[error("unexpected error creating recycler pod: {0}")]
    Create(String),
    /// The pod was created but could not be recorded on the volume: the
    /// next attempt adopts it if the record was written after all, and
    /// deletes it if not (a pod the volume does not name proves nothing).
    #[error("failed to record recycler pod on the volume: {0}")]
    Record(String),
    /// A pod of that name exists that the volume does not record, or that
    /// was not made for this release (or is being deleted); it was deleted
    /// and the recycle will be tried again.
    #[error("old recycler pod found, will retry later")]
    StalePod,
    /// The pod ended in phase Failed.
    #[error("{0}")]
    PodFailed(String),
    /// The pod was deleted before it finished.
    #[error("recycler pod was deleted")]
    PodDeleted,
    /// The pod did not finish within its deadline and the grace after it.
    #[error("recycler pod did not finish within {0:?}")]
    Timeout(Duration),
    /// The scrub succeeded but the pod could not be deleted.
    #[error("failed to delete recycler pod: {0}")]
    Cleanup(String),
}

/// Upstream's default recycler pod (before the volume is filled in).
pub fn default_template() -> Pod {
    Pod {
        metadata: ObjectMeta {
            namespace: Some(DEFAULT_NAMESPACE.to_string()),
            generate_name: Some("pv-recycler-".to_string()),
            ..Default::default()
        },
        spec: Some(PodSpec {
            active_deadline_seconds: Some(60),
            restart_policy: Some("Never".to_string()),
            volumes: Some(vec![Volume {
                name: "vol".to_string(),
                ..Default::default()
            }]),
            containers: vec![Container {
                name: "pv-recycler".to_string(),
                image: Some(DEFAULT_IMAGE.to_string()),
                command: Some(vec!["/bin/sh".to_string()]),
                args: Some(vec!["-c".to_string(), SCRUB_SCRIPT.to_string()]),
                volume_mounts: Some(vec![VolumeMount {
                    name: "vol".to_string(),
                    mount_path: "/scrub".to_string(),
                    ..Default::default()
                }]),
                ..Default::default()
            }],
            ..Default::default()
        }),
        status: None,
    }
}

/// Reads a pod template from a YAML or JSON file and checks it has a volume.
pub(crate) fn load_template(path: &Path) -> Result<Pod, TemplateError> {
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| TemplateError::Read {
        path: shown.clone(),
        source,
    })?;
    let pod: Pod = serde_saphyr::from_str(&text).map_err(|e| TemplateError::Parse {
        path: shown.clone(),
        message: e.to_string(),
    })?;
    let volumes = pod.spec.as_ref().and_then(|s| s.volumes.as_ref());
    if volumes.is_none_or(std::vec::Vec::is_empty) {
        return Err(TemplateError::NoVolume { path: shown });
    }
    Ok(pod)
}

/// The deadline of a recycler pod for this volume, in seconds:
/// `max(minimum, whole GiB × increment)`.
pub(crate) fn timeout_for(volume: &PersistentVolume, minimum: u64, increment: u64) -> u64 {
    let gib = crate::pv::objects::volume_capacity(volume)
        .ok()
        .map(gib_of)
        .unwrap_or(0);
    minimum.max(gib.saturating_mul(increment))
}

/// Whole GiB in an amount (rounded down; negative counts as zero).
fn gib_of(amount: Amount) -> u64 {
    const GIB: i128 = 1 << 30;
    u64::try_from(amount.bytes_ceil().max(0) / GIB).unwrap_or(u64::MAX)
}

/// The recycler pod name of a volume: `recycler-for-<pv>`, or, when that
/// is longer than a pod name may be, its start cut at a label boundary-safe
/// point and a hash of the whole volume name, so distinct volumes keep
/// distinct pods.
pub(crate) fn pod_name(pv_name: &str) -> String {
    let full = format!("{POD_NAME_PREFIX}{pv_name}");
    if full.len() <= MAX_NAME_LEN {
        return full;
    }
    let suffix = format!("{:016x}", fnv1a(pv_name.as_bytes()));
    let keep = MAX_NAME_LEN - suffix.len() - 1;
    // Names are ASCII (DNS subdomains), so byte slicing is safe; a name
    // part must not end with '-' or '.' before the hash is appended.
    let head = full[..keep].trim_end_matches(['-', '.']);
    format!("{head}-{suffix}")
}

/// The recycler pod of `volume` under `config`, as (namespace, name).
pub(crate) fn pod_key(config: &RecyclerPodConfig, volume: &PersistentVolume) -> (String, String) {
    let namespace = config
        .template
        .metadata
        .namespace
        .clone()
        .filter(|namespace| !namespace.is_empty())
        .unwrap_or_else(|| DEFAULT_NAMESPACE.to_string());
    let name = pod_name(volume.metadata.name.as_deref().unwrap_or_default());
    (namespace, name)
}

/// FNV-1a, 64 bits: a small stable hash (the same in every release, unlike
/// the standard library's hasher).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The recycler pod for a volume: the template with the deterministic name,
/// the volume's UID, the deadline, and `source` as its first volume.
pub(crate) fn build_pod(
    config: &RecyclerPodConfig,
    volume: &PersistentVolume,
    source: Volume,
) -> Pod {
    let pv_name = volume.metadata.name.clone().unwrap_or_default();
    let mut pod = config.template.clone();
    pod.metadata.name = Some(pod_name(&pv_name));
    pod.metadata.generate_name = None;
    pod.metadata.resource_version = None;
    pod.metadata.uid = None;
    if pod.metadata.namespace.as_deref().unwrap_or("").is_empty() {
        pod.metadata.namespace = Some(DEFAULT_NAMESPACE.to_string());
    }
    let annotations = pod
        .metadata
        .annotations
        .get_or_insert_with(Default::default);
    annotations.insert(
        ANN_RECYCLED_VOLUME_UID.to_string(),
        volume.metadata.uid.clone().unwrap_or_default(),
    );
    annotations.insert(
        ANN_RELEASED_CLAIM_UID.to_string(),
        crate::pv::objects::claim_ref_uid(volume).to_string(),
    );
    pod.status = None;
    let timeout = timeout_for(volume, config.minimum_timeout, config.timeout_increment);
    let spec = pod.spec.get_or_insert_with(Default::default);
    spec.active_deadline_seconds = i64::try_from(timeout).ok();
    let volumes = spec.volumes.get_or_insert_with(Vec::new);
    let name = volumes
        .first()
        .map(|v| v.name.clone())
        .unwrap_or_else(|| "vol".to_string());
    let filled = Volume { name, ..source };
    match volumes.first_mut() {
        Some(first) => *first = filled,
        None => volumes.push(filled),
    }
    pod
}

/// How a recycler pod ended.
enum PodEnd {
    Succeeded,
    Failed(String),
    Deleted,
}

/// Scrubs `volume` with a recycler pod built from `config` that mounts
/// `source` (the volume's own storage), as every recyclable plugin does.
pub(crate) async fn recycle(
    config: &RecyclerPodConfig,
    volume: &PersistentVolume,
    source: Volume,
    context: &RecycleContext,
) -> Result<(), PluginError> {
    let pod = build_pod(config, volume, source);
    run(context, pod, volume)
        .await
        .map_err(|e| PluginError::Failed(e.to_string()))
}

/// How long a recycler pod may run: its active deadline and the grace
/// after it.
fn pod_deadline(pod: &Pod) -> Duration {
    pod.spec
        .as_ref()
        .and_then(|s| s.active_deadline_seconds)
        .and_then(|s| u64::try_from(s).ok())
        .map(Duration::from_secs)
        .unwrap_or_default()
        + DEADLINE_GRACE
}

/// Runs a recycler pod to its end: creates it and records it on `volume`
/// (or adopts the pod the volume records, started for this release
/// earlier), waits until it succeeds, fails or disappears, relaying its
/// events to the volume; deletes it unless it succeeded.
async fn run(
    context: &RecycleContext,
    pod: Pod,
    volume: &PersistentVolume,
) -> Result<(), RecyclerError> {
    let (client, writes) = (&context.client, context.writes.as_ref());
    // build_pod names the pod and its namespace.
    let namespace = pod.metadata.namespace.clone().unwrap_or_default();
    let name = pod.metadata.name.clone().unwrap_or_default();
    let pods: Api<Pod> = Api::namespaced(client.clone(), &namespace);
    let started = create_or_adopt(context, &pods, &pod, volume).await?;
    let deadline = pod_deadline(&pod);
    let events: Api<CoreEvent> = Api::namespaced(client.clone(), &namespace);
    let watched = watch_pod(&pods, &events, &name, &started, writes);
    let ended = tokio::time::timeout(deadline, watched).await;
    let error = match ended {
        // Kept until the volume is Available: if writing the volume fails,
        // the retry adopts this pod as proof instead of scrubbing again
        // with a second one. [`finish`] deletes it.
        Ok(PodEnd::Succeeded) => return Ok(()),
        Ok(PodEnd::Failed(message)) => RecyclerError::PodFailed(message),
        Ok(PodEnd::Deleted) => RecyclerError::PodDeleted,
        Err(_) => RecyclerError::Timeout(deadline),
    };
    if let Err(message) = delete_pod(writes, &namespace, &name, Some(&started.uid)).await {
        tracing::warn!(pod = %name, %message, "deleting the failed recycler pod failed");
    }
    Err(error)
}

/// Deletes the recycler pod of `volume` once the volume is Available again
/// (the pod's success is no longer needed as proof): the pod of that name
/// only if it was made for this release, and only the incarnation read
/// (its UID a precondition of the delete), so a pod made since for a later
/// release is never deleted in its place. A pod left behind by a failure
/// here is of an earlier release by the time the volume is released
/// again, and is then deleted before a new one is made.
pub(crate) async fn finish(
    config: &RecyclerPodConfig,
    volume: &PersistentVolume,
    context: &RecycleContext,
) -> Result<(), PluginError> {
    let pod = build_pod(config, volume, Volume::default());
    let (namespace, name) = pod_key(config, volume);
    let cleanup = |message| PluginError::Failed(RecyclerError::Cleanup(message).to_string());
    let found = Api::<Pod>::namespaced(context.client.clone(), &namespace)
        .get_opt(&name)
        .await
        .map_err(|error| cleanup(ApiMessage(&error).to_string()))?;
    let Some(found) = found.filter(|found| made_for_this_release(found, &pod)) else {
        return Ok(());
    };
    delete_pod(
        context.writes.as_ref(),
        &namespace,
        &name,
        found.metadata.uid.as_deref(),
    )
    .await
    .map_err(cleanup)
}

/// The recycler pod being waited for: its UID, and whether it was
/// created now (rather than adopted after a restart).
struct Started {
    uid: String,
    created: bool,
}

/// Creates the pod and records its UID on the volume before it is waited
/// for; or adopts the existing pod the volume records, made for this
/// release. Any other pod of that name is deleted and the recycle fails,
/// to be tried again once it is gone.
async fn create_or_adopt(
    context: &RecycleContext,
    pods: &Api<Pod>,
    pod: &Pod,
    volume: &PersistentVolume,
) -> Result<Started, RecyclerError> {
    let writes = context.writes.as_ref();
    let name = pod.metadata.name.clone().unwrap_or_default();
    let namespace = pod.metadata.namespace.clone().unwrap_or_default();
    match writes.create_pod(pod).await {
        Ok(created) => {
            let uid = created.metadata.uid.clone().unwrap_or_default();
            tracing::info!(pod = %name, %uid, "recycler pod created");
            let recorded = if uid.is_empty() {
                Err("the server gave the pod no UID".to_string())
            } else {
                // Boxed: the volume write's future is large.
                Box::pin(writes.record_on_volume(ANN_RECYCLER_POD_UID, &uid))
                    .await
                    .map_err(|e| e.to_string())
            };
            // The pod stays: whether the record was written is known only
            // to the next attempt, which reads the volume again and adopts
            // the pod if it is recorded, or deletes it if not.
            recorded.map_err(RecyclerError::Record)?;
            Ok(Started { uid, created: true })
        }
        Err(WriteError::Api {
            source: kube::Error::Api(status),
            ..
        }) if status.is_already_exists() => {
            let existing = pods
                .get_opt(&name)
                .await
                .map_err(|e| RecyclerError::Create(ApiMessage(&e).to_string()))?;
            let found_uid = existing
                .as_ref()
                .and_then(|found| found.metadata.uid.clone());
            if let Some(found) = &existing
                && is_recorded_pod(found, volume)
                && made_for_this_release(found, pod)
            {
                tracing::info!(pod = %name, "recycler pod of this release already exists, waiting for it");
                return Ok(Started {
                    uid: found_uid.unwrap_or_default(),
                    created: false,
                });
            }
            tracing::warn!(pod = %name, uid = ?found_uid, "recycler pod found that the volume does not record for this release, deleting it");
            delete_pod(writes, &namespace, &name, found_uid.as_deref())
                .await
                .map_err(|message| {
                    RecyclerError::Create(format!(
                        "failed to delete old recycler pod {name}: {message}"
                    ))
                })?;
            Err(RecyclerError::StalePod)
        }
        Err(error) => Err(RecyclerError::Create(error.to_string())),
    }
}

/// Whether `found` is the pod whose UID the volume records as the recycler
/// pod this controller made for it.
fn is_recorded_pod(found: &Pod, volume: &PersistentVolume) -> bool {
    let recorded = volume
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ANN_RECYCLER_POD_UID))
        .filter(|uid| !uid.is_empty());
    recorded.is_some() && recorded == found.metadata.uid.as_ref()
}

/// Whether `found`, a pod this controller made, is the pod `wanted`
/// describes, started for the same release: same volume and claim UIDs,
/// and not being deleted.
fn made_for_this_release(found: &Pod, wanted: &Pod) -> bool {
    let same = |key: &str| {
        let value = |pod: &Pod| {
            pod.metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(key).cloned())
                .filter(|v| !v.is_empty())
        };
        value(found).is_some() && value(found) == value(wanted)
    };
    same(ANN_RECYCLED_VOLUME_UID)
        && same(ANN_RELEASED_CLAIM_UID)
        && found.metadata.deletion_timestamp.is_none()
}

/// Watches the pod `started` names until it ends, relaying its new events
/// to the volume. A pod of that name with another UID means this one is
/// gone. Events already present when the watch starts are relayed only
/// for a pod just created (an adopted pod's older events were relayed
/// before the restart).
async fn watch_pod(
    pods: &Api<Pod>,
    events: &Api<CoreEvent>,
    name: &str,
    started: &Started,
    writes: &dyn RecycleWrites,
) -> PodEnd {
    let relay_existing = started.created;
    let by_name = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let by_object = watcher::Config::default().fields(&format!("involvedObject.name={name}"));
    let mut pod_stream =
        std::pin::pin!(watcher::watcher(pods.clone(), by_name).backoff(watch_backoff()));
    let mut event_stream =
        std::pin::pin!(watcher::watcher(events.clone(), by_object).backoff(watch_backoff()));
    let mut seen_pod = false;
    let mut relayed = std::collections::HashSet::new();
    loop {
        tokio::select! {
            biased;
            item = pod_stream.next() => match item {
                None | Some(Ok(Event::Delete(_))) => return PodEnd::Deleted,
                Some(Err(error)) => tracing::debug!(pod = %name, %error, "recycler pod watch failed, retrying"),
                Some(Ok(Event::Init)) => seen_pod = false,
                Some(Ok(Event::InitDone)) if !seen_pod => return PodEnd::Deleted,
                Some(Ok(Event::InitDone)) => {}
                Some(Ok(Event::InitApply(pod) | Event::Apply(pod))) => {
                    if pod.metadata.uid.as_deref() != Some(started.uid.as_str()) {
                        return PodEnd::Deleted;
                    }
                    seen_pod = true;
                    if let Some(end) = pod_end(&pod) {
                        return end;
                    }
                }
            },
            item = event_stream.next() => {
                let (event, existing) = match item {
                    Some(Ok(Event::Apply(event))) => (event, false),
                    Some(Ok(Event::InitApply(event))) => (event, true),
                    _ => continue,
                };
                if existing && !relay_existing {
                    continue;
                }
                let key = event.metadata.uid.clone().or_else(|| event.metadata.name.clone());
                if relayed.insert(key) {
                    let event_type = match event.type_.as_deref() {
                        Some("Warning") => EventType::Warning,
                        _ => EventType::Normal,
                    };
                    writes
                        .relay(event_type, event.message.as_deref().unwrap_or(""))
                        .await;
                }
            }
        }
    }
}

/// Whether a pod has ended, and how.
fn pod_end(pod: &Pod) -> Option<PodEnd> {
    let status = pod.status.as_ref()?;
    match PodPhase::of(pod)? {
        PodPhase::Succeeded => Some(PodEnd::Succeeded),
        PodPhase::Failed => Some(PodEnd::Failed(
            status
                .message
                .clone()
                .filter(|m| !m.is_empty())
                .unwrap_or_else(|| "pod failed, pod.Status.Message unknown".to_string()),
        )),
        _ => None,
    }
}

/// Deletes the pod (only the incarnation `uid` names, when given); a pod
/// already gone is fine.
async fn delete_pod(
    writes: &dyn RecycleWrites,
    namespace: &str,
    name: &str,
    uid: Option<&str>,
) -> Result<(), String> {
    writes
        .delete_pod(&ObjectKey::new(namespace, name), uid)
        .await
        .map_err(|error| error.to_string())
}

#[cfg(test)]
mod tests;
