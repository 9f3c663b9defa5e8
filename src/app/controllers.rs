//! The controllers of the binary: their names in `--controllers`
//! (kube-controller-manager's, with its aliases), the API each needs, and
//! how the process builds each on its shared parts.

use crate::runtime::api_message::ApiMessage;
use std::sync::Arc;

use kube::Client;

use super::{AppConfig, AppError, ControllerNames};
use crate::runtime::shared::{BuildError, Shared};
use crate::runtime::workload::Workload;
use crate::{ephemeral, pv, resourceclaim};

/// The controllers that run in the process, for callers that sync objects
/// themselves (tests, benchmarks); `None` for one that does not run.
#[derive(Clone, Debug, Default)]
pub struct Controllers {
    /// The PersistentVolume controller.
    pub persistentvolume: Option<Arc<pv::Controller>>,
    /// The ephemeral volume controller.
    pub ephemeral: Option<Arc<ephemeral::Controller>>,
    /// The ResourceClaim controller.
    pub resourceclaim: Option<Arc<resourceclaim::Controller>>,
}

/// How the process builds one controller: its workload for the runner, the
/// controller itself into [`Controllers`].
type Build = fn(&mut Shared, &AppConfig, &mut Controllers) -> Result<Workload, BuildError>;

/// One controller of the binary.
struct Entry {
    names: ControllerNames,
    /// The API (group/version, resource) it needs; without it the process
    /// runs without this controller.
    requires: Option<(&'static str, &'static str)>,
    build: Build,
}

fn build_persistentvolume(
    shared: &mut Shared,
    config: &AppConfig,
    built: &mut Controllers,
) -> Result<Workload, BuildError> {
    let (controller, workload) = pv::build(shared, &config.persistentvolume)?;
    let classes = shared.informers.mem_store(&crate::kinds::STORAGE_CLASS)?;
    shared.metrics.register(Box::new(pv::ConsumerWait::new(
        Arc::clone(controller.store()),
        classes,
    )?))?;
    // In shadow mode kube-controller-manager binds by design.
    if shared.shadow.is_none() {
        let recorder = shared.recorder.for_component(pv::CONTROLLER_NAME);
        pv::OtherBinder::watch(shared, recorder)?;
    }
    built.persistentvolume = Some(controller);
    Ok(workload)
}

fn build_ephemeral(
    shared: &mut Shared,
    config: &AppConfig,
    built: &mut Controllers,
) -> Result<Workload, BuildError> {
    let (controller, workload) = ephemeral::build(shared, &config.ephemeral)?;
    built.ephemeral = Some(controller);
    Ok(workload)
}

fn build_resourceclaim(
    shared: &mut Shared,
    config: &AppConfig,
    built: &mut Controllers,
) -> Result<Workload, BuildError> {
    let (controller, workload) = resourceclaim::build(shared, &config.resourceclaim)?;
    built.resourceclaim = Some(controller);
    Ok(workload)
}

/// Every controller of the binary, in build order: the PersistentVolume
/// controller first, as it brings the store of claims the ephemeral volume
/// controller reads.
const ENTRIES: [Entry; 3] = [
    Entry {
        names: ControllerNames {
            name: pv::NAME,
            aliases: &["persistentvolume-binder"],
        },
        requires: None,
        build: build_persistentvolume,
    },
    Entry {
        names: ControllerNames {
            name: ephemeral::NAME,
            aliases: &["ephemeral-volume"],
        },
        requires: None,
        build: build_ephemeral,
    },
    Entry {
        names: ControllerNames {
            name: resourceclaim::NAME,
            aliases: &["resource-claim-controller"],
        },
        requires: Some(resourceclaim::REQUIRED_API),
        build: build_resourceclaim,
    },
];

/// The names of every controller of the binary.
pub(crate) fn known() -> [ControllerNames; 3] {
    ENTRIES.map(|entry| entry.names)
}

/// An API an enabled controller needs, and whether the API server served
/// it when the process was built (the controller runs only if so).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct RequiredApi {
    /// The controller's name.
    pub(crate) controller: &'static str,
    /// Its group/version, e.g. `resource.k8s.io/v1`.
    pub(crate) group_version: &'static str,
    /// The resource it needs there.
    pub(crate) resource: &'static str,
    /// Whether discovery showed it (or could not tell) at build time.
    pub(crate) served: bool,
}

/// What [`build`] made: the controllers, their workloads, and the APIs the
/// enabled controllers need.
pub(super) struct Built {
    pub(super) controllers: Controllers,
    pub(super) workloads: Vec<Workload>,
    pub(super) apis: Vec<RequiredApi>,
}

/// Builds the controllers `config` enables, in [`ENTRIES`] order; a
/// controller whose API is not served is left out (and said so in
/// `pv_controller_controller_running`).
pub(super) async fn build(shared: &mut Shared, config: &AppConfig) -> Result<Built, AppError> {
    config.controllers.validate(&known())?;
    let mut built = Controllers::default();
    let mut workloads = Vec::new();
    let mut apis = Vec::new();
    let mut enabled = 0;
    for entry in &ENTRIES {
        let name = entry.names.name;
        if !config.controllers.is_enabled(&entry.names) {
            tracing::info!(controller = name, "controller disabled by --controllers");
            continue;
        }
        enabled += 1;
        if let Some((group_version, resource)) = entry.requires {
            let served = served(&shared.client, group_version, resource).await;
            apis.push(RequiredApi {
                controller: name,
                group_version,
                resource,
                served,
            });
            if !served {
                tracing::warn!(
                    controller = name,
                    api = %format!("{group_version} {resource}"),
                    "the API server does not serve the controller's API; it does not run until it does"
                );
                shared.metrics.set_controller_running(name, false);
                continue;
            }
        }
        let workload =
            (entry.build)(shared, config, &mut built).map_err(|source| AppError::Build {
                controller: name,
                source,
            })?;
        tracing::info!(controller = name, "controller enabled");
        shared.metrics.set_controller_running(name, true);
        workloads.push(workload);
    }
    if enabled == 0 {
        return Err(AppError::NoController);
    }
    Ok(Built {
        controllers: built,
        workloads,
        apis,
    })
}

/// Whether the API server serves `resource` in `group_version`. When
/// discovery itself fails, the controller is built anyway: its watches are
/// supervised as every controller's.
async fn served(client: &Client, group_version: &str, resource: &str) -> bool {
    discover(client, group_version, resource)
        .await
        .unwrap_or_else(|error| {
            tracing::warn!(error = %ApiMessage(&error), api = group_version, "API discovery failed; starting the controller anyway");
            true
        })
}

/// Whether discovery shows `resource` in `group_version`; the client's
/// error when discovery itself fails.
pub(super) async fn discover(
    client: &Client,
    group_version: &str,
    resource: &str,
) -> Result<bool, kube::Error> {
    match client.list_api_group_resources(group_version).await {
        Ok(list) => Ok(list.resources.iter().any(|r| r.name == resource)),
        // A real apiserver answers a group version it lacks with a
        // plain-text 404, which the client reads as a status without reason.
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(false),
        Err(error) => Err(error),
    }
}

#[cfg(test)]
mod tests;
