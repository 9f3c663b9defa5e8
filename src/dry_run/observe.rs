//! The dry run's eyes: every change the informers show of the kinds whose
//! decisions are judged (volumes, claims, pods, ResourceClaims) goes to the
//! journal, as the few fields decisions read, when a decision waits for it
//! (claims: also to see a bind this process did not decide).

use std::sync::Arc;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::resource::v1::ResourceClaim;

use super::{DryRun, View};
use crate::kinds::{PERSISTENT_VOLUME, PERSISTENT_VOLUME_CLAIM, POD, RESOURCE_CLAIM};
use crate::runtime::informer::{Change, Informers, WiringError};
use crate::runtime::keys::ObjectKey;
use crate::runtime::kinds::Kind;

/// Subscribes `dry_run` to the changes of each judged kind the controllers
/// watch.
pub(crate) fn observe(informers: &mut Informers, dry_run: &Arc<DryRun>) -> Result<(), WiringError> {
    let kinds = informers.kinds();
    if kinds.contains(&PersistentVolume::NAME) {
        let dry_run = Arc::clone(dry_run);
        informers.on(&PERSISTENT_VOLUME, move |change| {
            forward(&dry_run, "persistentvolumes", change, false);
        })?;
    }
    if kinds.contains(&PersistentVolumeClaim::NAME) {
        let dry_run = Arc::clone(dry_run);
        informers.on(&PERSISTENT_VOLUME_CLAIM, move |change| {
            claim_changed(&dry_run, change);
        })?;
    }
    if kinds.contains(&Pod::NAME) {
        let dry_run = Arc::clone(dry_run);
        informers.on(&POD, move |change| forward(&dry_run, "pods", change, false))?;
    }
    if kinds.contains(&ResourceClaim::NAME) {
        let dry_run = Arc::clone(dry_run);
        informers.on(&RESOURCE_CLAIM, move |change| {
            forward(&dry_run, "resourceclaims", change, true);
        })?;
    }
    Ok(())
}

/// Hands a change to the journal when a decision waits for the object (or
/// always, with `every`).
fn forward<K: Kind>(dry_run: &DryRun, resource: &'static str, change: &Change<'_, K>, every: bool) {
    match change {
        Change::Applied { object, .. } => {
            let key = ObjectKey::of(object.as_ref());
            if every || dry_run.waits_for(resource, &key) {
                let view = View::of(object.as_ref());
                dry_run.observed(resource, &key, view.uid, Some(&view));
            }
        }
        Change::Deleted { key, last } => {
            let uid = last.and_then(|l| l.meta().uid.as_deref());
            if dry_run.waits_for(resource, key) {
                dry_run.observed(resource, key, uid, None);
            }
            dry_run.forget(resource, key, uid);
        }
        Change::Listed => {}
    }
}

fn claim_changed(dry_run: &DryRun, change: &Change<'_, PersistentVolumeClaim>) {
    match change {
        Change::Applied { object, .. } => {
            let key = ObjectKey::of(object.as_ref());
            let uid = object.metadata.uid.as_deref().unwrap_or_default();
            let volume = object
                .spec
                .as_ref()
                .and_then(|spec| spec.volume_name.as_deref())
                .filter(|name| !name.is_empty());
            dry_run.observed_claim(&key, uid, volume, || View::of(object.as_ref()));
        }
        deleted @ Change::Deleted { .. } => {
            forward(dry_run, "persistentvolumeclaims", deleted, false);
        }
        Change::Listed => {}
    }
}
