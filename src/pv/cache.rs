//! The controller's shadow cache: the newest version of every PersistentVolume
//! and PersistentVolumeClaim that the controller has seen or written.
//!
//! Binding makes several API writes whose watch events come back late and out
//! of order. Syncing from the informer store alone would then offer a volume
//! that was just bound to a second claim, or write a stale status over a spec
//! just written. So every watch event *and* every answer to a successful write
//! is offered here, and the sync logic reads from here (upstream's
//! `ctrl.volumes` / `ctrl.claims` with `storeObjectUpdate`).
//!
//! An offer is kept when its resourceVersion is not older than the stored
//! one, comparing both as integers: equal versions are accepted so a periodic
//! resync still syncs, older ones are dropped. A resourceVersion that is not
//! an integer is an error. Objects are held as `Arc`s shared with the informer
//! store, never cloned.
//!
//! Volumes live in the [`VolumeIndex`] under one lock, so a stored volume and
//! its place in the index never disagree: once a bound volume is offered, no
//! other claim can be matched to it.

use std::collections::BTreeMap;
use std::sync::{Arc, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};

use crate::pv::index::{MatchError, VolumeIndex};
use crate::pv::keys::{ClaimKey, VolumeName};
use crate::pv::objects::ObjectName;

/// An offered or stored object whose resourceVersion is not an integer, so
/// the two versions cannot be ordered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CacheError {
    /// The resourceVersion of `object` (offered or stored) does not parse.
    #[error("{object}: resourceVersion {version:?} is not an integer")]
    ResourceVersion {
        /// The object whose version was being compared.
        object: ObjectName,
        /// The offending resourceVersion ("" when absent).
        version: String,
    },
}

/// The shadow cache of volumes (with their index) and claims; see the module
/// documentation. Cheap to share: wrap it in an `Arc`.
#[derive(Debug, Default)]
pub struct ShadowCache {
    volumes: RwLock<VolumeIndex>,
    claims: RwLock<BTreeMap<ClaimKey, Arc<PersistentVolumeClaim>>>,
}

/// Locks for reading. A poisoned lock is used anyway: no code in this module
/// panics while holding a lock, and every write replaces whole entries, so the
/// data behind the lock is consistent.
fn read<T>(lock: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(PoisonError::into_inner)
}

/// Locks for writing, recovering a poisoned lock as [`read`] does.
fn write<T>(lock: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(PoisonError::into_inner)
}

/// Whether an offered version may replace the stored one: both must be
/// integers, and the offered one not smaller.
fn not_older(
    object: impl Fn() -> ObjectName,
    stored: Option<&str>,
    offered: Option<&str>,
) -> Result<bool, CacheError> {
    let parse = |version: Option<&str>| {
        let version = version.unwrap_or("");
        version
            .parse::<i64>()
            .map_err(|_| CacheError::ResourceVersion {
                object: object(),
                version: version.to_owned(),
            })
    };
    let stored = parse(stored)?;
    let offered = parse(offered)?;
    Ok(offered >= stored)
}

impl ShadowCache {
    /// Offers a volume: stores it (and re-files it in the index) unless the
    /// stored version is newer. Returns whether it was stored.
    pub fn offer_volume(&self, volume: Arc<PersistentVolume>) -> Result<bool, CacheError> {
        let mut index = write(&self.volumes);
        let name = volume.metadata.name.as_deref().unwrap_or("");
        if let Some(stored) = index.get(name) {
            let object = || ObjectName::of_volume(&volume);
            let keep = not_older(
                object,
                stored.metadata.resource_version.as_deref(),
                volume.metadata.resource_version.as_deref(),
            )?;
            if !keep {
                return Ok(false);
            }
        }
        index.insert(volume);
        Ok(true)
    }

    /// The stored volume of that name.
    pub fn volume(&self, name: &str) -> Option<Arc<PersistentVolume>> {
        read(&self.volumes).get(name).cloned()
    }

    /// Forgets a volume (it was deleted), returning what was stored.
    pub fn remove_volume(&self, name: &str) -> Option<Arc<PersistentVolume>> {
        write(&self.volumes).remove(name)
    }

    /// All stored volumes, in name order.
    pub fn volumes(&self) -> Vec<Arc<PersistentVolume>> {
        read(&self.volumes).iter().cloned().collect()
    }

    /// The names of all stored volumes, in order.
    pub fn volume_names(&self) -> Vec<VolumeName> {
        read(&self.volumes)
            .iter()
            .map(|v| VolumeName::of(v))
            .collect()
    }

    /// How many volumes are stored.
    pub fn volumes_len(&self) -> usize {
        read(&self.volumes).len()
    }

    /// The best stored volume for `claim` (see [`VolumeIndex::find_best_match`]),
    /// searched under the same lock that guards volume updates.
    pub fn find_best_match(
        &self,
        claim: &PersistentVolumeClaim,
        delay_binding: bool,
    ) -> Result<Option<Arc<PersistentVolume>>, MatchError> {
        read(&self.volumes).find_best_match(claim, delay_binding)
    }

    /// Offers a claim: stores it unless the stored version is newer. Returns
    /// whether it was stored.
    pub fn offer_claim(&self, claim: Arc<PersistentVolumeClaim>) -> Result<bool, CacheError> {
        let key = ClaimKey::of(&claim);
        let mut claims = write(&self.claims);
        if let Some(stored) = claims.get(&key) {
            let object = || ObjectName::Claim(key.clone());
            let keep = not_older(
                object,
                stored.metadata.resource_version.as_deref(),
                claim.metadata.resource_version.as_deref(),
            )?;
            if !keep {
                return Ok(false);
            }
        }
        claims.insert(key, claim);
        Ok(true)
    }

    /// The stored claim with that key.
    pub fn claim(&self, key: &ClaimKey) -> Option<Arc<PersistentVolumeClaim>> {
        read(&self.claims).get(key).cloned()
    }

    /// Forgets a claim (it was deleted), returning what was stored.
    pub fn remove_claim(&self, key: &ClaimKey) -> Option<Arc<PersistentVolumeClaim>> {
        write(&self.claims).remove(key)
    }

    /// All stored claims, in key order.
    pub fn claims(&self) -> Vec<Arc<PersistentVolumeClaim>> {
        read(&self.claims).values().cloned().collect()
    }

    /// The keys of all stored claims, in order.
    pub fn claim_keys(&self) -> Vec<ClaimKey> {
        read(&self.claims).keys().cloned().collect()
    }

    /// How many claims are stored.
    pub fn claims_len(&self) -> usize {
        read(&self.claims).len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pv::objects::testing::*;

    fn rv_of_volume(cache: &ShadowCache, name: &str) -> Option<String> {
        cache
            .volume(name)
            .and_then(|v| v.metadata.resource_version.clone())
    }

    #[test]
    fn volume_versions_newer_replace_older_dropped_equal_accepted() {
        let cache = ShadowCache::default();
        // (offered resourceVersion, stored?, version held afterwards)
        let steps = [
            ("1", true, "1"),
            ("2", true, "2"),
            ("1", false, "2"),
            ("2", true, "2"),
            ("10", true, "10"),
            ("2", false, "10"),
            ("9", false, "10"),
            ("11", true, "11"),
        ];
        for (offered, stored, held) in steps {
            assert_eq!(
                cache.offer_volume(volume("v", "1Gi").rv(offered).arc()),
                Ok(stored),
                "offer {offered}"
            );
            assert_eq!(
                rv_of_volume(&cache, "v").as_deref(),
                Some(held),
                "after {offered}"
            );
        }
        assert_eq!(cache.volumes_len(), 1);
    }

    #[test]
    fn equal_version_replaces_the_object() {
        let cache = ShadowCache::default();
        let first = volume("v", "1Gi").rv("5").arc();
        let resync = volume("v", "1Gi").rv("5").arc();
        assert_eq!(cache.offer_volume(Arc::clone(&first)), Ok(true));
        assert_eq!(cache.offer_volume(Arc::clone(&resync)), Ok(true));
        assert!(cache.volume("v").is_some_and(|v| Arc::ptr_eq(&v, &resync)));
    }

    #[test]
    fn claim_versions_compare_numerically() {
        let cache = ShadowCache::default();
        let key = ClaimKey::new("myns", "c");
        assert_eq!(
            cache.offer_claim(claim("c", "1Gi").rv("10").arc()),
            Ok(true)
        );
        assert_eq!(
            cache.offer_claim(claim("c", "1Gi").rv("2").arc()),
            Ok(false)
        );
        assert_eq!(
            cache
                .claim(&key)
                .and_then(|c| c.metadata.resource_version.clone())
                .as_deref(),
            Some("10")
        );
        assert_eq!(
            cache.offer_claim(claim("c", "1Gi").rv("10").arc()),
            Ok(true)
        );
        assert_eq!(
            cache.offer_claim(claim("c", "1Gi").rv("11").arc()),
            Ok(true)
        );
        assert_eq!(cache.claims_len(), 1);
    }

    #[test]
    fn unparsable_versions_are_errors_naming_the_object() {
        let cache = ShadowCache::default();
        // A first version is stored without being parsed, as upstream does.
        assert_eq!(
            cache.offer_volume(volume("v", "1Gi").rv("xxx").arc()),
            Ok(true)
        );
        assert_eq!(
            cache.offer_volume(volume("v", "1Gi").rv("5").arc()),
            Err(CacheError::ResourceVersion {
                object: ObjectName::Volume(VolumeName("v".into())),
                version: "xxx".into()
            })
        );
        assert_eq!(rv_of_volume(&cache, "v").as_deref(), Some("xxx"));

        assert_eq!(cache.offer_claim(claim("c", "1Gi").rv("1").arc()), Ok(true));
        assert_eq!(
            cache.offer_claim(claim("c", "1Gi").arc()),
            Err(CacheError::ResourceVersion {
                object: ObjectName::Claim(ClaimKey::new("myns", "c")),
                version: "".into()
            })
        );
        let message = cache
            .offer_claim(claim("c", "1Gi").rv("1.5").arc())
            .err()
            .map(|e| e.to_string());
        assert_eq!(
            message.as_deref(),
            Some("claim \"myns/c\": resourceVersion \"1.5\" is not an integer")
        );
    }

    #[test]
    fn objects_are_shared_not_copied() {
        let cache = ShadowCache::default();
        let v = volume("v", "1Gi").rv("1").arc();
        let c = claim("c", "1Gi").rv("1").arc();
        assert_eq!(cache.offer_volume(Arc::clone(&v)), Ok(true));
        assert_eq!(cache.offer_claim(Arc::clone(&c)), Ok(true));
        assert!(cache.volume("v").is_some_and(|got| Arc::ptr_eq(&got, &v)));
        assert!(cache.volumes().iter().all(|got| Arc::ptr_eq(got, &v)));
        assert!(
            cache
                .claim(&ClaimKey::new("myns", "c"))
                .is_some_and(|got| Arc::ptr_eq(&got, &c))
        );
        assert!(cache.claims().iter().all(|got| Arc::ptr_eq(got, &c)));
        let matched = cache.find_best_match(&claim("x", "1Gi").build(), false);
        assert!(matches!(matched, Ok(Some(got)) if Arc::ptr_eq(&got, &v)));
    }

    #[test]
    fn index_follows_cache_updates() {
        let cache = ShadowCache::default();
        let other = claim("other", "1Gi").build();
        assert_eq!(
            cache.offer_volume(volume("v1", "1Gi").rv("1").arc()),
            Ok(true)
        );
        let found = cache.find_best_match(&other, false).ok().flatten();
        assert_eq!(
            found.and_then(|v| v.metadata.name.clone()).as_deref(),
            Some("v1")
        );

        // Our bind write comes back: v1 now belongs to claim1.
        let bound = volume("v1", "1Gi")
            .rv("2")
            .bound_to("claim1")
            .phase("Bound")
            .arc();
        assert_eq!(cache.offer_volume(bound), Ok(true));
        assert_eq!(cache.find_best_match(&other, false), Ok(None));
        let mine = cache
            .find_best_match(&claim("claim1", "1Gi").build(), false)
            .ok()
            .flatten();
        assert_eq!(
            mine.and_then(|v| v.metadata.name.clone()).as_deref(),
            Some("v1")
        );

        // A late watch event of the old, unbound version must not undo that.
        assert_eq!(
            cache.offer_volume(volume("v1", "1Gi").rv("1").arc()),
            Ok(false)
        );
        assert_eq!(cache.find_best_match(&other, false), Ok(None));

        // Once removed, the volume is neither stored nor matched.
        assert!(cache.remove_volume("v1").is_some());
        assert_eq!(
            cache.find_best_match(&claim("claim1", "1Gi").build(), false),
            Ok(None)
        );
    }

    #[test]
    fn removal_names_and_order() {
        let cache = ShadowCache::default();
        for name in ["b", "a", "c"] {
            assert_eq!(
                cache.offer_volume(volume(name, "1Gi").rv("1").arc()),
                Ok(true)
            );
            assert_eq!(
                cache.offer_claim(claim(name, "1Gi").rv("1").arc()),
                Ok(true)
            );
        }
        assert_eq!(
            cache.volume_names(),
            ["a", "b", "c"].map(|n| VolumeName(n.into()))
        );
        assert_eq!(
            cache.claim_keys(),
            ["a", "b", "c"].map(|n| ClaimKey::new("myns", n))
        );

        let removed = cache.remove_volume("b");
        assert_eq!(
            removed.and_then(|v| v.metadata.name.clone()).as_deref(),
            Some("b")
        );
        assert!(cache.remove_volume("b").is_none());
        assert!(cache.volume("b").is_none());
        let key = ClaimKey::new("myns", "a");
        assert!(cache.remove_claim(&key).is_some());
        assert!(cache.claim(&key).is_none());
        assert_eq!(cache.volumes_len(), 2);
        assert_eq!(cache.claims_len(), 2);
        assert_eq!(cache.volumes().len(), 2);
        assert_eq!(cache.claims().len(), 2);

        // After removal any version is accepted again, even an older one.
        assert_eq!(
            cache.offer_volume(volume("b", "1Gi").rv("0").arc()),
            Ok(true)
        );
    }

    #[test]
    fn concurrent_offers_keep_the_newest() {
        let cache = ShadowCache::default();
        std::thread::scope(|s| {
            for t in 0..8u32 {
                let cache = &cache;
                s.spawn(move || {
                    for i in 0..200u32 {
                        let rv = (i * 7 + t * 13) % 200 + 1;
                        let _ = cache.offer_volume(volume("v", "1Gi").rv(&rv.to_string()).arc());
                    }
                });
            }
        });
        assert_eq!(rv_of_volume(&cache, "v").as_deref(), Some("200"));
    }

    #[test]
    fn survives_a_poisoned_lock() {
        let cache = Arc::new(ShadowCache::default());
        assert_eq!(
            cache.offer_volume(volume("v", "1Gi").rv("1").arc()),
            Ok(true)
        );
        let poisoner = Arc::clone(&cache);
        let result = std::thread::spawn(move || {
            let _guard = poisoner.volumes.write();
            panic!("poison the lock");
        })
        .join();
        assert!(result.is_err());
        assert!(cache.volumes.is_poisoned());
        assert_eq!(
            cache.offer_volume(volume("v", "1Gi").rv("2").arc()),
            Ok(true)
        );
        assert_eq!(rv_of_volume(&cache, "v").as_deref(), Some("2"));
    }
}
