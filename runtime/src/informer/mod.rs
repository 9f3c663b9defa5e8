//! One LIST+WATCH per kind for the whole process, however many controllers
//! read the kind: each controller asks, while it is built, for the kinds it
//! reads ([`Informers::store`], [`Informers::mem_store`]), may bring the
//! kind's store ([`Informers::provide`]), subscribes to changes
//! ([`Informers::on`]) and adds the indexes it wants
//! ([`Informers::index`]). Once every controller is built,
//! [`Informers::start`] starts one watch per kind that anyone asked for.
//!
//! A kind is asked for by its [`Shape`], which every controller asking for
//! it must hand alike. Each event of a watch is trimmed ([`Shape::trim`]),
//! put into the kind's one store, then told to every handler that asked,
//! in the order they asked. A relist (after a watch could not resume) ends by telling an
//! object the store holds but the list did not show as deleted: it vanished
//! while the watch was down, and no delete event will ever say so.
//!
//! A list request ([`Watches::relist`]) has every watch list its kind from
//! the server again, so a store that lagged is brought up to date; the
//! runner makes one when the process wins the Lease.
//!
//! kube's `watcher` is the primitive underneath: it lists in pages,
//! watches, resumes and relists; everything above it is here.

mod backoff;
pub mod incarnations;
pub mod store;
mod watch;

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use kube::Client;
use tokio::task::JoinSet;

use crate::keys::ObjectKey;
use crate::kinds::{Kind, Shape};
use crate::managers::{Managed, ManagersHandler};
pub use backoff::{Exponential, WatchBackoff, watch_backoff};
pub use incarnations::Incarnations;
pub use store::StoreError;
pub use store::{IndexFn, MemStore, Store, StoreRef};
pub use watch::{LIST_PAGE_SIZE, WatchFailure};

/// What an informer tells the handlers of a kind.
#[derive(Debug)]
pub enum Change<'a, K> {
    /// A version the watch showed, already in the store; `listing` while a
    /// (re)list is under way (its objects come one by one, then
    /// [`Change::Listed`]).
    Applied {
        /// The object as the store took it in.
        object: &'a Arc<K>,
        /// Whether it came in a list rather than as a change.
        listing: bool,
    },
    /// The object is gone, deleted or missing from a relist; the store has
    /// forgotten it. `last` is its last known version.
    Deleted {
        /// The object's key.
        key: &'a ObjectKey,
        /// Its last known version.
        last: Option<&'a Arc<K>>,
    },
    /// A (re)list is complete: every listed object was applied, every
    /// vanished one deleted.
    Listed,
}

/// A subscriber to one kind's changes.
pub type Handler<K> = Box<dyn Fn(&Change<'_, K>) + Send + Sync>;

/// How far a kind's lists have come: the number of the latest list
/// request ([`Watches::relist`]) whose list is complete in the store; 0
/// until the first list, which answers request 1. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Synced(Arc<tokio::sync::watch::Sender<u64>>);

impl Default for Synced {
    fn default() -> Self {
        Self(Arc::new(tokio::sync::watch::Sender::new(0)))
    }
}

impl Synced {
    fn set(&self, request: u64) {
        self.0.send_if_modified(|done| {
            let newer = request > *done;
            if newer {
                *done = request;
            }
            newer
        });
    }

    /// Whether the list of `request`, or of a later one, is in.
    fn listed(&self, request: u64) -> bool {
        *self.0.borrow() >= request
    }

    /// Waits until the list of `request`, or of a later one, is in.
    pub async fn wait_for(&self, request: u64) {
        // The sender lives as long as `self`, so the wait cannot fail.
        let _ = self.0.subscribe().wait_for(|done| *done >= request).await;
    }
}

/// The number of the list every watch starts with.
pub const FIRST_LIST: u64 = 1;

/// What the process has been asked to watch of one kind.
struct Slot<K: 'static> {
    store: StoreRef<K>,
    provided: Option<Arc<dyn Store<K>>>,
    mem: Option<Arc<MemStore<K>>>,
    handlers: Vec<Handler<K>>,
    managers: Vec<ManagersHandler<K>>,
}

impl<K: Kind> Slot<K> {
    /// The kind's one store: the one a controller brought, else a
    /// [`MemStore`].
    fn fix_store(&mut self) -> Arc<dyn Store<K>> {
        let store: Arc<dyn Store<K>> = match (&self.provided, &self.mem) {
            (Some(provided), _) => Arc::clone(provided),
            (None, Some(mem)) => Arc::clone(mem) as Arc<dyn Store<K>>,
            (None, None) => Arc::new(MemStore::<K>::default()),
        };
        self.store.fix(Arc::clone(&store));
        store
    }
}

/// A slot of any kind, as [`Informers`] holds it until it starts.
trait Pending: Send {
    fn slot(&mut self) -> &mut dyn Any;
    fn name(&self) -> &'static str;
    fn start(
        self: Box<Self>,
        client: &Client,
        settings: WatchSettings,
        lists: Lists,
    ) -> BoxFuture<'static, Result<(), WatchFailure>>;
}

/// How every watch of the process lists and gives up.
#[derive(Clone, Copy, Debug)]
pub struct WatchSettings {
    /// How long a watch may fail without one success before its task
    /// ends with the failure.
    pub failure_limit: Duration,
    /// Objects per page of a list ([`LIST_PAGE_SIZE`] unless a smaller
    /// cluster, or a test of paging, asks for fewer).
    pub list_page_size: u32,
}

/// A kind's side of the list requests: the requests it is asked to list
/// for, and where it says how far it has come.
struct Lists {
    requested: tokio::sync::watch::Receiver<u64>,
    synced: Synced,
}

impl<K: Kind> Pending for Slot<K> {
    fn slot(&mut self) -> &mut dyn Any {
        self
    }

    fn name(&self) -> &'static str {
        K::NAME
    }

    fn start(
        mut self: Box<Self>,
        client: &Client,
        settings: WatchSettings,
        lists: Lists,
    ) -> BoxFuture<'static, Result<(), WatchFailure>> {
        let mut informer = watch::Informer {
            store: self.fix_store(),
            handlers: std::mem::take(&mut self.handlers),
            listing: None,
            newest_shown: None,
            incarnations: self.store.incarnations().clone(),
            request: FIRST_LIST,
            synced: lists.synced,
        };
        let client = client.clone();
        let shape = self.store.shape();
        let managers: Arc<[ManagersHandler<K>]> = std::mem::take(&mut self.managers).into();
        let streams = move || watch::watch(&client, shape, &managers, settings.list_page_size);
        Box::pin(watch::pump(
            K::NAME,
            streams,
            lists.requested,
            settings.failure_limit,
            move |request, event| {
                informer.request = request;
                informer.on_event(event);
            },
        ))
    }
}

/// Why a controller could not be wired to the informers.
#[derive(Debug, thiserror::Error)]
pub enum WiringError {
    /// Two controllers brought a store for the same kind, or one was
    /// brought after another controller took the kind's default store.
    #[error("the {0} store is provided twice")]
    StoreProvidedTwice(&'static str),
    /// Two controllers asked for the same kind with different shapes.
    #[error("the {0} kind is asked for with two shapes")]
    ShapedTwice(&'static str),
    /// The kind's slot holds another kind: slots are filed by their type,
    /// so this is a defect of the informers, reported instead of a crash.
    #[error("the {0} kind's informer is filed under another kind")]
    Misfiled(&'static str),
}

/// The kinds the process watches, while its controllers are being built;
/// see the module documentation.
#[derive(Default)]
pub struct Informers {
    slots: Vec<Box<dyn Pending>>,
    by_type: HashMap<TypeId, usize>,
}

impl std::fmt::Debug for Informers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kinds: Vec<&str> = self.slots.iter().map(|slot| slot.name()).collect();
        f.debug_struct("Informers").field("kinds", &kinds).finish()
    }
}

impl Informers {
    /// The slot of the kind `shape` describes; fails when the kind was
    /// asked for with another shape.
    fn slot<K: Kind>(&mut self, shape: &'static Shape<K>) -> Result<&mut Slot<K>, WiringError> {
        let index = *self.by_type.entry(TypeId::of::<K>()).or_insert_with(|| {
            self.slots.push(Box::new(Slot::<K> {
                store: StoreRef::new(shape),
                provided: None,
                mem: None,
                handlers: Vec::new(),
                managers: Vec::new(),
            }));
            self.slots.len() - 1
        });
        let slot = self.slots[index]
            .slot()
            .downcast_mut::<Slot<K>>()
            .ok_or(WiringError::Misfiled(K::NAME))?;
        if !std::ptr::eq(slot.store.shape(), shape) {
            return Err(WiringError::ShapedTwice(K::NAME));
        }
        Ok(slot)
    }

    /// Asks for the kind `shape` describes and returns its store, readable
    /// once the informers start.
    pub fn store<K: Kind>(&mut self, shape: &'static Shape<K>) -> Result<StoreRef<K>, WiringError> {
        Ok(self.slot(shape)?.store.clone())
    }

    /// Asks for the kind `shape` describes, kept in a [`MemStore`] (for its
    /// indexes and lists); fails when a controller brought another store
    /// for it.
    pub fn mem_store<K: Kind>(
        &mut self,
        shape: &'static Shape<K>,
    ) -> Result<Arc<MemStore<K>>, WiringError> {
        let slot = self.slot(shape)?;
        if slot.provided.is_some() {
            return Err(WiringError::StoreProvidedTwice(K::NAME));
        }
        Ok(Arc::clone(slot.mem.get_or_insert_default()))
    }

    /// Brings the store the kind `shape` describes is kept in; fails when
    /// the kind has one already.
    pub fn provide<K: Kind>(
        &mut self,
        shape: &'static Shape<K>,
        store: Arc<dyn Store<K>>,
    ) -> Result<(), WiringError> {
        let slot = self.slot(shape)?;
        if slot.provided.is_some() || slot.mem.is_some() {
            return Err(WiringError::StoreProvidedTwice(K::NAME));
        }
        slot.provided = Some(store);
        Ok(())
    }

    /// Adds an index to the kind's [`MemStore`] (once per name) and returns
    /// the store.
    pub fn index<K: Kind>(
        &mut self,
        shape: &'static Shape<K>,
        name: &'static str,
        values: IndexFn<K>,
    ) -> Result<Arc<MemStore<K>>, WiringError> {
        let store = self.mem_store(shape)?;
        store.add_index(name, values);
        Ok(store)
    }

    /// Subscribes `handler` to every change of the kind `shape` describes.
    pub fn on<K: Kind>(
        &mut self,
        shape: &'static Shape<K>,
        handler: impl Fn(&Change<'_, K>) + Send + Sync + 'static,
    ) -> Result<(), WiringError> {
        self.slot(shape)?.handlers.push(Box::new(handler));
        Ok(())
    }

    /// Subscribes `handler` to the field managers of every version of the
    /// kind `shape` describes that its watch shows, before the store takes
    /// it in (so the store still holds the version before). The kind's
    /// watch decodes them only when someone subscribes.
    pub fn on_managers<K: Kind>(
        &mut self,
        shape: &'static Shape<K>,
        handler: impl Fn(&Managed<'_, K>) + Send + Sync + 'static,
    ) -> Result<(), WiringError> {
        self.slot(shape)?.managers.push(Box::new(handler));
        Ok(())
    }

    /// The kinds asked for so far, in the order they were first asked for.
    pub fn kinds(&self) -> Vec<&'static str> {
        self.slots.iter().map(|slot| slot.name()).collect()
    }

    /// Starts one watch per kind asked for, on `client`. Each watch runs
    /// until its task is dropped; one that fails without a single success
    /// for the settings' `failure_limit` (or ends) ends its task with the
    /// failure.
    pub fn start(self, client: &Client, settings: WatchSettings) -> Watches {
        let mut watches = Watches::default();
        for slot in self.slots {
            let synced = Synced::default();
            watches.synced.push((slot.name(), synced.clone()));
            let requests = tokio::sync::watch::Sender::new(FIRST_LIST);
            let lists = Lists {
                requested: requests.subscribe(),
                synced,
            };
            watches.requests.push(requests);
            watches.tasks.spawn(slot.start(client, settings, lists));
        }
        watches
    }
}

/// The running watches of the process.
#[derive(Default)]
pub struct Watches {
    /// One task per kind.
    pub tasks: JoinSet<Result<(), WatchFailure>>,
    /// How far each kind's lists have come.
    pub synced: Vec<(&'static str, Synced)>,
    /// The latest list request, to each watch on its own channel, so the
    /// watches are woken in the order of the kinds (one channel's waiters
    /// are woken in an order of tokio's choosing, which no seed fixes).
    requests: Vec<tokio::sync::watch::Sender<u64>>,
}

impl Watches {
    /// Waits until every kind's first list of `synced` is in its store.
    pub async fn wait(synced: &[(&'static str, Synced)]) {
        Self::wait_for(synced, FIRST_LIST).await;
    }

    /// Waits until every kind of `synced` has listed for `request` (or a
    /// later request).
    pub async fn wait_for(synced: &[(&'static str, Synced)], request: u64) {
        for (_, synced) in synced {
            synced.wait_for(request).await;
        }
    }

    /// Whether every kind has listed for `request` (or a later request).
    pub fn listed(&self, request: u64) -> bool {
        self.synced.iter().all(|(_, synced)| synced.listed(request))
    }

    /// Asks every watch to list its kind from the server again, and returns
    /// the request's number: once [`Watches::wait_for`] returns for it,
    /// every store holds what the server held at the moment of the request
    /// or later. A watch that lags (events lost, or slow to resume) can hold an
    /// object long gone; a new leader must not act on that.
    pub fn relist(&self) -> u64 {
        self.requests.iter().fold(FIRST_LIST, |_, kind| {
            kind.send_modify(|request| *request += 1);
            *kind.borrow()
        })
    }

    /// The first watch of `tasks` to end: each should run as long as the
    /// process, so any end is a failure. Never resolves while all of them
    /// run, or when there are none.
    pub async fn failure_of(tasks: &mut JoinSet<Result<(), WatchFailure>>) -> WatchFailure {
        match tasks.join_next().await {
            None => std::future::pending().await,
            Some(Ok(Err(failure))) => failure,
            Some(Ok(Ok(()))) => WatchFailure::TaskFailed("it returned".to_string()),
            Some(Err(error)) => WatchFailure::TaskFailed(error.to_string()),
        }
    }

    /// Stops every watch.
    pub async fn stop(&mut self) {
        self.tasks.shutdown().await;
    }
}

#[cfg(test)]
mod tests;
