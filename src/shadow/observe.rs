//! Shadow mode's eyes: every change the informers show of the kinds whose
//! decisions are judged (volumes, claims, pods, ResourceClaims) goes to the
//! comparison, as the few fields decisions read, when a decision waits for it
//! (claims: also to see a bind this process did not decide).

use std::sync::Arc;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::resource::v1::ResourceClaim;

use super::{Comparison, View};
use crate::kinds::{PERSISTENT_VOLUME, PERSISTENT_VOLUME_CLAIM, POD, RESOURCE_CLAIM};
use crate::runtime::informer::{Change, Informers, WiringError};
use crate::runtime::keys::ObjectKey;
use crate::runtime::kinds::Kind;

/// Subscribes `shadow` to the changes of each judged kind the controllers
/// watch.
pub(crate) fn observe(
    informers: &mut Informers,
    shadow: &Arc<Comparison>,
) -> Result<(), WiringError> {
    let kinds = informers.kinds();
    if kinds.contains(&PersistentVolume::NAME) {
        let shadow = Arc::clone(shadow);
        informers.on(&PERSISTENT_VOLUME, move |change| {
            forward(&shadow, "persistentvolumes", change, false);
        })?;
    }
    if kinds.contains(&PersistentVolumeClaim::NAME) {
        let shadow = Arc::clone(shadow);
        informers.on(&PERSISTENT_VOLUME_CLAIM, move |change| {
            claim_changed(&shadow, change);
        })?;
    }
    if kinds.contains(&Pod::NAME) {
        let shadow = Arc::clone(shadow);
        informers.on(&POD, move |change| forward(&shadow, "pods", change, false))?;
    }
    if kinds.contains(&ResourceClaim::NAME) {
        let shadow = Arc::clone(shadow);
        informers.on(&RESOURCE_CLAIM, move |change| {
            forward(&shadow, "resourceclaims", change, true);
        })?;
    }
    Ok(())
}

/// Hands a change to the comparison when a decision waits for the object (or
/// always, with `every`).
fn forward<K: Kind>(
    shadow: &Comparison,
    resource: &'static str,
    change: &Change<'_, K>,
    every: bool,
) {
    match change {
        Change::Applied { object, .. } => {
            let key = ObjectKey::of(object.as_ref());
            if every || shadow.waits_for(resource, &key) {
                let view = View::of(object.as_ref());
                shadow.observed(resource, &key, view.uid, Some(&view));
            }
        }
        Change::Deleted { key, last } => {
            let uid = last.and_then(|l| l.meta().uid.as_deref());
            if shadow.waits_for(resource, key) {
                shadow.observed(resource, key, uid, None);
            }
            shadow.forget(resource, key, uid);
        }
        Change::Listed => {}
    }
}

fn claim_changed(shadow: &Comparison, change: &Change<'_, PersistentVolumeClaim>) {
    match change {
        Change::Applied { object, .. } => {
            let key = ObjectKey::of(object.as_ref());
            let uid = object.metadata.uid.as_deref().unwrap_or_default();
            let volume = object
                .spec
                .as_ref()
                .and_then(|spec| spec.volume_name.as_deref())
                .filter(|name| !name.is_empty());
            shadow.observed_claim(&key, uid, volume, || View::of(object.as_ref()));
        }
        deleted @ Change::Deleted { .. } => {
            forward(shadow, "persistentvolumeclaims", deleted, false);
        }
        Change::Listed => {}
    }
}
