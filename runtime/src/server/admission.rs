//! Which accepted connections an admin port serves, so that no client can
//! starve another of it (the kubelet's probes above all): every connection
//! is accepted at once, so none waits unseen in the kernel's listen backlog
//! where nothing can tell one client from another; at most `capacity` are
//! served at a time, each counted against its source address; the rest
//! wait here, costing a socket and a few bytes each, for a bounded time.
//!
//! Sharing is by source address:
//!
//! - a freed place goes to the waiting connection whose source has the
//!   fewest served connections (the oldest first among equals);
//! - a connection that arrives while every place is taken, from a source
//!   holding at least two fewer served connections than the source holding
//!   the most, takes that source's oldest served connection's place: that
//!   one is closed. A source that holds a few connections (the kubelet
//!   holds one per probe) is served at once however many others hold,
//!   unless more sources than there are places hold as many;
//! - at most `waiting_capacity` connections wait; past it the oldest
//!   waiting connection of the source with the most waiting is closed.
//!
//! The table is plain data: the serving loop ([`super::serving`]) accepts,
//! spawns and closes as it says.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::hash::Hash;
use std::net::IpAddr;

use tokio::time::Instant;

/// What to do with an arriving connection.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Arrival<C, K> {
    /// Serve it now; report its key with [`Admission::serving`].
    Serve(C),
    /// Serve it now in the place of the served connection `evict`, which
    /// is to be closed (its place is already freed here); report the new
    /// one's key with [`Admission::serving`].
    ServeEvicting {
        /// The connection to serve.
        connection: C,
        /// The served connection to close.
        evict: K,
    },
    /// It waits; `close` is a waiting connection pushed out to make room,
    /// if any.
    Wait {
        /// The waiting connection to close.
        close: Option<C>,
    },
}

/// A connection waiting for a place.
#[derive(Debug)]
struct Waiting<C> {
    order: u64,
    deadline: Instant,
    connection: C,
}

/// One source's connections.
#[derive(Debug)]
struct Source<K, C> {
    /// Served connections by the order they were admitted in.
    served: BTreeMap<u64, K>,
    /// Waiting connections, oldest first.
    waiting: VecDeque<Waiting<C>>,
}

impl<K, C> Default for Source<K, C> {
    fn default() -> Self {
        Self {
            served: BTreeMap::new(),
            waiting: VecDeque::new(),
        }
    }
}

/// The admin port's connections, served and waiting, by source.
#[derive(Debug)]
pub(super) struct Admission<K, C> {
    capacity: usize,
    waiting_capacity: usize,
    sources: HashMap<IpAddr, Source<K, C>>,
    /// Each served connection's source and admission order.
    served: HashMap<K, (IpAddr, u64)>,
    waiting: usize,
    next_order: u64,
}

impl<K: Copy + Eq + Hash, C> Admission<K, C> {
    /// At most `capacity` connections served at once (at least one), at
    /// most `waiting_capacity` waiting.
    pub(super) fn new(capacity: usize, waiting_capacity: usize) -> Self {
        Self {
            capacity: capacity.max(1),
            waiting_capacity,
            sources: HashMap::new(),
            served: HashMap::new(),
            waiting: 0,
            next_order: 0,
        }
    }

    /// How many connections are served.
    #[cfg(test)]
    pub(super) fn served_count(&self) -> usize {
        self.served.len()
    }

    /// How many connections wait.
    #[cfg(test)]
    pub(super) fn waiting_count(&self) -> usize {
        self.waiting
    }

    fn order(&mut self) -> u64 {
        self.next_order += 1;
        self.next_order
    }

    fn served_by(&self, source: IpAddr) -> usize {
        self.sources.get(&source).map_or(0, |s| s.served.len())
    }

    /// The oldest served connection of the source holding the most (the
    /// one whose oldest connection is the oldest among equals), with how
    /// many that source holds.
    fn greediest(&self) -> Option<(usize, K)> {
        self.sources
            .values()
            .filter_map(|source| {
                let (order, key) = source.served.first_key_value()?;
                Some((source.served.len(), std::cmp::Reverse(*order), *key))
            })
            .max_by_key(|(count, order, _)| (*count, *order))
            .map(|(count, _, key)| (count, key))
    }

    /// Decides on a connection from `source`, accepted at `now`; a
    /// connection that waits is closed at `deadline` if it is still
    /// waiting then ([`Admission::expire`]).
    pub(super) fn arrive(
        &mut self,
        source: IpAddr,
        connection: C,
        deadline: Instant,
    ) -> Arrival<C, K> {
        if self.served.len() < self.capacity {
            return Arrival::Serve(connection);
        }
        let held = self.served_by(source);
        if let Some((most, evict)) = self.greediest()
            && held + 1 < most
        {
            self.ended(evict);
            return Arrival::ServeEvicting { connection, evict };
        }
        let order = self.order();
        self.sources
            .entry(source)
            .or_default()
            .waiting
            .push_back(Waiting {
                order,
                deadline,
                connection,
            });
        self.waiting += 1;
        let close = (self.waiting > self.waiting_capacity)
            .then(|| self.push_out())
            .flatten();
        Arrival::Wait { close }
    }

    /// Removes the oldest waiting connection of the source with the most
    /// waiting (to close it: the waiting are too many, or the process is
    /// out of file descriptors).
    pub(super) fn push_out(&mut self) -> Option<C> {
        let source = self
            .sources
            .iter()
            .filter_map(|(address, source)| {
                let oldest = source.waiting.front()?.order;
                Some((source.waiting.len(), std::cmp::Reverse(oldest), *address))
            })
            .max()
            .map(|(_, _, address)| address)?;
        self.take_waiting(source)
    }

    fn take_waiting(&mut self, address: IpAddr) -> Option<C> {
        let source = self.sources.get_mut(&address)?;
        let waiting = source.waiting.pop_front()?;
        if source.served.is_empty() && source.waiting.is_empty() {
            self.sources.remove(&address);
        }
        self.waiting -= 1;
        Some(waiting.connection)
    }

    /// Records that the connection from `source` is served under `key`.
    pub(super) fn serving(&mut self, source: IpAddr, key: K) {
        let order = self.order();
        self.sources
            .entry(source)
            .or_default()
            .served
            .insert(order, key);
        self.served.insert(key, (source, order));
    }

    /// Records that the served connection `key` ended (or was closed); a
    /// key it does not hold is ignored.
    pub(super) fn ended(&mut self, key: K) {
        let Some((address, order)) = self.served.remove(&key) else {
            return;
        };
        if let Some(source) = self.sources.get_mut(&address) {
            source.served.remove(&order);
            if source.served.is_empty() && source.waiting.is_empty() {
                self.sources.remove(&address);
            }
        }
    }

    /// The waiting connection to serve next, while a place is free: the
    /// one whose source holds the fewest served connections, the oldest
    /// among equals; with its source.
    pub(super) fn next(&mut self) -> Option<(IpAddr, C)> {
        if self.served.len() >= self.capacity {
            return None;
        }
        let address = self
            .sources
            .iter()
            .filter_map(|(address, source)| {
                let oldest = source.waiting.front()?.order;
                Some(((source.served.len(), oldest), *address))
            })
            .min()
            .map(|(_, address)| address)?;
        self.take_waiting(address)
            .map(|connection| (address, connection))
    }

    /// When the first waiting connection's time is up, if any waits.
    pub(super) fn next_deadline(&self) -> Option<Instant> {
        self.sources
            .values()
            .filter_map(|source| source.waiting.iter().map(|w| w.deadline).min())
            .min()
    }

    /// Removes the waiting connections whose time is up at `now`.
    pub(super) fn expire(&mut self, now: Instant) -> Vec<C> {
        let mut expired = Vec::new();
        for source in self.sources.values_mut() {
            let (late, kept): (Vec<_>, Vec<_>) =
                source.waiting.drain(..).partition(|w| w.deadline <= now);
            source.waiting = kept.into();
            expired.extend(late.into_iter().map(|w| w.connection));
        }
        self.waiting -= expired.len();
        self.sources
            .retain(|_, source| !source.served.is_empty() || !source.waiting.is_empty());
        expired
    }
}

#[cfg(test)]
mod tests;
