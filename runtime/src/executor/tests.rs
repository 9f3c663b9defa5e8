//! The executor's promises: a plan's writes are conditional on the copies
//! its decision read (or on its own earlier answers), its reservations are
//! taken before anything is sent and released when it ends, a failed write
//! records what its step says and ends the plan; in shadow mode nothing is
//! sent, a plan's writes build on each other on copies, operations are
//! handed over unstarted, events dropped, reservations handed on.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::PersistentVolume;
use memapi::{MemApi, Verb};

use super::*;
use crate::events::EventType;
use crate::informer::{MemStore, Store, StoreRef};
use crate::keys::ObjectKey;
use crate::kinds::{Part, Shape, drop_managed_fields};
use crate::metrics::Metrics;
use crate::operations::OperationName;
use crate::plan::{IfFailed, event};
use crate::write::Door;

/// Volumes, encoded whole.
static VOLUME: Shape<PersistentVolume> = Shape::new(drop_managed_fields);

/// What a test executor was handed besides writes, as lines.
#[derive(Default)]
struct Lines(Mutex<Vec<String>>);

impl Lines {
    fn push(&self, line: String) {
        self.0.lock().unwrap().push(line);
    }

    fn take(&self) -> Vec<String> {
        std::mem::take(&mut self.0.lock().unwrap())
    }
}

/// The label `touched` of a volume handed to the shadow.
fn touched(object: Option<&(dyn Any + Send + Sync)>) -> String {
    object
        .and_then(|o| o.downcast_ref::<PersistentVolume>())
        .map(|v| {
            v.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("touched").cloned())
                .unwrap_or_else(|| "-".to_string())
        })
        .unwrap_or_else(|| "none".to_string())
}

/// The label `touched` of the volume `v1` as the server holds it.
fn touched_on_server(api: &MemApi) -> Option<String> {
    let stored = api.get::<PersistentVolume>(None, "v1").expect("stored");
    stored
        .metadata
        .labels
        .and_then(|l| l.get("touched").cloned())
}

impl Shadow for Lines {
    fn write(&self, intended: &Intended<'_>) {
        self.push(format!(
            "{} {:?} {} {}: {} -> {} (shown {})",
            intended.controller,
            intended.verb,
            intended.resource,
            intended.key,
            touched(intended.before),
            touched(intended.after),
            touched(intended.shown),
        ));
    }

    fn start(&self, controller: &'static str, operation: &OperationName) {
        self.push(format!("{controller} start {operation}"));
    }

    fn reserve(&self, reservation: Reservation, _kept: Box<dyn Any + Send>) {
        self.push(format!(
            "reserve {} for {}",
            reservation.reserved, reservation.for_uid
        ));
    }
}

impl Effects<String> for Lines {
    fn apply(&self, effect: &String) {
        self.push(format!("effect {effect}"));
    }
}

/// Reserves names, refusing one reserved for another holder.
#[derive(Default)]
struct Names(Arc<Mutex<HashMap<String, String>>>);

/// Releases a name when dropped.
struct Release(Arc<Mutex<HashMap<String, String>>>, String);

impl Drop for Release {
    fn drop(&mut self) {
        self.0.lock().unwrap().remove(&self.1);
    }
}

impl Reserver for Names {
    fn reserve(&self, reservation: &Reservation) -> Result<Box<dyn Any + Send>, String> {
        let mut held = self.0.lock().unwrap();
        match held.get(&reservation.reserved) {
            Some(holder) if *holder != reservation.for_uid => Err("held".to_string()),
            _ => {
                held.insert(reservation.reserved.clone(), reservation.for_uid.clone());
                Ok(Box::new(Release(
                    Arc::clone(&self.0),
                    reservation.reserved.clone(),
                )))
            }
        }
    }
}

/// A memapi with the volume `v1`, a store holding it, an executor over
/// them (shadow mode when `shadow`), and what it handed on.
struct Bed {
    api: MemApi,
    store: Arc<MemStore<PersistentVolume>>,
    stored: Arc<PersistentVolume>,
    executor: Executor<String>,
    lines: Arc<Lines>,
    operations: OperationTracker,
    names: Arc<Mutex<HashMap<String, String>>>,
}

fn bed(shadow: bool) -> Bed {
    let api = MemApi::new();
    let mut seeded = PersistentVolume::default();
    seeded.metadata.name = Some("v1".into());
    api.create(&seeded).expect("seed");
    let stored = Arc::new(api.get::<PersistentVolume>(None, "v1").expect("seeded"));
    let store = Arc::new(MemStore::default());
    store.written(Arc::clone(&stored)).expect("stored");
    let handle = StoreRef::new(&VOLUME);
    handle.fix(Arc::clone(&store) as Arc<dyn Store<PersistentVolume>>);
    let metrics = Arc::new(Metrics::new().expect("metrics"));
    let door = Door::new(api.client(), Arc::clone(&metrics));
    let recorder = EventRecorder::new(api.client(), metrics, "test", "test").expect("recorder");
    let operations = OperationTracker::new();
    let lines = Arc::new(Lines::default());
    let names = Names::default();
    let held = Arc::clone(&names.0);
    let runner: Runner<String> = Arc::new(|_, _| Some(Box::pin(async { Ok(()) })));
    let executor = Executor::new(Parts {
        controller: "test-controller",
        writers: WriterSet::default().with(door.writer("test-controller", handle)),
        recorder,
        effects: Arc::clone(&lines) as Arc<dyn Effects<String>>,
        reserver: Some(Arc::new(names)),
        operations: Some((operations.clone(), runner)),
        shadow: shadow.then(|| Arc::clone(&lines) as Arc<dyn Shadow>),
    });
    api.reset_requests();
    Bed {
        api,
        store,
        stored,
        executor,
        lines,
        operations,
        names: held,
    }
}

/// Plans the label `touched` set to `value` on `basis`; returns the copy
/// the plan leaves.
fn touch(
    plan: &mut Plan<String>,
    basis: &Arc<PersistentVolume>,
    value: &'static str,
) -> Arc<PersistentVolume> {
    plan.update(basis, Part::Spec, format!("touched {value}"), |volume| {
        volume
            .metadata
            .labels
            .get_or_insert_with(Default::default)
            .insert("touched".into(), value.into())
            .as_deref()
            != Some(value)
    })
}

fn reservation() -> Reservation {
    Reservation {
        for_key: ObjectKey::new("ns", "c1"),
        for_uid: "uid-c".into(),
        reserved: "v1".into(),
    }
}

#[tokio::test(start_paused = true)]
async fn a_shadow_plan_builds_on_its_own_writes_sends_nothing_and_the_next_starts_afresh() {
    let bed = bed(true);
    let mut plan = Plan::<String>::default();
    let touched_once = touch(&mut plan, &bed.stored, "first");
    touch(&mut plan, &touched_once, "second");
    plan.event(
        bed.stored.as_ref(),
        EventType::Normal,
        "Touched",
        "touched".into(),
    );
    plan.local("remembered".into());
    plan.start(OperationName::new(
        "scrub",
        ObjectKey::new("", "v1"),
        "uid-1",
    ));
    plan.reserve(reservation());
    bed.executor.execute(plan).await.expect("shadowed");
    assert_eq!(
        bed.lines.take(),
        [
            "test-controller Update persistentvolumes v1: - -> first (shown -)",
            "test-controller Update persistentvolumes v1: first -> second (shown -)",
            "effect remembered",
            "test-controller start scrub-v1[uid-1]",
            "reserve v1 for uid-c",
        ],
        "each write with the object before and after it, the effect applied, the start \
         unstarted, the reservation handed on, no event"
    );
    assert!(!bed.operations.is_running(&OperationName::new(
        "scrub",
        ObjectKey::new("", "v1"),
        "uid-1"
    )));

    // Two writes of one object both decided on the copy the decision
    // read: the second's copy is not the one decided on any more.
    let mut plan = Plan::<String>::default();
    touch(&mut plan, &bed.stored, "first");
    touch(&mut plan, &bed.stored, "again");
    let refused = bed.executor.execute(plan).await;
    assert!(
        matches!(refused, Err(WriteError::Stale { .. })),
        "{refused:?}"
    );
    assert_eq!(
        bed.lines.take(),
        ["test-controller Update persistentvolumes v1: - -> first (shown -)"],
        "every plan starts from what the store holds, not from an earlier plan's unsent answer"
    );
    assert_eq!(
        bed.store
            .get(&ObjectKey::new("", "v1"))
            .and_then(|v| v.metadata.labels.clone()),
        None,
        "the store keeps what the cluster shows"
    );
    assert_eq!(bed.api.requests().log().len(), 0, "nothing was sent");
}

#[tokio::test(start_paused = true)]
async fn a_plan_writes_conditional_on_what_it_decided_and_on_its_own_answers() {
    let bed = bed(false);
    let mut plan = Plan::<String>::default();
    let once = touch(&mut plan, &bed.stored, "first");
    touch(&mut plan, &once, "second");
    plan.local("done".into());
    bed.executor.execute(plan).await.expect("both writes go");
    assert_eq!(bed.lines.take(), ["effect done"]);
    assert_eq!(touched_on_server(&bed.api), Some("second".to_string()));

    // A decision made on the first copy again: the store holds a newer
    // one, so the plan ends before anything is sent, and its effects are
    // not applied.
    bed.api.reset_requests();
    let mut plan = Plan::<String>::default();
    touch(&mut plan, &bed.stored, "stale");
    plan.local("not reached".into());
    let refused = bed.executor.execute(plan).await;
    assert!(
        refused.as_ref().is_err_and(WriteError::is_conflict),
        "{refused:?}"
    );
    assert_eq!(bed.api.requests().log().len(), 0, "nothing was sent");
    assert!(bed.lines.take().is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_plan_waiting_on_the_server_holds_no_copies_of_what_it_writes() {
    let bed = bed(false);
    bed.api.add_reactor(
        memapi::Reactor::on(Verb::Patch, "persistentvolumes")
            .delay(Duration::from_secs(10))
            .always(),
    );
    let mut plan = Plan::<String>::default();
    let made_once = touch(&mut plan, &bed.stored, "first");
    let made_twice = touch(&mut plan, &made_once, "second");
    let (once, twice) = (Arc::downgrade(&made_once), Arc::downgrade(&made_twice));
    drop((made_once, made_twice));
    let held_before = Arc::strong_count(&bed.stored);
    let executor = bed.executor.clone();
    let running = tokio::spawn(async move { executor.execute(plan).await });
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(!running.is_finished(), "the first write is in flight");
    assert!(
        once.upgrade().is_none() && twice.upgrade().is_none(),
        "the copies the decision made are let go of once the plan sends"
    );
    assert_eq!(
        Arc::strong_count(&bed.stored),
        held_before - 1,
        "nor is the copy the decision read held by the plan"
    );
    running.await.expect("ran").expect("both writes go");
    assert_eq!(
        touched_on_server(&bed.api),
        Some("second".to_string()),
        "the merge patches kept carry what the copies said"
    );
    assert_eq!(bed.api.requests().log().len(), 2);
}

#[tokio::test(start_paused = true)]
async fn an_update_that_changes_nothing_sent_leaves_the_next_conditional_on_the_last_answer() {
    let bed = bed(false);
    let mut plan = Plan::<String>::default();
    let once = touch(&mut plan, &bed.stored, "first");
    // Edits only the status in an update of the spec: nothing to send.
    let unsent = plan.update(&once, Part::Spec, "status only", |volume| {
        volume.status.get_or_insert_with(Default::default).phase = Some("Available".into());
        true
    });
    touch(&mut plan, &unsent, "second");
    bed.executor
        .execute(plan)
        .await
        .expect("the third write is conditional on the first one's answer");
    assert_eq!(touched_on_server(&bed.api), Some("second".to_string()));
    assert_eq!(
        bed.api.requests().log().len(),
        2,
        "two patches, no conflict"
    );
}

#[tokio::test(start_paused = true)]
async fn a_failed_write_records_what_its_step_says_and_ends_the_plan() {
    let bed = bed(false);
    bed.api.add_reactor(
        memapi::Reactor::on(Verb::Patch, "persistentvolumes")
            .error_with(403, "persistentvolumes \"v1\" is forbidden: no"),
    );
    let mut plan = Plan::<String>::default();
    touch(&mut plan, &bed.stored, "first");
    plan.if_failed(IfFailed::Warn(Box::new(event(
        bed.stored.as_ref(),
        EventType::Warning,
        "Failed",
        "touch v1".into(),
    ))));
    plan.if_failed(IfFailed::Local("failed".into()));
    plan.local("went through".into());
    let failed = bed.executor.execute(plan).await;
    assert!(failed.is_err(), "{failed:?}");
    assert_eq!(bed.lines.take(), ["effect failed"]);
}

#[tokio::test(start_paused = true)]
async fn reservations_are_taken_before_the_first_write_and_released_at_the_end() {
    let bed = bed(false);
    let mut plan = Plan::<String>::default();
    touch(&mut plan, &bed.stored, "first");
    plan.reserve(reservation());
    let started = bed.executor.start(plan).expect("reserved");
    assert_eq!(
        bed.names.lock().unwrap().get("v1").map(String::as_str),
        Some("uid-c"),
        "held before anything is sent"
    );
    let mut other = Plan::<String>::default();
    other.reserve(Reservation {
        for_uid: "uid-other".into(),
        ..reservation()
    });
    let refused = bed.executor.start(other);
    assert!(
        matches!(refused, Err(WriteError::Stale { .. })),
        "reserved for another"
    );
    bed.executor.finish(started).await.expect("written");
    assert!(bed.names.lock().unwrap().is_empty(), "released at the end");
}
