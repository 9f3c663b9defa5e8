//! The wiring of the ResourceClaim controller: what it asks of the
//! process's informers (pods filed by the ResourceClaims they name,
//! templates, and claims kept in its claim store), its handlers, and its
//! workload: one queue of pod and claim keys and its workers. Decisions
//! live in [`crate::resourceclaim::controller`].

mod handlers;

use std::sync::Arc;

use k8s_openapi::api::resource::v1::ResourceClaim;

use super::claims::ClaimStore;
use super::constants::{COMPONENT, DELETED_PODS_REMEMBERED, NAME};
use super::controller::triage::{named_claims, named_templates};
use super::controller::{Counted, Known};
use super::deleted::DeletedPods;
use super::features::Features;
use super::keys::WorkKey;
use super::metrics::ClaimMetrics;
use crate::kinds::{POD, RESOURCE_CLAIM, RESOURCE_CLAIM_TEMPLATE};
use crate::runtime::executor::{Effects, Executor, Parts};
use crate::runtime::informer::Store;
use crate::runtime::queue::WorkQueue;
use crate::runtime::shared::{BuildError, Shared};
#[cfg(feature = "testing")]
use crate::runtime::workload::{Ended, turn};
use crate::runtime::workload::{Pool, Workload};
use crate::runtime::write::WriterSet;
use handlers::Handlers;

/// The name of the pod index by the ResourceClaims a pod names (upstream's
/// `podResourceClaimIndex`).
pub(crate) const PODS_BY_RESOURCE_CLAIM: &str = "pods-by-resourceclaim";

/// The name of the pod index by the ResourceClaimTemplates a pod's entries
/// name (upstream's `podResourceClaimTemplateIndex`).
pub(crate) const PODS_BY_TEMPLATE: &str = "pods-by-resourceclaimtemplate";

/// The controller's own settings.
#[derive(Clone, Debug)]
pub struct Config {
    /// How many keys are synced at once (`--concurrent-resourceclaim-syncs`,
    /// at least one).
    pub workers: usize,
    /// Which requests of a template the cluster's features allow.
    pub features: Features,
}

/// Default of [`Config::workers`]: kube-controller-manager's count since
/// 1.34.
pub(crate) const DEFAULT_WORKERS: usize = 50;

impl Default for Config {
    fn default() -> Self {
        Self {
            workers: DEFAULT_WORKERS,
            features: Features::default(),
        }
    }
}

/// The ResourceClaim controller as the process and its tests hold it:
/// what it decides by and the executor of its plans.
pub struct Controller {
    #[cfg(feature = "testing")]
    known: Known,
    #[cfg(feature = "testing")]
    executor: Executor<Counted>,
}

impl std::fmt::Debug for Controller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Controller").finish_non_exhaustive()
    }
}

impl Controller {
    /// Decides about one pod or claim and carries the plan out, as the
    /// key's turn does (reading the pods a claim's decision asks for).
    #[cfg(feature = "testing")]
    pub async fn sync(&self, key: &WorkKey) -> Ended {
        turn(&self.executor, |reads| self.known.decide(key, reads)).await
    }

    /// Puts a claim into the claim store as a create's answer does,
    /// before (or without) its watch event: how a test stages a create
    /// whose watch event has not arrived.
    #[cfg(feature = "testing")]
    pub fn store_created(&self, claim: k8s_openapi::api::resource::v1::ResourceClaim) {
        self.known.claims.offer(Arc::new(claim));
    }
}

/// Counts the creates by outcome and admin access, as the plans reach
/// them.
struct Counter(ClaimMetrics);

impl Effects<Counted> for Counter {
    fn apply(&self, effect: &Counted) {
        match effect {
            Counted::Created {
                admin_access,
                pod,
                entry,
            } => {
                self.0.create_attempted(*admin_access, false);
                tracing::info!(%pod, %entry, "created ResourceClaim");
            }
            Counted::CreateFailed { admin_access } => {
                self.0.create_attempted(*admin_access, true);
            }
        }
    }
}

/// Builds the controller on the process's parts and returns its workload.
pub(crate) fn build(
    shared: &mut Shared,
    config: &Config,
) -> Result<(Arc<Controller>, Workload), BuildError> {
    let claims = Arc::new(ClaimStore::default());
    let informers = &mut shared.informers;
    informers.provide(
        &RESOURCE_CLAIM,
        Arc::clone(&claims) as Arc<dyn Store<ResourceClaim>>,
    )?;
    let pods = informers.index(&POD, PODS_BY_RESOURCE_CLAIM, named_claims)?;
    informers.index(&POD, PODS_BY_TEMPLATE, named_templates)?;
    let templates = informers.store(&RESOURCE_CLAIM_TEMPLATE)?;
    let deleted = Arc::new(DeletedPods::new(DELETED_PODS_REMEMBERED));
    let claim_metrics = ClaimMetrics::new(&shared.metrics, Arc::clone(&claims))?;
    let known = Known {
        pods: Arc::clone(&pods),
        templates,
        claims: Arc::clone(&claims),
        deleted: Arc::clone(&deleted),
        features: config.features,
    };
    let writers = WriterSet::default()
        .with(
            shared
                .writes
                .writer(NAME, informers.store(&RESOURCE_CLAIM)?),
        )
        .with(shared.writes.writer(NAME, informers.store(&POD)?));
    let executor = Executor::new(Parts {
        controller: NAME,
        writers,
        recorder: shared.recorder.for_component(COMPONENT),
        effects: Arc::new(Counter(claim_metrics)),
        reserver: None,
        operations: None,
        shadow: shared.shadow.clone(),
    });
    let handlers = Handlers {
        pods,
        claims,
        deleted,
        queue: WorkQueue::new(),
        leading: shared.leading.clone(),
    };
    let (on_pods, on_claims, on_templates, on_lead) = (
        handlers.clone(),
        handlers.clone(),
        handlers.clone(),
        handlers.clone(),
    );
    informers.on(&POD, move |change| on_pods.on_pod(change))?;
    informers.on(&RESOURCE_CLAIM, move |change| on_claims.on_claim(change))?;
    informers.on(&RESOURCE_CLAIM_TEMPLATE, move |change| {
        on_templates.on_template(change);
    })?;
    let mut workload = Workload::new(NAME);
    workload.on_lead(move || on_lead.enqueue_all());
    let deciding = known.clone();
    workload.pool(Pool::new(
        handlers.queue,
        config.workers,
        |key| match key {
            WorkKey::Pod(_) => "pod",
            WorkKey::ResourceClaim(_) => "resourceclaim",
        },
        move |key, reads| deciding.decide(key, reads),
        executor.clone(),
    ));
    let controller = Arc::new(Controller {
        #[cfg(feature = "testing")]
        known,
        #[cfg(feature = "testing")]
        executor,
    });
    Ok((controller, workload))
}
