//! Shadow mode (the process's `--shadow` mode): the controllers decide as
//! usual beside the controller that really runs the cluster
//! (kube-controller-manager), but nothing is sent. Their executors hand
//! their plans ([`crate::runtime::shadow`]) to a [`Comparison`], which turns
//! each intended write and each operation it would start into the
//! decisions they carry ([`decisions`]) and keeps them until the watch
//! shows the cluster come to the same ([`Comparison::observed`]: agree) or to
//! something else, or until a window passes with nothing (differ, with
//! both sides named). A claim bound by the other controller before this
//! one decided is judged by what this one would have chosen
//! ([`BindJudge`]). Counts go to `pv_controller_shadow_decisions_total`,
//! each difference to the log and to `GET /shadow` ([`route`]).
//!
//! The stores follow only what the cluster shows: intended writes never
//! enter them. A bind this process intends keeps its volume reserved in the
//! binder's index until judged ([`Shadow::reserve`]), so that its next
//! decisions are the ones it would make had it written.

mod bind_judge;
mod decisions;
mod handed;
mod observe;
mod report;
mod verdict;
mod views;

use std::any::Any;
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use prometheus::{IntCounterVec, IntGauge, Opts};
use tokio::time::Instant;

use crate::pv::Foreseen;
use crate::runtime::keys::ObjectKey;
use crate::runtime::metrics::{Metrics, MetricsError};
pub(crate) use bind_judge::judge_binds_by;
use decisions::{Decision, Expected, Subject};
use k8s_names::ANN_POD_CLAIM_NAME;
pub(crate) use observe::observe;
use report::Difference;
pub use report::ShadowReport;
pub(crate) use report::route;
use verdict::Verdict;
use views::View;

/// Shadow mode's settings (`--shadow`, `--shadow-window`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShadowConfig {
    /// How long the cluster has to come to a decision of this process
    /// before it counts as a difference (default: two resync periods).
    pub window: Duration,
}

/// How many differences `/shadow` keeps (the newest).
const KEPT_DIFFERENCES: usize = 1000;

/// Whether `other` is as good a choice as `ours` for the claim of the key.
type EquivalentFn = dyn Fn(&ObjectKey, &str, &str) -> bool + Send + Sync;

/// What this controller would do with the claim of the key, had the
/// volume it was bound to (the second argument) been free; `None`: the
/// claim is not known here (gone), so nothing is judged.
type WouldBindFn = dyn Fn(&ObjectKey, &str) -> Option<Choice> + Send + Sync;

/// What an operation of a kind (the first argument) on an object shows
/// first on the cluster, whether it shows it already, and the object's
/// resourceVersion here; `None`: not known here.
type ForeseeFn = dyn Fn(&str, &ObjectKey) -> Option<Foreseen> + Send + Sync;

/// What this controller would do with a claim.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Choice {
    /// Bind it to this volume.
    Bind(String),
    /// Leave it Pending.
    Pending,
}

/// How a bind the other controller made, and an operation this one would
/// start, are judged: by the binder's rules on the objects as this
/// process's store holds them.
pub(crate) struct BindJudge {
    /// Whether `other` is as good a choice as `ours` for the claim (both
    /// fit it; same capacity, class, access modes, volume mode, node
    /// affinity).
    pub(crate) equivalent: Box<EquivalentFn>,
    /// What this controller would have done with the claim.
    pub(crate) would_bind: Box<WouldBindFn>,
    /// What an operation this controller would start shows first.
    pub(crate) foresee: Box<ForeseeFn>,
}

/// A decision waiting for the cluster.
struct Pending {
    controller: &'static str,
    decision: Decision,
    since: Instant,
    /// What the cluster showed of the subject when last seen, for people.
    seen: Option<String>,
}

#[derive(Default)]
struct State {
    pending: HashMap<Subject, Vec<Pending>>,
    /// Reservations kept for intended binds, by claim UID, with the
    /// volume each reserves.
    reserved: HashMap<String, (String, Box<dyn Any + Send>)>,
    /// Claims last seen unbound, by UID: a bind of one by someone else is
    /// judged.
    unbound: HashSet<String>,
    /// Claims whose bind was judged lately, by UID, and when.
    judged: HashMap<String, Instant>,
    /// Decisions judged different because nothing came of them, by
    /// subject: decided again while the cluster shows the subject as it
    /// was, they are not counted again.
    unmet: HashMap<Subject, Vec<(&'static str, Expected)>>,
    differences: VecDeque<Difference>,
    counts: BTreeMap<(&'static str, &'static str), (u64, u64)>,
    /// Binds the other controller made before this one decided, judged
    /// once they are [`THEIR_BIND_WAIT`] old.
    their_binds: Vec<TheirBind>,
    /// Operations started, by name, with their object and the version of
    /// it they were started on: a start of the same operation on the same
    /// version is the same decision again (a process that acts would not
    /// run it twice either), one on a newer version a new one.
    started: HashMap<String, (ObjectKey, Option<String>)>,
}

/// A bind by the other controller, waiting to be judged.
struct TheirBind {
    seen: Instant,
    key: ObjectKey,
    uid: String,
    volume: String,
}

/// How long a bind by the other controller waits before it is judged: the
/// other controller decides from its own memory of the binds it has just
/// made, which reach this process's caches a little later; judged at
/// once, the volume it gave another claim a moment before could still look
/// free here.
const THEIR_BIND_WAIT: Duration = Duration::from_secs(5);

/// Shadow mode's comparison of this process's decisions with the cluster.
pub(crate) struct Comparison {
    window: Duration,
    state: Mutex<State>,
    judge: OnceLock<BindJudge>,
    decisions: IntCounterVec,
    pending_gauge: IntGauge,
}

impl std::fmt::Debug for Comparison {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Comparison")
            .field("window", &self.window)
            .finish_non_exhaustive()
    }
}

impl Comparison {
    /// A comparison judging within `config.window`, its series registered in
    /// `metrics`.
    pub(crate) fn new(config: &ShadowConfig, metrics: &Metrics) -> Result<Self, MetricsError> {
        let decisions = IntCounterVec::new(
            Opts::new(
                "pv_controller_shadow_decisions_total",
                "Decisions of this process in shadow mode, by controller, kind and whether the cluster came to the same (agree) or not (differ)",
            ),
            &["controller", "kind", "outcome"],
        )?;
        let pending_gauge = IntGauge::new(
            "pv_controller_shadow_pending_decisions",
            "Decisions of this process in shadow mode the cluster has not yet come to",
        )?;
        metrics.register(Box::new(decisions.clone()))?;
        metrics.register(Box::new(pending_gauge.clone()))?;
        Ok(Self {
            window: config.window,
            state: Mutex::default(),
            judge: OnceLock::new(),
            decisions,
            pending_gauge,
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Sets how binds are judged (the binder does, when it runs).
    pub(crate) fn set_judge(&self, judge: BindJudge) {
        let _ = self.judge.set(judge);
    }

    /// Keeps `decisions` of `controller` until the cluster comes to them:
    /// one already waiting stays as it is, one judged unmet before is not
    /// counted again while the cluster shows its subject unchanged.
    fn expect(&self, controller: &'static str, decisions: Vec<Decision>) {
        if decisions.is_empty() {
            return;
        }
        let mut state = self.lock();
        for decision in decisions {
            let again = state.unmet.get(&decision.subject).is_some_and(|unmet| {
                unmet.iter().any(|(kind, expected)| {
                    *kind == decision.kind && *expected == decision.expected
                })
            });
            if again {
                continue;
            }
            tracing::debug!(controller, kind = decision.kind, object = %decision.subject.describe(), ours = %decision.ours, "intended");
            let list = state.pending.entry(decision.subject.clone()).or_default();
            let same = list.iter().any(|p| {
                p.decision.kind == decision.kind
                    && p.decision.expected == decision.expected
                    && p.decision.uid == decision.uid
            });
            if !same {
                list.retain(|p| p.decision.kind != decision.kind);
                list.push(Pending {
                    controller,
                    decision,
                    since: Instant::now(),
                    seen: None,
                });
            }
        }
        self.pending_gauge.set(gauge_value(&state));
    }

    /// What the cluster shows of `resource` `key` (the store's copy; `None`:
    /// gone) as this
    /// process decides about it: the decision is judged on it at once, as
    /// the other controller may have come to it first (created, deleted or
    /// changed the object already) and no further change may come.
    pub(crate) fn present(&self, resource: &str, key: &ObjectKey, object: Option<&View<'_>>) {
        let Some(resource) = decisions::judged_resource(resource) else {
            return;
        };
        let uid = object.and_then(|o| o.uid);
        self.judge(resource, key, uid, object, false);
    }

    /// `resource` `key` (of `uid`) is gone from the cluster: what is kept
    /// about it is let go (its unmet decisions; a claim's last unbound
    /// sighting), so a cluster's churn does not pile up here.
    pub(crate) fn forget(&self, resource: &str, key: &ObjectKey, uid: Option<&str>) {
        let Some(resource) = decisions::judged_resource(resource) else {
            return;
        };
        let mut state = self.lock();
        state.unmet.remove(&Subject::Object {
            resource,
            key: key.clone(),
        });
        state.started.retain(|_, (object, _)| object != key);
        if let Some(uid) = uid {
            state.unbound.remove(uid);
            state.reserved.remove(uid);
        }
    }

    /// Keeps `reservation` (the binder's hold of `volume` for the claim of
    /// `claim_uid`) until the cluster shows that claim bound or gone, or
    /// its bind is judged otherwise than by the window passing. A hold of
    /// the same volume kept already stays: the new one only repeats it.
    fn keep(&self, claim_uid: &str, volume: &str, reservation: Box<dyn Any + Send>) {
        let mut state = self.lock();
        match state.reserved.get(claim_uid) {
            Some((reserved, _)) if reserved == volume => {}
            _ => {
                state
                    .reserved
                    .insert(claim_uid.to_string(), (volume.to_string(), reservation));
            }
        }
    }

    /// Whether a change of `resource` `key` is of interest: a decision
    /// waits for it (so the caller converts the object only then).
    pub(crate) fn waits_for(&self, resource: &'static str, key: &ObjectKey) -> bool {
        let subject = Subject::Object {
            resource,
            key: key.clone(),
        };
        self.lock().pending.contains_key(&subject)
    }

    /// The cluster shows `object` (`None`: gone) as `resource` `key` with
    /// `uid`: judges the decisions waiting for it.
    pub(crate) fn observed(
        &self,
        resource: &'static str,
        key: &ObjectKey,
        uid: Option<&str>,
        object: Option<&View<'_>>,
    ) {
        self.judge(resource, key, uid, object, true);
    }

    /// Judges the decisions waiting for `resource` `key` on `object`; a
    /// `changed` object also lets go of the subject's unmet decisions (the
    /// cluster moved, so deciding them again counts again).
    fn judge(
        &self,
        resource: &'static str,
        key: &ObjectKey,
        uid: Option<&str>,
        object: Option<&View<'_>>,
        changed: bool,
    ) {
        let mut state = self.lock();
        if resource == "resourceclaims"
            && let Some(object) = object
            && let (Some(pod_uid), Some(entry)) =
                (object.owner_pod, object.annotation(ANN_POD_CLAIM_NAME))
        {
            let generated = Subject::Generated {
                namespace: key.namespace.clone(),
                pod_uid: pod_uid.to_string(),
                entry: entry.to_string(),
            };
            self.judge_subject(&mut state, &generated, None, Some(object));
        }
        let subject = Subject::Object {
            resource,
            key: key.clone(),
        };
        if changed {
            state.unmet.remove(&subject);
        }
        self.judge_subject(&mut state, &subject, uid, object);
        self.pending_gauge.set(gauge_value(&state));
    }

    /// A claim as the cluster shows it (`object` makes its JSON, only when
    /// needed): judges what waits for it, and a bind by someone else this
    /// process did not decide.
    pub(crate) fn observed_claim<'a>(
        &self,
        key: &ObjectKey,
        uid: &str,
        volume: Option<&str>,
        object: impl FnOnce() -> View<'a>,
    ) {
        let waiting = self.waits_for("persistentvolumeclaims", key);
        let first_bound = {
            let mut state = self.lock();
            match volume {
                None => {
                    state.unbound.insert(uid.to_string());
                    None
                }
                Some(volume) => {
                    state.reserved.remove(uid);
                    let was_unbound = state.unbound.remove(uid);
                    let judged_lately = state
                        .judged
                        .get(uid)
                        .is_some_and(|at| at.elapsed() < self.window);
                    (was_unbound && !waiting && !judged_lately).then(|| volume.to_string())
                }
            }
        };
        if waiting {
            self.observed("persistentvolumeclaims", key, Some(uid), Some(&object()));
        }
        if let Some(volume) = first_bound {
            let mut state = self.lock();
            state.their_binds.push(TheirBind {
                seen: Instant::now(),
                key: key.clone(),
                uid: uid.to_string(),
                volume,
            });
            self.pending_gauge.set(gauge_value(&state));
        }
    }

    /// A claim the other controller bound to `volume` before this one
    /// decided: agree when this one would have bound it to the same or an
    /// equivalent volume.
    fn judge_their_bind(&self, key: &ObjectKey, uid: &str, volume: &str) {
        let Some(judge) = self.judge.get() else {
            return;
        };
        let Some(ours) = (judge.would_bind)(key, volume) else {
            return;
        };
        let agree = match &ours {
            Choice::Bind(ours) => ours == volume || (judge.equivalent)(key, ours, volume),
            Choice::Pending => false,
        };
        let mut state = self.lock();
        state.judged.insert(uid.to_string(), Instant::now());
        let ours = match ours {
            Choice::Bind(v) => format!("bind to volume {v}"),
            Choice::Pending => "leave the claim Pending".to_string(),
        };
        let verdict = if agree {
            Verdict::Agree
        } else {
            Verdict::Differ(format!("bound to volume {volume}"))
        };
        let subject = Subject::Object {
            resource: "persistentvolumeclaims",
            key: key.clone(),
        };
        self.count(
            &mut state,
            k8s_names::PERSISTENTVOLUME_BINDER_CONTROLLER,
            "bind",
            &subject,
            &ours,
            verdict,
        );
    }

    /// Judges the decisions waiting on `subject` against `object` (of
    /// `uid`): a decision about another incarnation of the name sees its
    /// object gone.
    fn judge_subject(
        &self,
        state: &mut State,
        subject: &Subject,
        uid: Option<&str>,
        object: Option<&View<'_>>,
    ) {
        let Some(list) = state.pending.remove(subject) else {
            return;
        };
        let mut open = Vec::new();
        for mut pending in list {
            let other = uid.is_some()
                && pending.decision.uid.is_some()
                && pending.decision.uid.as_deref() != uid;
            let seen = if other { None } else { object };
            match verdict::verdict(&pending.decision, seen, self.judge.get()) {
                Verdict::Open(seen) => {
                    pending.seen = Some(seen);
                    open.push(pending);
                }
                verdict => self.resolve(state, pending, verdict),
            }
        }
        if !open.is_empty() {
            state.pending.insert(subject.clone(), open);
        }
    }

    /// Counts a decision judged, reports a difference.
    fn resolve(&self, state: &mut State, pending: Pending, verdict: Verdict) {
        if pending.decision.kind == "bind"
            && let Some(uid) = &pending.decision.uid
        {
            // A bind the cluster did not carry out keeps its volume reserved
            // until the claim is bound or gone: let go, the volume would
            // go to the next claim, and one difference become many.
            if !matches!(verdict, Verdict::Differ(_)) || !state.unbound.contains(uid) {
                state.reserved.remove(uid);
            }
            state.judged.insert(uid.clone(), Instant::now());
        }
        let Pending {
            controller,
            decision,
            ..
        } = pending;
        self.count(
            state,
            controller,
            decision.kind,
            &decision.subject,
            &decision.ours,
            verdict,
        );
    }

    fn count(
        &self,
        state: &mut State,
        controller: &'static str,
        kind: &'static str,
        subject: &Subject,
        ours: &str,
        verdict: Verdict,
    ) {
        let entry = state.counts.entry((controller, kind)).or_default();
        match verdict {
            Verdict::Agree => {
                entry.0 += 1;
                self.decisions
                    .with_label_values(&[controller, kind, "agree"])
                    .inc();
            }
            Verdict::Differ(upstream) | Verdict::Open(upstream) => {
                entry.1 += 1;
                self.decisions
                    .with_label_values(&[controller, kind, "differ"])
                    .inc();
                let object = subject.describe();
                tracing::warn!(controller, kind, %object, ours, upstream = %upstream, "shadow: the cluster decided otherwise");
                if state.differences.len() == KEPT_DIFFERENCES {
                    state.differences.pop_front();
                }
                state.differences.push_back(Difference {
                    controller,
                    kind,
                    object,
                    ours: ours.to_string(),
                    upstream,
                    at: crate::runtime::ambient::now().to_string(),
                });
            }
        }
    }

    /// Judges every decision older than the window as a difference (the
    /// cluster did not come to it), and forgets old memories.
    pub(crate) fn sweep(&self) {
        let due: Vec<TheirBind> = {
            let mut state = self.lock();
            let (due, waiting) = std::mem::take(&mut state.their_binds)
                .into_iter()
                .partition(|bind| bind.seen.elapsed() >= THEIR_BIND_WAIT);
            state.their_binds = waiting;
            due
        };
        for bind in due {
            self.judge_their_bind(&bind.key, &bind.uid, &bind.volume);
        }
        let mut state = self.lock();
        let window = self.window;
        let subjects: Vec<Subject> = state.pending.keys().cloned().collect();
        for subject in subjects {
            let Some(list) = state.pending.remove(&subject) else {
                continue;
            };
            let (expired, open): (Vec<Pending>, Vec<Pending>) =
                list.into_iter().partition(|p| p.since.elapsed() >= window);
            for pending in expired {
                let seen = match &pending.seen {
                    Some(seen) => format!("{seen} after {}s", window.as_secs()),
                    None => format!("nothing within {}s", window.as_secs()),
                };
                state
                    .unmet
                    .entry(subject.clone())
                    .or_default()
                    .push((pending.decision.kind, pending.decision.expected.clone()));
                self.resolve(&mut state, pending, Verdict::Differ(seen));
            }
            if !open.is_empty() {
                state.pending.insert(subject, open);
            }
        }
        state.judged.retain(|_, at| at.elapsed() < window);
        self.pending_gauge.set(gauge_value(&state));
    }

    /// Sweeps every quarter window until dropped.
    pub(crate) async fn sweep_periodically(self: Arc<Self>) {
        let mut every = tokio::time::interval((self.window / 4).max(Duration::from_millis(100)));
        loop {
            every.tick().await;
            self.sweep();
        }
    }
}

fn gauge_value(state: &State) -> i64 {
    let waiting = state.pending.values().map(Vec::len).sum::<usize>() + state.their_binds.len();
    i64::try_from(waiting).unwrap_or(i64::MAX)
}

#[cfg(test)]
pub(crate) mod tests;
