//! The guard against a second binder: another controller that binds the
//! volumes and claims this process binds, typically kube-controller-manager
//! whose `persistentvolume-binder` was not switched off, or was switched
//! back on when `kubeadm upgrade` wrote its static manifest again. Two
//! binders race for the same claims; nothing else would say so.
//!
//! Every watched version of a volume or a claim comes with its field
//! managers ([`crate::runtime::managers`]). When a version's phase differs
//! from the one the store holds, the newest writer changed it; if that
//! writer is not this controller (its field manager, the first word of
//! its `User-Agent`, `pv-controller`) and owns `status.phase`, another
//! binder runs. The process then says so: `pv_controller_other_binder_seen`
//! is 1 for [`WINDOW`] after the last such change, and a Warning event
//! (reason [`REASON`]) on the object and a log line name the other writer,
//! once per writer per [`WINDOW`]. A write of ours is never taken for
//! another's: its answer is stored before its watch event arrives (no
//! phase change left to see), or its event's newest writer is us. A
//! change made in the same second as one of ours is not judged (the
//! writers' times cannot tell them apart); another binder makes many.
//!
//! Not in shadow mode, where kube-controller-manager binds by design.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use prometheus::core::{Collector, Desc};
use prometheus::proto::MetricFamily;
use prometheus::{IntGauge, Opts};
use tokio::time::Instant;

use crate::kinds::{PERSISTENT_VOLUME, PERSISTENT_VOLUME_CLAIM};
use crate::runtime::client::USER_AGENT;
use crate::runtime::events::{EventRecorder, EventType, reference_of};
use crate::runtime::informer::StoreRef;
use crate::runtime::keys::ObjectKey;
use crate::runtime::managers::{FieldManager, Managed};
use crate::runtime::metrics::MetricsError;
use crate::runtime::shared::{BuildError, Shared};

/// How long the gauge stays at 1 after the last change by another binder,
/// and how long the warning about one writer waits before it is given
/// again.
pub(crate) const WINDOW: Duration = Duration::from_secs(600);

/// The reason of the Warning event.
pub(crate) const REASON: &str = "OtherBinder";

/// The field a binder owns once it changed a phase.
const PHASE: &str = "status.phase";

/// This controller's field manager: the first word of its `User-Agent`.
fn ours() -> &'static str {
    USER_AGENT.split('/').next().unwrap_or(USER_AGENT)
}

/// The writer, other than this controller, that changed the phase from
/// `before` (the stored version's; `None`: nothing stored, nothing to
/// compare) to `after`, by the object's field managers; `None` when the
/// phase did not change, when we wrote it, or when the newest writers
/// cannot be told apart from us.
pub(crate) fn other_phase_writer<'a>(
    before: Option<&str>,
    after: Option<&str>,
    managers: &'a [FieldManager],
) -> Option<&'a FieldManager> {
    let before = before?;
    if Some(before) == after {
        return None;
    }
    let newest = managers.iter().filter_map(|m| m.time.as_deref()).max()?;
    let writers: Vec<&FieldManager> = managers
        .iter()
        .filter(|m| m.time.as_deref() == Some(newest))
        .collect();
    if writers.iter().any(|m| m.manager == ours()) {
        return None;
    }
    writers.into_iter().find(|m| m.owns(PHASE))
}

/// What the guard remembers: when another binder was last seen, and when
/// each writer was last warned about.
#[derive(Default)]
struct Seen {
    last: Option<Instant>,
    warned: HashMap<String, Instant>,
}

/// The guard, subscribed to the field managers of volumes and claims.
pub(crate) struct OtherBinder {
    volumes: StoreRef<PersistentVolume>,
    claims: StoreRef<PersistentVolumeClaim>,
    recorder: EventRecorder,
    seen: Mutex<Seen>,
}

impl OtherBinder {
    /// Subscribes the guard to the process's volumes and claims, and
    /// exports its gauge.
    pub(crate) fn watch(shared: &mut Shared, recorder: EventRecorder) -> Result<(), BuildError> {
        let guard = Arc::new(Self {
            volumes: shared.informers.store(&PERSISTENT_VOLUME)?,
            claims: shared.informers.store(&PERSISTENT_VOLUME_CLAIM)?,
            recorder,
            seen: Mutex::default(),
        });
        shared
            .metrics
            .register(Box::new(SeenGauge::new(Arc::clone(&guard))?))?;
        let on_volumes = Arc::clone(&guard);
        shared.informers.on_managers(
            &PERSISTENT_VOLUME,
            move |managed: &Managed<'_, PersistentVolume>| {
                let stored = on_volumes.volumes.get(&ObjectKey::of(managed.object));
                let phase = |v: &PersistentVolume| v.status.as_ref()?.phase.clone();
                on_volumes.judge(
                    managed,
                    stored.as_deref().map(phase).as_ref(),
                    phase(managed.object),
                );
            },
        )?;
        shared.informers.on_managers(
            &PERSISTENT_VOLUME_CLAIM,
            move |managed: &Managed<'_, PersistentVolumeClaim>| {
                let stored = guard.claims.get(&ObjectKey::of(managed.object));
                let phase = |c: &PersistentVolumeClaim| c.status.as_ref()?.phase.clone();
                guard.judge(
                    managed,
                    stored.as_deref().map(phase).as_ref(),
                    phase(managed.object),
                );
            },
        )?;
        Ok(())
    }

    /// Judges one watched version whose stored version had phase `before`.
    fn judge<K>(
        &self,
        managed: &Managed<'_, K>,
        before: Option<&Option<String>>,
        after: Option<String>,
    ) where
        K: kube::Resource<DynamicType = ()>,
    {
        let before = before.map(|phase| phase.as_deref().unwrap_or(""));
        let Some(writer) = other_phase_writer(before, after.as_deref(), managed.managers) else {
            return;
        };
        let now = Instant::now();
        let warn = {
            let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
            seen.last = Some(now);
            let due = seen
                .warned
                .get(&writer.manager)
                .is_none_or(|at| now.duration_since(*at) >= WINDOW);
            if due {
                seen.warned.insert(writer.manager.clone(), now);
            }
            due
        };
        if !warn {
            return;
        }
        let reference = reference_of(managed.object);
        let kind = K::kind(&()).to_lowercase();
        let object = ObjectKey::of(managed.object);
        let from = before.unwrap_or_default();
        let to = after.unwrap_or_default();
        tracing::warn!(
            manager = %writer.manager,
            kind = %kind,
            object = %object,
            from,
            to,
            "another controller changes the phases of the volumes and claims this process binds: two binders run"
        );
        self.recorder.record(
            &reference,
            EventType::Warning,
            REASON,
            format!(
                "{} changed the phase of this {kind} from {from} to {to}: another PersistentVolume \
                 binder runs beside pv-controller; switch off kube-controller-manager's \
                 persistentvolume-binder (docs/troubleshooting.md#pvcontrollerotherbinder)",
                writer.manager
            ),
        );
    }

    /// Whether another binder was seen within [`WINDOW`].
    fn seen_lately(&self) -> bool {
        let seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        seen.last.is_some_and(|at| at.elapsed() < WINDOW)
    }
}

/// `pv_controller_other_binder_seen`, read at each scrape.
struct SeenGauge {
    guard: Arc<OtherBinder>,
    desc: Desc,
}

impl SeenGauge {
    fn new(guard: Arc<OtherBinder>) -> Result<Self, MetricsError> {
        let desc = Self::gauge(0).map_err(MetricsError::from)?.desc()[0].clone();
        Ok(Self { guard, desc })
    }

    fn gauge(value: i64) -> Result<IntGauge, prometheus::Error> {
        let gauge = IntGauge::with_opts(Opts::new(
            "pv_controller_other_binder_seen",
            "1 while another controller (another binder) changed the phase of a volume or claim in the last 10 minutes, else 0",
        ))?;
        gauge.set(value);
        Ok(gauge)
    }
}

impl Collector for SeenGauge {
    fn desc(&self) -> Vec<&Desc> {
        vec![&self.desc]
    }

    fn collect(&self) -> Vec<MetricFamily> {
        Self::gauge(i64::from(self.guard.seen_lately()))
            .map(|gauge| gauge.collect())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests;
