//! The controllers of the binary: their names in `--controllers`
//! (kube-controller-manager's, with its aliases), the API each needs, and
//! how the process builds each on its shared parts.

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
    let (controller, workload) = pv::controller_base::build(shared, &config.persistentvolume)?;
    built.persistentvolume = Some(controller);
    Ok(workload)
}

fn build_ephemeral(
    shared: &mut Shared,
    config: &AppConfig,
    built: &mut Controllers,
) -> Result<Workload, BuildError> {
    let (controller, workload) = ephemeral::controller_base::build(shared, &config.ephemeral)?;
    built.ephemeral = Some(controller);
    Ok(workload)
}

fn build_resourceclaim(
    shared: &mut Shared,
    config: &AppConfig,
    built: &mut Controllers,
) -> Result<Workload, BuildError> {
    let (controller, workload) =
        resourceclaim::controller_base::build(shared, &config.resourceclaim)?;
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

/// Builds the controllers `config` enables, in [`ENTRIES`] order.
pub(super) async fn build(
    shared: &mut Shared,
    config: &AppConfig,
) -> Result<(Controllers, Vec<Workload>), AppError> {
    config.controllers.validate(&known())?;
    let mut built = Controllers::default();
    let mut workloads = Vec::new();
    let mut enabled = 0;
    for entry in &ENTRIES {
        let name = entry.names.name;
        if !config.controllers.is_enabled(&entry.names) {
            tracing::info!(controller = name, "controller disabled by --controllers");
            continue;
        }
        enabled += 1;
        if let Some((group_version, resource)) = entry.requires
            && !served(&shared.client, group_version, resource).await
        {
            tracing::warn!(
                controller = name,
                api = %format!("{group_version} {resource}"),
                "the API server does not serve the controller's API; it does not run"
            );
            continue;
        }
        let workload =
            (entry.build)(shared, config, &mut built).map_err(|source| AppError::Build {
                controller: name,
                source,
            })?;
        tracing::info!(controller = name, "controller enabled");
        workloads.push(workload);
    }
    if enabled == 0 {
        return Err(AppError::NoController);
    }
    Ok((built, workloads))
}

/// Whether the API server serves `resource` in `group_version`. When
/// discovery itself fails, the controller is built anyway: its watches are
/// supervised as every controller's.
async fn served(client: &Client, group_version: &str, resource: &str) -> bool {
    match client.list_api_group_resources(group_version).await {
        Ok(list) => list.resources.iter().any(|r| r.name == resource),
        // A real apiserver answers a group version it lacks with a
        // plain-text 404, which the client reads as a status without reason.
        Err(kube::Error::Api(status)) if status.code == 404 => false,
        Err(error) => {
            tracing::warn!(%error, api = group_version, "API discovery failed; starting the controller anyway");
            true
        }
    }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;
    use std::time::Duration;

    use http::{Request, Response};
    use kube::client::ClientBuilder;

    use crate::app::{App, AppConfig, ControllerSelection};
    use crate::runtime::client::{ClientOptions, Clients};

    /// An API server that serves nothing: every request is a 404.
    fn empty_server() -> ClientBuilder<
        impl tower::Service<
            Request<kube::client::Body>,
            Response = Response<kube::client::Body>,
            Error = Infallible,
            Future = impl Send,
        > + Clone
        + Send
        + 'static,
    > {
        let service = tower::service_fn(|_request: Request<kube::client::Body>| async {
            let status = serde_json::json!({
                "kind": "Status", "apiVersion": "v1", "status": "Failure",
                "reason": "NotFound", "code": 404,
                "message": "the server could not find the requested resource",
            });
            Ok::<_, Infallible>(
                Response::builder()
                    .status(404)
                    .header("content-type", "application/json")
                    .body(kube::client::Body::from(status.to_string().into_bytes()))
                    .expect("response"),
            )
        });
        ClientBuilder::new(service, "default")
    }

    #[tokio::test(start_paused = true)]
    async fn without_its_api_the_resourceclaim_controller_does_not_run() {
        let clients = Clients::build(
            empty_server(),
            empty_server(),
            empty_server(),
            ClientOptions::default(),
        );
        let config = AppConfig {
            controllers: ControllerSelection::new(["resourceclaim-controller"]),
            ..AppConfig::default()
        };
        let app = App::start(clients, config)
            .await
            .expect("the process starts");
        assert!(app.controllers().resourceclaim.is_none());
        let idle = app.idle_probe();
        let result = app.run(tokio::time::sleep(Duration::from_secs(600))).await;
        assert!(result.is_ok(), "no failing watch stops it: {result:?}");
        assert!(idle.is_idle());
    }
}
