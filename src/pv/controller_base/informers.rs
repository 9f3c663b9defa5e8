//! The watchers: one per kind. Volumes and claims go straight into the
//! shadow cache (their only store) and the work queue; storage classes,
//! pods and nodes into their listers (reflector stores).
//!
//! Watches are supervised by [`crate::runtime::watch`]: one that keeps
//! failing stops the controller.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures::Stream;
use k8s_openapi::api::core::v1::{ContainerStatus, PersistentVolume, PersistentVolumeClaim, Pod};
use kube::Resource;
use kube::runtime::watcher::{self, Event};

use super::BaseError;
use super::waiting::FollowUp;
use crate::pv::controller::Controller;
use crate::pv::keys::{ClaimKey, VolumeName};
use crate::runtime::queue::WorkQueue;
use crate::runtime::watch;
pub(super) use crate::runtime::watch::watch;

/// Drives a reflected watch stream of `kind` into `on_event`; see
/// [`crate::runtime::watch::pump`].
pub(super) async fn pump<K, S, F>(
    kind: &'static str,
    stream: S,
    failure_limit: Duration,
    on_event: F,
) -> Result<(), BaseError>
where
    S: Stream<Item = Result<Event<K>, watcher::Error>>,
    F: FnMut(&Event<K>),
{
    Ok(watch::pump(kind, stream, failure_limit, on_event).await?)
}

/// Drops what the controller never reads from any object before it is
/// stored: its `managedFields` (server-side apply's bookkeeping, which on a
/// real API server is larger than the rest of a volume or claim). A write
/// of the object stays safe: an update without `managedFields` leaves the
/// server's copy of them as it is.
pub(super) fn drop_unread_fields<K: Resource>(object: &mut K) {
    object.meta_mut().managed_fields = None;
}

/// Keeps only what the controller reads from a pod (its volumes, node,
/// phase, deletion and the state of each container of every kind, which
/// tells whether it is terminated), so a large cluster's pods cost little
/// memory.
pub(super) fn keep_pod_essentials(pod: &mut Pod) {
    drop_unread_fields(pod);
    pod.metadata.annotations = None;
    pod.metadata.labels = None;
    pod.metadata.owner_references = None;
    if let Some(spec) = pod.spec.as_mut() {
        spec.containers.clear();
        spec.init_containers = None;
        spec.ephemeral_containers = None;
    }
    if let Some(status) = pod.status.as_mut() {
        status.conditions = None;
        for statuses in [
            &mut status.container_statuses,
            &mut status.init_container_statuses,
            &mut status.ephemeral_container_statuses,
        ]
        .into_iter()
        .flatten()
        {
            for container in statuses.iter_mut() {
                *container = ContainerStatus {
                    name: std::mem::take(&mut container.name),
                    state: container.state.take(),
                    ..ContainerStatus::default()
                };
            }
        }
    }
}

/// Logs an object the shadow cache refused (an unparsable resourceVersion).
fn offer_logged(result: Result<bool, crate::pv::cache::CacheError>) {
    if let Err(error) = result {
        tracing::warn!(%error, "object not cached");
    }
}

/// Turns true, for good, once a watch's first complete list is in the
/// shadow cache.
#[derive(Clone, Debug)]
pub(super) struct Synced(Arc<tokio::sync::watch::Sender<bool>>);

impl Default for Synced {
    fn default() -> Self {
        Self(Arc::new(tokio::sync::watch::Sender::new(false)))
    }
}

impl Synced {
    fn set(&self) {
        self.0.send_replace(true);
    }

    /// Waits until the first complete list is in.
    pub(super) async fn wait(&self) {
        // The sender lives as long as `self`, so the wait cannot fail.
        let _ = self.0.subscribe().wait_for(|synced| *synced).await;
    }
}

/// The keys a list under way has shown so far (between the watcher's
/// `Init` and `InitDone`): what is cached but not among them at the end
/// was deleted meanwhile. Empty, and holding no memory, between lists.
pub(super) type Listing<K> = HashSet<K>;

/// What the volume and claim event handlers act on. Keys are queued only
/// while this replica leads: a standby keeps its cache warm (and forgets
/// deleted objects) but collects no work, and syncs everything once it
/// leads.
#[derive(Clone)]
pub(super) struct Handlers {
    pub(super) controller: Arc<Controller>,
    pub(super) volume_queue: WorkQueue<VolumeName>,
    pub(super) claim_queue: WorkQueue<ClaimKey>,
    pub(super) leading: Arc<AtomicBool>,
    pub(super) follow_up: FollowUp,
    pub(super) volumes_synced: Synced,
    pub(super) claims_synced: Synced,
}

impl Handlers {
    fn leading(&self) -> bool {
        self.leading.load(Ordering::Acquire)
    }

    /// A volume event: offered to the cache and queued; a deletion (seen as
    /// such, or as a volume missing from a relist) is forgotten and its
    /// claim queued, so the claim becomes Lost promptly. `listing` is the
    /// watch's own [`Listing`].
    pub(super) fn on_volume_event(
        &self,
        event: &Event<PersistentVolume>,
        listing: &mut Listing<VolumeName>,
    ) {
        let cache = self.controller.cache();
        match event {
            Event::Apply(volume) => {
                offer_logged(cache.offer_listed_volume(volume));
                if self.leading() {
                    self.volume_queue.add(VolumeName::of(volume));
                }
            }
            Event::Delete(volume) => self.volume_deleted(&VolumeName::of(volume)),
            Event::Init => listing.clear(),
            Event::InitApply(volume) => {
                offer_logged(cache.offer_listed_volume(volume));
                listing.insert(VolumeName::of(volume));
            }
            Event::InitDone => {
                let listed = std::mem::take(listing);
                for name in cache.volume_names() {
                    if !listed.contains(&name) {
                        self.volume_deleted(&name);
                    } else if self.leading() {
                        self.volume_queue.add(name);
                    }
                }
                self.volumes_synced.set();
            }
        }
    }

    fn volume_deleted(&self, name: &VolumeName) {
        let Some(last) = self.controller.cache().remove_volume(&name.0) else {
            return;
        };
        tracing::info!(volume = %name, "volume deleted");
        if let Some(claim) = claim_of_deleted_volume(&last)
            && self.leading()
        {
            self.claim_queue.add(claim);
        }
    }

    /// A claim event, handled as [`Handlers::on_volume_event`]; a deleted
    /// claim's volume is queued, so it becomes Released promptly.
    pub(super) fn on_claim_event(
        &self,
        event: &Event<PersistentVolumeClaim>,
        listing: &mut Listing<ClaimKey>,
    ) {
        let cache = self.controller.cache();
        match event {
            Event::Apply(claim) => {
                offer_logged(cache.offer_listed_claim(claim));
                if self.leading() {
                    self.claim_queue.add(ClaimKey::of(claim));
                }
            }
            Event::Delete(claim) => self.claim_deleted(&ClaimKey::of(claim)),
            Event::Init => listing.clear(),
            Event::InitApply(claim) => {
                offer_logged(cache.offer_listed_claim(claim));
                listing.insert(ClaimKey::of(claim));
            }
            Event::InitDone => {
                let listed = std::mem::take(listing);
                for key in cache.claim_keys() {
                    if !listed.contains(&key) {
                        self.claim_deleted(&key);
                    } else if self.leading() {
                        self.claim_queue.add(key);
                    }
                }
                self.claims_synced.set();
            }
        }
    }

    fn claim_deleted(&self, key: &ClaimKey) {
        self.follow_up.forget(key);
        let Some(last) = self.controller.cache().remove_claim(key) else {
            return;
        };
        tracing::info!(claim = %key, "claim deleted");
        if let Some(volume) = volume_of_deleted_claim(&last)
            && self.leading()
        {
            self.volume_queue.add(volume);
        }
    }
}

/// The claim a deleted volume was bound to.
fn claim_of_deleted_volume(volume: &PersistentVolume) -> Option<ClaimKey> {
    crate::pv::objects::claim_ref_key(volume)
}

/// The volume a deleted claim was bound to.
fn volume_of_deleted_claim(claim: &PersistentVolumeClaim) -> Option<VolumeName> {
    let name = claim.spec.as_ref()?.volume_name.clone()?;
    (!name.is_empty()).then_some(VolumeName(name))
}
