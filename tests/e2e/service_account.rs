//! Every request of the controller is made as `deploy/`'s ServiceAccount,
//! and `deploy/`'s RBAC allows every one of them: run after the other
//! cases, this checks each replica's `pv_controller_api_requests_total`
//! for a single 403, and that the controller's kubeconfig does
//! impersonate (a request the account may not make is refused).

use std::sync::Arc;

use anyhow::{Context as _, ensure};
use k8s_openapi::api::core::v1::{PersistentVolume, Secret};
use kube::Api;
use kube::api::ListParams;

use crate::support::{Case, admin_client, metrics};

/// The impersonation is real, and no replica was refused anything.
pub(crate) async fn impersonated(case: Arc<Case>) -> anyhow::Result<()> {
    let env = &case.env;
    let (as_controller, _) = admin_client(&env.controller_kubeconfig).await?;
    let (namespace, name) = &env.service_account;
    let secrets: Api<Secret> = Api::namespaced(as_controller.clone(), namespace);
    match secrets.list(&ListParams::default()).await {
        Err(kube::Error::Api(status)) if status.code == 403 => {
            let user = format!("system:serviceaccount:{namespace}:{name}");
            ensure!(
                status.message.contains(&user),
                "refused as {user}: {}",
                status.message
            );
        }
        other => anyhow::bail!("listing secrets as the controller should be refused: {other:?}"),
    }
    Api::<PersistentVolume>::all(as_controller)
        .list(&ListParams::default().limit(1))
        .await
        .context("listing volumes as the controller")?;

    let names = env.pool.names();
    ensure!(names.len() >= 2, "replicas left: {names:?}");
    for replica in names {
        let address = env
            .pool
            .metrics_of(&replica)
            .context("a replica's address")?;
        let samples = metrics::scrape(address).await?;
        let requests = "pv_controller_api_requests_total";
        ensure!(
            samples.value(requests, &[("code", "403")]) == 0.0
                && samples.value("pv_controller_events_total", &[("outcome", "rejected")]) == 0.0,
            "{replica} was refused: {}",
            samples.show(requests)
        );
        ensure!(
            samples.value(requests, &[("client", "controller"), ("code", "200")]) > 0.0
                && samples.value(requests, &[("client", "lease"), ("code", "200")]) > 0.0,
            "{replica} talked to the server: {}",
            samples.show(requests)
        );
    }
    Ok(())
}
