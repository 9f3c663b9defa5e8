//! The wiring of the ResourceClaim controller: what it asks of the
//! process's informers (pods filed by the ResourceClaims they name,
//! templates, and claims kept in its claim cache), its handlers, and its
//! workload: one queue of pod and claim keys and its workers. Decisions
//! live in [`crate::resourceclaim::controller`].

mod handlers;

use std::sync::Arc;

use k8s_openapi::api::resource::v1::ResourceClaim;

use super::claims::ClaimCache;
use super::constants::{COMPONENT, DELETED_PODS_REMEMBERED, NAME};
use super::controller::triage::{named_claims, named_templates};
use super::controller::{Controller, Known, Parts};
use super::deleted::DeletedPods;
use super::error::SyncError;
use super::features::Features;
use super::keys::WorkKey;
use super::metrics::ClaimMetrics;
use crate::kinds::{POD, RESOURCE_CLAIM, RESOURCE_CLAIM_TEMPLATE};
use crate::runtime::informer::Store;
use crate::runtime::queue::WorkQueue;
use crate::runtime::shared::{BuildError, Shared};
use crate::runtime::workload::{Outcome, Pool, Workload};
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

/// Builds the controller on the process's parts and returns its workload.
pub(crate) fn build(
    shared: &mut Shared,
    config: &Config,
) -> Result<(Arc<Controller>, Workload), BuildError> {
    let claims = Arc::new(ClaimCache::default());
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
    let controller = Arc::new(Controller::new(Parts::new(
        known,
        shared
            .writes
            .writer(NAME, informers.store(&RESOURCE_CLAIM)?),
        shared.writes.writer(NAME, informers.store(&POD)?),
        shared.client.clone(),
        shared.recorder.for_component(COMPONENT),
        claim_metrics,
        shared.journal.clone(),
    )));
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
    let syncing = Arc::clone(&controller);
    workload.pool(Pool::new(
        handlers.queue,
        config.workers,
        |key| match key {
            WorkKey::Pod(_) => "pod",
            WorkKey::ResourceClaim(_) => "resourceclaim",
        },
        move |key: WorkKey, _| {
            let controller = Arc::clone(&syncing);
            async move {
                controller.sync(&key).await?;
                Ok::<_, SyncError>(Outcome::Synced)
            }
        },
    ));
    Ok((controller, workload))
}
