//! The search itself: the volume a claim should be bound to, by the rules
//! of the index's documentation, from the buckets filed at insertion.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use quantity::Amount;

use super::selector::Selector;
use super::{Bucket, Filed, MatchError, Name, Traits, VolumeIndex};
use crate::pv::objects::{
    AccessModes, claim_access_modes, claim_class, claim_request, claim_vac, claim_volume_mode,
    is_volume_bound_to_claim,
};
use crate::runtime::keys::ObjectKey;

/// The label groups of a bucket a selector is checked against one by one;
/// with more, a search walks the bucket in capacity order instead.
pub(super) const MAX_LABEL_GROUPS: usize = 64;

impl VolumeIndex {
    /// The volume the controller should bind `claim` to, if any, by the rules
    /// of the module documentation; volumes reserved for other claims are
    /// passed by. `delay_binding` is true for claims whose class binds on
    /// first consumer: then only a volume pre-bound to the claim is returned.
    pub fn find_best_match(
        &self,
        claim: &PersistentVolumeClaim,
        delay_binding: bool,
    ) -> Result<Option<Arc<PersistentVolume>>, MatchError> {
        let request = claim_request(claim)?;
        let modes = claim_access_modes(claim)?;
        let selector = self.selectors.of(claim)?;
        let volume_mode = claim_volume_mode(claim);
        let vac = claim_vac(claim);

        let fits = |t: &Traits| {
            t.capacity >= request
                && t.bucket.volume_mode == volume_mode
                && t.bucket.vac.as_deref() == vac
                && !t.deleting
        };
        let key = ObjectKey::of(claim);
        let prebound: Vec<(AccessModes, Arc<PersistentVolume>)> = self
            .claimed
            .get(&key)
            .into_iter()
            .flat_map(Filed::iter)
            .filter_map(|name| self.volumes.get(name))
            .filter_map(|e| Some((e.traits.as_ref().filter(|t| fits(t))?, &e.volume)))
            .filter_map(|(t, stored)| Some((t.bucket.modes, stored.object()?)))
            .filter(|(_, v)| is_volume_bound_to_claim(v, claim))
            .collect();

        let mut bucket = Bucket {
            modes,
            class: claim_class(claim).to_owned(),
            volume_mode: volume_mode.clone(),
            vac: vac.map(str::to_owned),
        };
        for group in modes.supersets() {
            if let Some((_, volume)) = prebound.iter().find(|(m, _)| *m == group) {
                return Ok(Some(Arc::clone(volume)));
            }
            if delay_binding {
                continue;
            }
            bucket.modes = group;
            let found = self.smallest_free(&bucket, request, selector.as_deref(), &key);
            if let Some(entry) = found.and_then(|name| self.volumes.get(name)) {
                return Ok(entry.volume.object());
            }
        }
        Ok(None)
    }

    /// The name of the smallest free volume of `bucket` (ties by name) of
    /// at least `request` that `selector` accepts and no other claim than
    /// `key` holds. With a selector and few label sets in the bucket, each
    /// set is checked once and searched from `request` on; otherwise the
    /// bucket is walked in capacity order.
    fn smallest_free(
        &self,
        bucket: &Bucket,
        request: Amount,
        selector: Option<&Selector>,
        key: &ObjectKey,
    ) -> Option<&str> {
        let not_reserved = |(_, name): &&(Amount, Name)| {
            self.reserved
                .get(&**name)
                .is_none_or(|reserved| reserved.claim == *key)
        };
        let start = (request, Name::from(""));
        let groups = self.labelled.get(bucket);
        if let (Some(selector), Some(groups)) = (selector, groups)
            && self.checks_label_sets(groups.len())
        {
            return groups
                .iter()
                .filter(|(labels, _)| selector.matches_labels(Some(labels)))
                .filter_map(|(_, set)| set.range(start.clone()..).find(not_reserved))
                .min()
                .map(|(_, name)| &**name);
        }
        self.free
            .get(bucket)?
            .range(start..)
            .filter(|(item, _)| not_reserved(item))
            .find(|(_, labels)| selector.is_none_or(|s| s.matches_labels(Some(labels))))
            .map(|((_, name), _)| &**name)
    }

    /// Whether a search with a selector checks each of a bucket's `groups`
    /// label sets once rather than walking the bucket in capacity order.
    pub(super) fn checks_label_sets(&self, groups: usize) -> bool {
        #[cfg(test)]
        if self.always_walk {
            return false;
        }
        groups <= MAX_LABEL_GROUPS
    }
}
