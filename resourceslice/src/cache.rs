//! The publisher's view of its own slices: what its watch reported, plus
//! what it wrote itself and the watch has not shown yet (upstream's
//! mutation cache). A slice it created stays in the view until the watch
//! shows it or a time to live runs out, so a sync that runs before the
//! watch caught up never creates a second slice for one index; an update
//! it made stays until the watch shows that version or a later one.

use k8s_openapi::api::resource::v1::ResourceSlice;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// Slices by name.
#[derive(Debug, Default)]
pub(crate) struct SliceCache {
    watched: BTreeMap<String, Arc<ResourceSlice>>,
    written: BTreeMap<String, (Arc<ResourceSlice>, Instant)>,
    relist: Option<BTreeMap<String, Arc<ResourceSlice>>>,
}

fn name(slice: &ResourceSlice) -> String {
    slice.metadata.name.clone().unwrap_or_default()
}

fn pool(slice: &ResourceSlice) -> String {
    slice.spec.pool.name.clone()
}

/// The resourceVersion as a number (0 when it is not one).
fn version(slice: &ResourceSlice) -> u64 {
    slice
        .metadata
        .resource_version
        .as_deref()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

impl SliceCache {
    /// A slice added or changed; returns the pools it was and is in.
    pub(crate) fn apply(&mut self, slice: ResourceSlice) -> BTreeSet<String> {
        self.seen(&slice);
        let mut pools = BTreeSet::from([pool(&slice)]);
        if let Some(old) = self.watched.insert(name(&slice), Arc::new(slice)) {
            pools.insert(pool(&old));
        }
        pools
    }

    /// A slice deleted; returns its pool.
    pub(crate) fn delete(&mut self, slice: &ResourceSlice) -> String {
        self.deleted(slice);
        pool(slice)
    }

    /// The watch showed `slice`: a written copy it is as new as is
    /// forgotten.
    fn seen(&mut self, slice: &ResourceSlice) {
        let name = name(slice);
        if self
            .written
            .get(&name)
            .is_some_and(|(w, _)| version(w) <= version(slice))
        {
            self.written.remove(&name);
        }
    }

    /// A full list begins.
    pub(crate) fn init(&mut self) {
        self.relist = Some(BTreeMap::new());
    }

    /// One slice of the full list.
    pub(crate) fn init_apply(&mut self, slice: ResourceSlice) {
        self.relist
            .get_or_insert_with(BTreeMap::new)
            .insert(name(&slice), Arc::new(slice));
    }

    /// The full list is complete: it replaces what the watch had shown.
    /// Returns the pools of the slices before and after.
    pub(crate) fn init_done(&mut self) -> BTreeSet<String> {
        let listed = self.relist.take().unwrap_or_default();
        let mut pools: BTreeSet<String> = self.watched.values().map(|s| pool(s)).collect();
        pools.extend(listed.values().map(|s| pool(s)));
        for slice in listed.values() {
            self.seen(slice);
        }
        self.watched = listed;
        pools
    }

    /// A slice the publisher created or updated, as the server answered.
    pub(crate) fn wrote(&mut self, slice: ResourceSlice, now: Instant) {
        let name = name(&slice);
        if self
            .watched
            .get(&name)
            .is_some_and(|w| version(w) >= version(&slice))
        {
            return;
        }
        self.written.insert(name, (Arc::new(slice), now));
    }

    /// A slice the publisher deleted.
    pub(crate) fn deleted(&mut self, slice: &ResourceSlice) {
        let name = name(slice);
        self.written.remove(&name);
        self.watched.remove(&name);
    }

    /// The slices of one pool: the newer of the watched and written copy
    /// of each, and written slices the watch has not shown yet, unless
    /// older than `ttl`.
    pub(crate) fn pool(
        &mut self,
        pool: &str,
        now: Instant,
        ttl: Duration,
    ) -> Vec<Arc<ResourceSlice>> {
        self.written
            .retain(|_, (_, at)| now.saturating_duration_since(*at) < ttl);
        let mut out: BTreeMap<&str, &Arc<ResourceSlice>> = self
            .watched
            .iter()
            .filter(|(_, s)| s.spec.pool.name == pool)
            .map(|(n, s)| (n.as_str(), s))
            .collect();
        for (n, (s, _)) in &self.written {
            if s.spec.pool.name == pool
                && out.get(n.as_str()).is_none_or(|w| version(w) < version(s))
            {
                out.insert(n, s);
            }
        }
        out.into_values().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn slice(name: &str, pool: &str, rv: u64) -> ResourceSlice {
        let mut s = ResourceSlice {
            metadata: ObjectMeta {
                name: Some(name.into()),
                resource_version: Some(rv.to_string()),
                ..ObjectMeta::default()
            },
            ..ResourceSlice::default()
        };
        s.spec.pool.name = pool.into();
        s
    }

    fn versions(slices: &[Arc<ResourceSlice>]) -> Vec<(String, u64)> {
        slices.iter().map(|s| (name(s), version(s))).collect()
    }

    #[test]
    fn a_created_slice_stays_until_watched_or_expired() {
        let now = Instant::now();
        let ttl = Duration::from_secs(60);
        let mut c = SliceCache::default();
        c.wrote(slice("a", "p", 5), now);
        assert_eq!(versions(&c.pool("p", now, ttl)), [("a".into(), 5)]);
        assert!(c.pool("q", now, ttl).is_empty());
        c.init();
        c.init_done();
        assert_eq!(
            versions(&c.pool("p", now, ttl)),
            [("a".into(), 5)],
            "a list from before the create does not lose it"
        );
        assert!(c.pool("p", now + ttl, ttl).is_empty(), "expired");
        c.wrote(slice("b", "p", 7), now);
        c.apply(slice("b", "p", 7));
        c.delete(&slice("b", "p", 8));
        assert!(c.pool("p", now, ttl).is_empty(), "watched, then deleted");
    }

    #[test]
    fn the_newer_copy_wins() {
        let now = Instant::now();
        let ttl = Duration::from_secs(60);
        let mut c = SliceCache::default();
        c.apply(slice("a", "p", 3));
        c.wrote(slice("a", "p", 4), now);
        assert_eq!(versions(&c.pool("p", now, ttl)), [("a".into(), 4)]);
        let pools = c.apply(slice("a", "q", 6));
        assert_eq!(pools, BTreeSet::from(["p".into(), "q".into()]));
        assert!(c.pool("p", now, ttl).is_empty());
        c.wrote(slice("a", "q", 5), now);
        assert_eq!(versions(&c.pool("q", now, ttl)), [("a".into(), 6)]);
    }
}
