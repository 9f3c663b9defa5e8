use std::time::Duration;

use super::*;

fn address(last: u8) -> IpAddr {
    IpAddr::from([127, 0, 0, last])
}

/// Serves whatever the table says to serve, under the next key.
struct Port {
    table: Admission<u32, &'static str>,
    keys: u32,
    served: HashMap<u32, &'static str>,
    closed: Vec<&'static str>,
}

impl Port {
    fn new(capacity: usize, waiting: usize) -> Self {
        Self {
            table: Admission::new(capacity, waiting),
            keys: 0,
            served: HashMap::new(),
            closed: Vec::new(),
        }
    }

    fn serve(&mut self, source: IpAddr, name: &'static str) {
        self.keys += 1;
        self.table.serving(source, self.keys);
        self.served.insert(self.keys, name);
    }

    fn arrive(&mut self, source: u8, name: &'static str) {
        let deadline = Instant::now() + Duration::from_secs(10);
        match self.table.arrive(address(source), name, deadline) {
            Arrival::Serve(name) => self.serve(address(source), name),
            Arrival::ServeEvicting { connection, evict } => {
                let evicted = self.served.remove(&evict).unwrap();
                self.closed.push(evicted);
                self.serve(address(source), connection);
            }
            Arrival::Wait { close } => self.closed.extend(close),
        }
    }

    fn end(&mut self, name: &str) {
        let key = *self.served.iter().find(|(_, n)| **n == name).unwrap().0;
        self.served.remove(&key);
        self.table.ended(key);
        while let Some((source, name)) = self.table.next() {
            self.serve(source, name);
        }
    }

    fn is_served(&self, name: &str) -> bool {
        self.served.values().any(|n| *n == name)
    }
}

#[tokio::test(start_paused = true)]
async fn a_source_holding_few_takes_the_place_of_the_greediests_oldest() {
    let mut port = Port::new(4, 100);
    for name in ["a1", "a2", "a3", "b1"] {
        port.arrive(if name.starts_with('a') { 2 } else { 3 }, name);
    }
    assert_eq!(port.table.served_count(), 4);
    port.arrive(1, "probe");
    assert!(port.is_served("probe"), "served at once");
    assert_eq!(port.closed, ["a1"], "the greediest source's oldest");
    // a (two served) against b (one): a's next waits, no ping-pong.
    port.arrive(2, "a4");
    assert!(!port.is_served("a4"));
    assert_eq!(port.table.waiting_count(), 1);
    port.arrive(3, "b2");
    assert!(!port.is_served("b2"), "b holds one, a two: b2 waits");
    // A freed place goes to the source holding fewest: b (1) before a (2).
    port.end("probe");
    assert!(port.is_served("b2"));
    assert!(!port.is_served("a4"));
}

#[tokio::test(start_paused = true)]
async fn waiting_connections_are_bounded_and_expire() {
    let mut port = Port::new(1, 2);
    port.arrive(2, "served");
    port.arrive(2, "w1");
    port.arrive(3, "w2");
    port.arrive(3, "w3");
    assert_eq!(port.table.waiting_count(), 2);
    assert_eq!(
        port.closed,
        ["w2"],
        "the oldest of the source with most waiting"
    );
    let deadline = port.table.next_deadline().unwrap();
    assert_eq!(
        port.table.expire(deadline - Duration::from_secs(1)),
        Vec::<&str>::new()
    );
    let mut expired = port.table.expire(deadline);
    expired.sort_unstable();
    assert_eq!(expired, ["w1", "w3"]);
    assert_eq!(port.table.waiting_count(), 0);
    assert_eq!(port.table.next_deadline(), None);
    port.end("served");
    assert_eq!(port.table.served_count(), 0);
    assert!(
        port.table.sources.is_empty(),
        "nothing kept of a source gone"
    );
}

/// Many sources each holding one: no eviction (it would only move the
/// wait to another), a freed place goes to the oldest waiting.
#[tokio::test(start_paused = true)]
async fn sources_holding_one_each_wait_their_turn() {
    let mut port = Port::new(2, 10);
    port.arrive(2, "x");
    port.arrive(3, "y");
    port.arrive(4, "z");
    port.arrive(1, "probe");
    assert!(port.closed.is_empty());
    port.end("x");
    assert!(
        port.is_served("z"),
        "the oldest of the sources holding none"
    );
    port.end("y");
    assert!(port.is_served("probe"));
}
