//! The faults of a chaos run: request faults installed as memapi reactors
//! (each with its own probability, drawn from memapi's seeded generator),
//! and the faults the schedule throws at its own moments (watch streams
//! cut, history compacted, storage failures, replicas killed).

use std::collections::BTreeMap;
use std::time::Duration;

use memapi::{MemApi, Reactor, ReactorId};

/// The client's time limit per request in a chaos run; a timeout fault
/// holds a request twice as long.
pub(crate) const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// One class of request fault and how it is made.
struct Class {
    name: &'static str,
    /// Share of the requests it matches that it hits, relative to the
    /// run's fault rate (the shares of the classes add up to about one).
    weight: f64,
    reactor: fn() -> Reactor,
}

/// Objects per page of the replicas' lists: small enough that most lists
/// of the small cluster come in several pages, so continued pages are
/// served from the first page's snapshot and a compaction between pages
/// expires the continue token (410, the list starts again).
pub(crate) const LIST_PAGE_SIZE: u32 = 3;

fn held() -> Duration {
    REQUEST_TIMEOUT * 2
}

/// Every request fault class. Classes on writes weigh more: writes are
/// about a quarter of the requests (weights measured to make the share of
/// failed requests the run's rate).
const CLASSES: &[Class] = &[
    Class {
        name: "409 Conflict (write refused)",
        weight: 0.45,
        reactor: || Reactor::any().writes_only().error(409),
    },
    Class {
        name: THROTTLED,
        weight: 0.15,
        reactor: || Reactor::any().throttle(1),
    },
    Class {
        name: "500 InternalError",
        weight: 0.15,
        reactor: || Reactor::any().error(500),
    },
    Class {
        name: "503 ServiceUnavailable",
        weight: 0.15,
        reactor: || Reactor::any().error(503),
    },
    Class {
        name: "timeout before the write",
        weight: 0.1,
        reactor: || Reactor::any().delay(held()),
    },
    Class {
        name: "connection dropped before the write",
        weight: 0.1,
        reactor: || Reactor::any().drop_connection(),
    },
    Class {
        name: "connection dropped after the commit",
        weight: 0.45,
        reactor: || {
            Reactor::any()
                .writes_only()
                .drop_connection()
                .after_commit()
        },
    },
    Class {
        name: "500 after the commit (answer lost)",
        weight: 0.3,
        reactor: || Reactor::any().writes_only().error(500).after_commit(),
    },
    Class {
        name: "timeout after the commit",
        weight: 0.2,
        reactor: || Reactor::any().writes_only().delay(held()).after_commit(),
    },
];

/// The name of the class of 429s with Retry-After.
const THROTTLED: &str = "429 TooManyRequests, Retry-After 1";

impl Class {
    /// Whether this is the class of 429s with Retry-After.
    fn throttles(&self) -> bool {
        self.name == THROTTLED
    }
}

/// The request faults installed on one server.
pub(crate) struct RequestFaults {
    installed: Vec<(&'static str, ReactorId)>,
}

impl RequestFaults {
    /// Installs every class so that about `rate` of all requests fail;
    /// without `throttling`, the 429s never fire (their reactor still
    /// draws its numbers, so the other faults hit the same requests).
    pub(crate) fn install(api: &MemApi, rate: f64, throttling: bool) -> Self {
        let installed = CLASSES
            .iter()
            .map(|c| {
                let share = if throttling || !c.throttles() {
                    rate * c.weight
                } else {
                    0.0
                };
                let reactor = (c.reactor)().probability(share);
                (c.name, api.add_reactor(reactor))
            })
            .collect();
        Self { installed }
    }

    /// Removes them all (the faults stop) and returns how often each fired.
    pub(crate) fn remove(self, api: &MemApi) -> Vec<(&'static str, u64)> {
        self.installed
            .into_iter()
            .map(|(name, id)| {
                let fired = api.remove_reactor(id).map_or(0, |r| u64::from(r.fired()));
                (name, fired)
            })
            .collect()
    }
}

/// What a run survived, added up over runs for the report.
#[derive(Debug, Default, Clone)]
pub(crate) struct Survived {
    /// Requests hit by each request fault class.
    pub(crate) requests: BTreeMap<&'static str, u64>,
    /// Other faults and what they caused, by name.
    pub(crate) other: BTreeMap<&'static str, u64>,
}

impl Survived {
    pub(crate) fn add(&mut self, name: &'static str, n: u64) {
        *self.other.entry(name).or_default() += n;
    }

    pub(crate) fn add_requests(&mut self, fired: Vec<(&'static str, u64)>) {
        for (name, n) in fired {
            *self.requests.entry(name).or_default() += n;
        }
    }

    pub(crate) fn merge(&mut self, other: &Survived) {
        for (name, n) in &other.requests {
            *self.requests.entry(name).or_default() += n;
        }
        for (name, n) in &other.other {
            *self.other.entry(name).or_default() += n;
        }
    }

    /// A table for the test's output and docs/reliability.md.
    pub(crate) fn table(&self) -> String {
        let mut out = String::from("| fault | injected |\n|---|---|\n");
        for (name, n) in self.requests.iter().chain(&self.other) {
            out.push_str(&format!("| {name} | {n} |\n"));
        }
        out
    }
}
