//! Complete bindings: what a sync found bound with nothing left to write,
//! recorded beside the stored objects so that a periodic resync passes
//! them by while neither side changes.

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::{PvStore, read, write};
use crate::pv::keys::VolumeName;
use crate::pv::packed::{Completed, Partner, Stored, Version};
use crate::runtime::keys::ObjectKey;

impl PvStore {
    /// Records that a sync of `claim` found it bound to `volume` with
    /// nothing left to write (see [`Completed`]); ignored when the store
    /// holds another version of the claim by now.
    pub fn complete_claim(&self, claim: &PersistentVolumeClaim, volume: &PersistentVolume) {
        let name = volume.metadata.name.as_deref().unwrap_or("");
        let Some(name) = read(&self.volumes).shared_name(name) else {
            return;
        };
        let Some(completed) = completed_with(Partner::Volume(name), &volume.metadata) else {
            return;
        };
        if let Some(stored) = write(&self.claims).get_mut(&ObjectKey::of(claim)) {
            stored.complete(claim.metadata.resource_version.as_deref(), completed);
        }
    }

    /// Records that a sync of `volume` found it bound to `claim` with
    /// nothing left to write, as [`PvStore::complete_claim`].
    pub fn complete_volume(&self, volume: &PersistentVolume, claim: &PersistentVolumeClaim) {
        let Some(claim_version) = claim.metadata.resource_version.as_deref() else {
            return;
        };
        let name = volume.metadata.name.as_deref().unwrap_or("");
        write(&self.volumes).complete_with_claim(
            name,
            volume.metadata.resource_version.as_deref(),
            &ObjectKey::of(claim),
            Version::new(claim_version),
        );
    }

    /// Records that a sync of `volume` found it free (no claimRef, not held
    /// for a claim, Available) with nothing left to write, having read no
    /// other object; ignored when the store holds another version by now.
    pub fn complete_free_volume(&self, volume: &PersistentVolume) {
        let name = volume.metadata.name.as_deref().unwrap_or("");
        write(&self.volumes).complete(
            name,
            volume.metadata.resource_version.as_deref(),
            Completed { partner: None },
        );
    }

    /// The claims and volumes a periodic resync syncs, each in key order:
    /// every stored one except those a sync found completed with a partner
    /// still stored at the version that sync read (their sync would read
    /// the same two objects again and find nothing to do), and those the
    /// caller passes by (`claim_wanted`, `volume_wanted` say false: a key
    /// already waiting in its queue, say). Passed-by keys are never copied,
    /// so a resync in the middle of a storm, when nearly every key waits,
    /// costs no copy of every key.
    ///
    /// The only place that holds both locks; it takes the claims' first.
    /// The filters may take locks of their own that never wait for these.
    pub fn to_resync(
        &self,
        claim_wanted: impl Fn(&ObjectKey) -> bool,
        volume_wanted: impl Fn(&VolumeName) -> bool,
    ) -> (Vec<ObjectKey>, Vec<VolumeName>) {
        let claims = read(&self.claims);
        let index = read(&self.volumes);
        let unchanged = |completed: Option<&Completed>| {
            let Some(completed) = completed else {
                return false;
            };
            let Some((partner, version)) = &completed.partner else {
                return true;
            };
            let current = match partner {
                Partner::Volume(name) => index.version(name).flatten(),
                Partner::Claim(key) => claims.get(&**key).and_then(Stored::version),
            };
            current == Some(version)
        };
        let mut claim_keys: Vec<ObjectKey> = claims
            .iter()
            .filter(|(key, stored)| !unchanged(stored.completed()) && claim_wanted(key))
            .map(|(key, _)| key.clone())
            .collect();
        let mut volume_names: Vec<VolumeName> = index
            .names()
            .filter(|name| !unchanged(index.completed(name.as_str())) && volume_wanted(name))
            .collect();
        drop(index);
        drop(claims);
        claim_keys.sort_unstable();
        volume_names.sort_unstable();
        (claim_keys, volume_names)
    }
}

/// What a sync found an object completed with: `partner` at the version
/// `meta` gives, if it has one.
fn completed_with(partner: Partner, meta: &ObjectMeta) -> Option<Completed> {
    Some(Completed {
        partner: Some((partner, Version::new(meta.resource_version.as_deref()?))),
    })
}
