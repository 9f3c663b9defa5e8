//! The executor's journaling mode: nothing is sent, a plan's writes build
//! on each other on copies while the stores keep what the cluster shows,
//! operations are handed over unstarted, events dropped, holds handed on.

use std::fmt;
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::PersistentVolume;
use memapi::MemApi;

use super::*;
use crate::events::EventType;
use crate::hold::Hold;
use crate::informer::{MemStore, Store, StoreRef};
use crate::journal::Intended;
use crate::keys::ObjectKey;
use crate::kinds::{Part, Shape, drop_managed_fields};
use crate::metrics::Metrics;
use crate::operations::OperationName;
use crate::plan::Change;
use crate::write::{Door, Edit};

/// Volumes, encoded whole.
static VOLUME: Shape<PersistentVolume> = Shape::new(drop_managed_fields);

/// What the journal was handed, as lines.
#[derive(Default)]
struct Lines(Mutex<Vec<String>>);

impl Lines {
    fn take(&self) -> Vec<String> {
        std::mem::take(&mut self.0.lock().unwrap())
    }
}

/// The label `touched` of a volume handed to the journal.
fn touched(object: Option<&(dyn std::any::Any + Send + Sync)>) -> String {
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

impl Journal for Lines {
    fn write(&self, intended: &Intended<'_>) {
        self.0.lock().unwrap().push(format!(
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
        self.0
            .lock()
            .unwrap()
            .push(format!("{controller} start {operation}"));
    }

    fn hold(&self, hold: Hold) {
        self.0
            .lock()
            .unwrap()
            .push(format!("hold {} for {}", hold.held, hold.holder));
    }
}

/// Labels a volume `touched`, refusing one labelled already.
struct Touch(&'static str);

impl fmt::Display for Touch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "touched {}", self.0)
    }
}

impl Change<PersistentVolume> for Touch {
    fn apply(&self, newest: &mut PersistentVolume) -> Edit {
        let labels = newest.metadata.labels.get_or_insert_with(Default::default);
        if labels.contains_key("touched") {
            return Edit::Refused("touched already".to_string());
        }
        labels.insert("touched".to_string(), self.0.to_string());
        Edit::Changed
    }
}

#[tokio::test(start_paused = true)]
async fn a_journaled_plan_builds_on_its_own_writes_sends_nothing_and_the_next_starts_afresh() {
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
    let executor = Executor::new(
        "test-controller",
        WriterSet::default().with(door.writer("test-controller", handle)),
        recorder,
        operations.clone(),
        Some(Arc::clone(&lines) as Arc<dyn Journal>),
    );
    api.reset_requests();

    let mut plan = Plan::<()>::default();
    plan.update(&stored, Part::Spec, Touch("first"))
        .expect("planned");
    plan.event(
        stored.as_ref(),
        EventType::Normal,
        "Touched",
        "touched".into(),
    );
    plan.start(
        OperationName::new("scrub", ObjectKey::new("", "v1"), "uid-1"),
        async { Ok::<(), String>(()) },
    );
    plan.hold(Hold {
        holder: "uid-c".into(),
        held: "v1".into(),
        guard: Box::new(()),
    });
    executor.execute(plan).await.expect("journaled");
    assert_eq!(
        lines.take(),
        [
            "test-controller Update persistentvolumes v1: - -> first (shown -)",
            "test-controller start scrub-v1[uid-1]",
            "hold v1 for uid-c",
        ],
        "the write with the object before and after it, the start unstarted, the hold, no event"
    );
    assert!(!operations.is_running(&OperationName::new(
        "scrub",
        ObjectKey::new("", "v1"),
        "uid-1"
    )));

    // Two writes of one object: the second edits the first's answer, which
    // refuses it, and the plan ends there.
    let mut plan = Plan::<()>::default();
    plan.update(&stored, Part::Spec, Touch("first"))
        .expect("planned");
    plan.update(&stored, Part::Spec, Touch("second"))
        .expect("planned on the copy the decision read");
    let refused = executor.execute(plan).await;
    assert!(
        matches!(refused, Err(WriteError::Stale { .. })),
        "{refused:?}"
    );
    assert_eq!(
        lines.take(),
        ["test-controller Update persistentvolumes v1: - -> first (shown -)"],
        "every plan starts from what the store holds, not from an earlier plan's unsent answer"
    );
    assert_eq!(
        store
            .get(&ObjectKey::new("", "v1"))
            .and_then(|v| v.metadata.labels.clone()),
        None,
        "the store keeps what the cluster shows"
    );
    assert_eq!(api.requests().log().len(), 0, "nothing was sent");
}
