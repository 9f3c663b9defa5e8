//! The publisher's view of its own slices: what its watch reported, plus
//! what it wrote itself and the watch has not shown yet (upstream's
//! mutation cache). A slice it wrote stays in the view until the watch
//! shows that version or a later one, or until the time to live since the
//! write runs out (a moka cache forgets it), so a sync that runs before the
//! watch caught up never creates a second slice for one index.

use k8s_openapi::api::resource::v1::ResourceSlice;
use moka::sync::Cache;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

/// The longest time to live the cache is built with: moka refuses more
/// than 1,000 years, and a century forgets no sooner in practice.
const LONGEST_TTL: Duration = Duration::from_secs(100 * 365 * 24 * 60 * 60);

/// Slices by name.
#[derive(Debug)]
pub(crate) struct SliceCache {
    watched: BTreeMap<String, Arc<ResourceSlice>>,
    /// Written copies the watch has not shown yet, each forgotten once the
    /// time to live since its write has passed (on the process's clock, the
    /// one the publisher schedules its check after creates by).
    written: Cache<String, Arc<ResourceSlice>>,
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
    /// An empty view whose written copies are forgotten `ttl` after their
    /// write.
    pub(crate) fn new(ttl: Duration) -> Self {
        Self {
            watched: BTreeMap::new(),
            written: Cache::builder().time_to_live(ttl.min(LONGEST_TTL)).build(),
            relist: None,
        }
    }

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
            .is_some_and(|w| version(&w) <= version(slice))
        {
            self.written.invalidate(&name);
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
    pub(crate) fn wrote(&mut self, slice: ResourceSlice) {
        let name = name(&slice);
        if self
            .watched
            .get(&name)
            .is_some_and(|w| version(w) >= version(&slice))
        {
            return;
        }
        self.written.insert(name, Arc::new(slice));
    }

    /// A slice the publisher deleted.
    pub(crate) fn deleted(&mut self, slice: &ResourceSlice) {
        let name = name(slice);
        self.written.invalidate(&name);
        self.watched.remove(&name);
    }

    /// The slices of one pool: the newer of the watched and written copy
    /// of each, and written slices the watch has not shown yet and the
    /// cache has not forgotten.
    pub(crate) fn pool(&self, pool: &str) -> Vec<Arc<ResourceSlice>> {
        let mut out: BTreeMap<String, Arc<ResourceSlice>> = self
            .watched
            .iter()
            .filter(|(_, s)| s.spec.pool.name == pool)
            .map(|(n, s)| (n.clone(), Arc::clone(s)))
            .collect();
        for (n, s) in &self.written {
            if s.spec.pool.name == pool
                && out.get(n.as_str()).is_none_or(|w| version(w) < version(&s))
            {
                out.insert(n.as_ref().clone(), s);
            }
        }
        out.into_values().collect()
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

    const MINUTE: Duration = Duration::from_secs(60);

    #[test]
    fn a_created_slice_stays_until_watched() {
        let mut c = SliceCache::new(MINUTE);
        c.wrote(slice("a", "p", 5));
        assert_eq!(versions(&c.pool("p")), [("a".into(), 5)]);
        assert!(c.pool("q").is_empty());
        c.init();
        c.init_done();
        assert_eq!(
            versions(&c.pool("p")),
            [("a".into(), 5)],
            "a list from before the create does not lose it"
        );
        c.wrote(slice("b", "p", 7));
        c.apply(slice("b", "p", 7));
        c.delete(&slice("b", "p", 8));
        assert_eq!(
            versions(&c.pool("p")),
            [("a".into(), 5)],
            "b watched, then deleted"
        );
        c.apply(slice("a", "p", 5));
        c.delete(&slice("a", "p", 6));
        assert!(
            c.pool("p").is_empty(),
            "the watched copy replaced the written one"
        );
    }

    #[test]
    fn a_written_slice_is_forgotten_once_its_time_to_live_has_passed() {
        let mut c = SliceCache::new(Duration::ZERO);
        c.wrote(slice("a", "p", 5));
        assert!(c.pool("p").is_empty(), "expired");
        c.apply(slice("a", "p", 3));
        c.wrote(slice("a", "p", 4));
        assert_eq!(
            versions(&c.pool("p")),
            [("a".into(), 3)],
            "the watched copy stays"
        );
    }

    #[test]
    fn the_newer_copy_wins() {
        let mut c = SliceCache::new(MINUTE);
        c.apply(slice("a", "p", 3));
        c.wrote(slice("a", "p", 4));
        assert_eq!(versions(&c.pool("p")), [("a".into(), 4)]);
        let pools = c.apply(slice("a", "q", 6));
        assert_eq!(pools, BTreeSet::from(["p".into(), "q".into()]));
        assert!(c.pool("p").is_empty());
        c.wrote(slice("a", "q", 5));
        assert_eq!(versions(&c.pool("q")), [("a".into(), 6)]);
    }
}
