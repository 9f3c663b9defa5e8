//! The publisher: one task that keeps a driver's ResourceSlices what the
//! driver last asked for.
//!
//! It watches its own slices only: `spec.driver=<driver>` and, for a
//! Node owner, `spec.nodeName=<node>` (so a node's publisher never sees
//! another node's slices), else `spec.nodeName=` (slices of no node).
//! Pool names wait in a queue ([`crate::queue`]): a pool whose slices the
//! watch reports changed is synced after a delay (30 s by default, so the
//! watch has caught up with the publisher's own writes and a human's
//! mistaken edit is repaired soon enough), a pool named by
//! [`Publisher::update`] at once. One pool is synced at a time: the
//! decisions are [`crate::sync`]'s, the writes go delete, update, create;
//! a failed sync is retried after the pool's backoff. What the publisher
//! wrote is remembered until the watch shows it ([`crate::cache`]), and
//! a pool where slices were created is synced again once that memory
//! expires, in case someone deleted one unseen.

use crate::cache::SliceCache;
use crate::error::{DroppedFieldsError, Error, Write};
use crate::options::{ErrorHandler, Options};
use crate::queue::Queue;
use crate::sync::{self, Target};
use crate::types::{DriverResources, Owner, Stats};
use crate::validate::validate_pool;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::resource::v1::ResourceSlice;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, DeleteParams, PostParams, Preconditions};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// The publisher's counters, shared with its task.
#[derive(Debug, Default)]
struct Counters {
    creates: AtomicU64,
    updates: AtomicU64,
    deletes: AtomicU64,
}

/// Publishes one driver's [`DriverResources`] as ResourceSlices until
/// stopped (or dropped). See the module documentation for how.
#[derive(Debug)]
pub struct Publisher {
    updates: mpsc::UnboundedSender<DriverResources>,
    counters: Arc<Counters>,
    task: Option<JoinHandle<()>>,
}

impl Publisher {
    /// Starts publishing `options.resources` in a task of the current
    /// tokio runtime. Fails only without a driver name; everything else
    /// goes to the error handler.
    pub fn start(client: kube::Client, options: Options) -> Result<Self, Error> {
        if options.driver.is_empty() {
            return Err(Error::NoDriver);
        }
        let (updates, commands) = mpsc::unbounded_channel();
        let counters = Arc::new(Counters::default());
        let worker = Worker::new(client, options, counters.clone());
        let task = tokio::spawn(worker.run(commands));
        Ok(Self {
            updates,
            counters,
            task: Some(task),
        })
    }

    /// Makes `resources` the new desired state: the pools it and the
    /// previous one list are synced at once.
    pub fn update(&self, resources: DriverResources) {
        // The task ends only when stopped, which takes `self`.
        let _ = self.updates.send(resources);
    }

    /// How many slices the publisher created, updated and deleted.
    pub fn stats(&self) -> Stats {
        Stats {
            creates: self.counters.creates.load(Ordering::Relaxed),
            updates: self.counters.updates.load(Ordering::Relaxed),
            deletes: self.counters.deletes.load(Ordering::Relaxed),
        }
    }

    /// Stops the publisher and waits for its task to end. Slices stay as
    /// they are.
    pub async fn stop(mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
            let _ = task.await;
        }
    }
}

impl Drop for Publisher {
    fn drop(&mut self) {
        if let Some(task) = &self.task {
            task.abort();
        }
    }
}

/// The publisher's task state.
struct Worker {
    slices: Api<ResourceSlice>,
    nodes: Api<Node>,
    driver: String,
    owner: Option<Owner>,
    node_local: bool,
    only_pool: Option<String>,
    sync_delay: Duration,
    ttl: Duration,
    on_error: ErrorHandler,
    desired: DriverResources,
    cache: SliceCache,
    queue: Queue,
    last_add: BTreeMap<String, Instant>,
    counters: Arc<Counters>,
}

/// The error handler when none is given: a warning with the error (its
/// message names the pool, slice or node).
fn log_error(error: &Error) {
    tracing::warn!(%error, "ResourceSlice publisher error");
}

impl Worker {
    fn new(client: kube::Client, options: Options, counters: Arc<Counters>) -> Self {
        let node_local = options.reconcile_pool_with_name.is_none()
            && options
                .owner
                .as_ref()
                .is_some_and(|o| o.node_name().is_some());
        Self {
            slices: Api::all(client.clone()),
            nodes: Api::all(client),
            driver: options.driver,
            owner: options.owner,
            node_local,
            only_pool: options.reconcile_pool_with_name,
            sync_delay: options.sync_delay,
            ttl: options.mutation_cache_ttl,
            on_error: options.on_error.unwrap_or_else(|| Arc::new(log_error)),
            desired: options.resources,
            cache: SliceCache::new(options.mutation_cache_ttl),
            queue: Queue::new(Instant::now()),
            last_add: BTreeMap::new(),
            counters,
        }
    }

    /// The field selector of the publisher's watch.
    fn field_selector(&self) -> String {
        let node = if self.node_local {
            self.owner
                .as_ref()
                .and_then(Owner::node_name)
                .unwrap_or_default()
        } else {
            ""
        };
        format!("spec.driver={},spec.nodeName={node}", self.driver)
    }

    /// Whether a slice belongs to the pool the publisher is limited to.
    fn in_scope(&self, slice: &ResourceSlice) -> bool {
        self.only_pool
            .as_deref()
            .is_none_or(|p| slice.spec.pool.name == p)
    }

    async fn run(mut self, mut updates: mpsc::UnboundedReceiver<DriverResources>) {
        let config = watcher::Config::default().fields(&self.field_selector());
        let mut events = watcher::watcher(self.slices.clone(), config)
            .default_backoff()
            .boxed();
        let initial = std::mem::take(&mut self.desired);
        self.set_desired(initial);
        let mut synced = false;
        loop {
            let next = self.queue.next_at().filter(|_| synced);
            tokio::select! {
                event = events.next() => match event {
                    Some(Ok(event)) => synced |= self.on_event(event),
                    Some(Err(error)) => (self.on_error)(&Error::Watch(error)),
                    None => return,
                },
                update = updates.recv() => match update {
                    Some(resources) => self.set_desired(resources),
                    None => return,
                },
                () = tokio::time::sleep_until(next.unwrap_or_else(Instant::now)), if next.is_some() => {}
            }
            if synced {
                self.sync_ready().await;
            }
        }
    }

    /// Takes a new desired state: old and new pools are synced now.
    fn set_desired(&mut self, mut resources: DriverResources) {
        if let Some(only) = &self.only_pool {
            let count = resources.pools.len();
            if count > 1 || (count == 1 && !resources.pools.contains_key(only)) {
                (self.on_error)(&Error::OtherPools {
                    pool: only.clone(),
                    count,
                });
                return;
            }
        }
        for device in resources
            .pools
            .values_mut()
            .flat_map(|p| p.slices.iter_mut())
        {
            crate::compare::round_taint_times(&mut device.devices);
        }
        let now = Instant::now();
        let names: BTreeSet<String> = self
            .desired
            .pools
            .keys()
            .chain(resources.pools.keys())
            .cloned()
            .collect();
        for name in names {
            self.queue.add_at(&name, now);
        }
        self.desired = resources;
    }

    /// Takes one watch event into the cache and queues the pools it
    /// touches; returns whether the first full list is complete.
    fn on_event(&mut self, event: Event<ResourceSlice>) -> bool {
        let later = Instant::now() + self.sync_delay;
        let pools = match event {
            Event::Init => {
                self.cache.init();
                return false;
            }
            Event::InitApply(slice) => {
                if self.in_scope(&slice) {
                    self.cache.init_apply(slice);
                }
                return false;
            }
            Event::InitDone => {
                let pools = self.cache.init_done();
                for pool in &pools {
                    self.queue.add_at(pool, later);
                }
                return true;
            }
            Event::Apply(slice) if self.in_scope(&slice) => self.cache.apply(slice),
            Event::Delete(slice) if self.in_scope(&slice) => {
                BTreeSet::from([self.cache.delete(&slice)])
            }
            Event::Apply(_) | Event::Delete(_) => BTreeSet::new(),
        };
        for pool in &pools {
            self.queue.add_at(pool, later);
        }
        false
    }

    /// Syncs every pool that is ready, one at a time.
    async fn sync_ready(&mut self) {
        while let Some(pool) = self.queue.pop_ready(Instant::now()) {
            match self.sync_pool(&pool).await {
                Ok(()) => self.queue.forget(&pool),
                Err(error) => {
                    (self.on_error)(&error);
                    let delay = self.queue.add_rate_limited(&pool, Instant::now());
                    tracing::debug!(driver = %self.driver, pool = %pool, ?delay, "retrying pool");
                }
            }
        }
    }

    /// The target of the slices, once the owner's UID is known.
    fn target(&self) -> Target {
        let owner = self.owner.as_ref().map(|owner| {
            let (api_version, kind, uid) = match owner {
                Owner::Node { uid, .. } => ("v1", "Node", uid.as_deref().unwrap_or_default()),
                Owner::Object {
                    api_version,
                    kind,
                    uid,
                    ..
                } => (api_version.as_str(), kind.as_str(), uid.as_str()),
            };
            OwnerReference {
                api_version: api_version.into(),
                kind: kind.into(),
                name: owner.name().into(),
                uid: uid.into(),
                controller: Some(true),
                block_owner_deletion: None,
            }
        });
        Target {
            driver: self.driver.clone(),
            node_name: self
                .owner
                .as_ref()
                .and_then(Owner::node_name)
                .map(str::to_string),
            owner_name: self.owner.as_ref().map(|o| o.name().to_string()),
            owner,
        }
    }

    /// Reads the owner Node's UID, once.
    async fn resolve_node_uid(&mut self) -> Result<(), Error> {
        let Some(Owner::Node { name, uid }) = &mut self.owner else {
            return Ok(());
        };
        if uid.is_some() {
            return Ok(());
        }
        let node = self.nodes.get(name).await.map_err(|source| Error::Node {
            node: name.clone(),
            source,
        })?;
        *uid = node.metadata.uid;
        Ok(())
    }

    async fn sync_pool(&mut self, name: &str) -> Result<(), Error> {
        let start = Instant::now();
        let existing = self.cache.pool(name);
        let Some(pool) = self.desired.pools.get(name).cloned() else {
            if !existing.is_empty() {
                tracing::debug!(driver = %self.driver, pool = %name, "removing the slices of a removed pool");
            }
            return self.delete(name, &existing).await;
        };
        if let Err(error) = validate_pool(name, &pool, self.node_local) {
            (self.on_error)(&Error::Validation(error));
            return Ok(());
        }
        let mut plan = sync::plan(name, &pool, &existing, &self.target());
        if !plan.creates.is_empty() && matches!(self.owner, Some(Owner::Node { uid: None, .. })) {
            self.resolve_node_uid().await?;
            plan = sync::plan(name, &pool, &existing, &self.target());
        }
        if plan.is_empty() {
            tracing::trace!(driver = %self.driver, pool = %name, "pool up to date");
        } else {
            tracing::debug!(
                driver = %self.driver,
                pool = %name,
                generation = plan.generation,
                deletes = plan.deletes.len(),
                updates = plan.updates.len(),
                creates = plan.creates.len(),
                "syncing pool"
            );
        }
        self.delete(name, &plan.deletes).await?;
        for (index, slice) in plan.updates {
            self.update(name, index, slice).await?;
        }
        let mut result = Ok(());
        let mut added = false;
        for (index, slice) in plan.creates {
            result = self.create(name, index, slice).await;
            if result.is_err() {
                break;
            }
            added = true;
        }
        // Also after a failed create: the slices created before it count.
        self.recheck_after_creates(name, start, added);
        result
    }

    /// Updates the slice at `index` of `pool` in place (the object carries
    /// the resourceVersion it was read at).
    async fn update(
        &mut self,
        pool: &str,
        index: usize,
        slice: ResourceSlice,
    ) -> Result<(), Error> {
        let slice_name = slice.metadata.name.clone().unwrap_or_default();
        let stored = self
            .slices
            .replace(&slice_name, &PostParams::default(), &slice)
            .await
            .map_err(|source| Error::Api {
                write: Write::Update,
                pool: pool.into(),
                slice: slice_name.clone(),
                source,
            })?;
        self.counters.updates.fetch_add(1, Ordering::Relaxed);
        tracing::debug!(driver = %self.driver, pool, slice = %slice_name, "updated slice");
        self.stored(Write::Update, pool, index, &slice, stored);
        Ok(())
    }

    /// Creates the slice at `index` of `pool` (the server completes its
    /// `generateName`).
    async fn create(
        &mut self,
        pool: &str,
        index: usize,
        slice: ResourceSlice,
    ) -> Result<(), Error> {
        let stored = self
            .slices
            .create(&PostParams::default(), &slice)
            .await
            .map_err(|source| Error::Api {
                write: Write::Create,
                pool: pool.into(),
                slice: slice.metadata.generate_name.clone().unwrap_or_default(),
                source,
            })?;
        self.counters.creates.fetch_add(1, Ordering::Relaxed);
        tracing::debug!(
            driver = %self.driver,
            pool,
            slice = stored.metadata.name.as_deref().unwrap_or_default(),
            "created slice"
        );
        self.stored(Write::Create, pool, index, &slice, stored);
        Ok(())
    }

    /// After a sync: a pool where slices were created is synced again
    /// once the memory of them expires (and not sooner: a sync before
    /// then would still see them), unless a later sync already ran then.
    fn recheck_after_creates(&mut self, name: &str, start: Instant, added: bool) {
        let now = Instant::now();
        if added {
            self.last_add.insert(name.to_string(), now);
        } else if self
            .last_add
            .get(name)
            .is_some_and(|at| start >= *at + self.ttl)
        {
            self.last_add.remove(name);
        }
        if let Some(at) = self.last_add.get(name) {
            self.queue.add_at(name, *at + self.ttl);
        }
    }

    /// Takes the server's answer to a write: into the cache, and when
    /// fields were dropped, into the desired state with an error.
    fn stored(
        &mut self,
        write: Write,
        pool: &str,
        index: usize,
        sent: &ResourceSlice,
        stored: ResourceSlice,
    ) {
        if let Some(features) = sync::dropped_features(&sent.spec, &stored.spec) {
            if let Some(slice) = self
                .desired
                .pools
                .get_mut(pool)
                .and_then(|p| p.slices.get_mut(index))
            {
                *slice = sync::as_stored(&stored.spec);
            }
            (self.on_error)(&Error::DroppedFields {
                write,
                source: DroppedFieldsError {
                    pool: pool.into(),
                    slice: index,
                    features,
                },
            });
        }
        self.cache.wrote(stored);
    }

    /// Deletes slices, each only if it is still the version seen (UID and
    /// resourceVersion preconditions); one already gone is fine.
    async fn delete(&mut self, pool: &str, slices: &[Arc<ResourceSlice>]) -> Result<(), Error> {
        for slice in slices {
            let slice_name = slice.metadata.name.clone().unwrap_or_default();
            let params = DeleteParams {
                preconditions: Some(Preconditions {
                    uid: slice.metadata.uid.clone(),
                    resource_version: slice.metadata.resource_version.clone(),
                }),
                ..DeleteParams::default()
            };
            match self.slices.delete(&slice_name, &params).await {
                Ok(_) => {
                    self.counters.deletes.fetch_add(1, Ordering::Relaxed);
                    tracing::debug!(driver = %self.driver, pool = %pool, slice = %slice_name, "deleted slice");
                }
                Err(kube::Error::Api(status)) if status.code == 404 => {
                    tracing::debug!(driver = %self.driver, pool = %pool, slice = %slice_name, "slice already gone");
                }
                Err(source) => {
                    return Err(Error::Api {
                        write: Write::Delete,
                        pool: pool.into(),
                        slice: slice_name,
                        source,
                    });
                }
            }
            self.cache.deleted(slice);
        }
        Ok(())
    }
}
