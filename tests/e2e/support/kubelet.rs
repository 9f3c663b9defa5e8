//! The kubelet's part for recycler pods, played by the test on a cluster
//! without nodes: a pod "runs" when the test sets its phase. On a cluster
//! with nodes the real kubelet runs the pod and the test only watches.

use anyhow::Context as _;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{Patch, PatchParams};

use super::case::{Case, show, strip_finalizers};
use super::wait;

/// The finalizer that keeps a recycler pod around after its deletion, as
/// a node that is gone would.
pub(crate) const LINGER: &str = "e2e.pv-controller.k8s.io/linger";

fn pods(case: &Case) -> Api<Pod> {
    Api::namespaced(case.client(), "default")
}

/// Waits for the recycler pod of `volume` that is not `other` (a pod UID)
/// and not being deleted: the controller's pod for the current release.
pub(crate) async fn recycler_pod(
    case: &Case,
    volume: &str,
    other: Option<&str>,
) -> anyhow::Result<Pod> {
    let name = format!("recycler-for-{volume}");
    let pods = pods(case);
    wait::until(&format!("recycler pod {name}"), || async {
        Ok(match pods.get_opt(&name).await? {
            Some(pod)
                if pod.metadata.uid.as_deref() != other
                    && pod.metadata.deletion_timestamp.is_none() =>
            {
                Ok(pod)
            }
            Some(pod) => Err(show(&pod)),
            None => Err("no pod".to_string()),
        })
    })
    .await
}

/// Lets the pod finish successfully: the test sets phase Succeeded where
/// no kubelet runs, the real kubelet does it elsewhere.
pub(crate) async fn succeed(case: &Case, pod: &Pod) -> anyhow::Result<()> {
    if !case.env.plays_kubelet {
        return Ok(());
    }
    let name = pod.metadata.name.clone().unwrap_or_default();
    let patch = serde_json::json!({"status": {"phase": "Succeeded"}});
    pods(case)
        .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .with_context(|| format!("finishing pod {name}"))?;
    Ok(())
}

/// Makes the pod linger once deleted (a finalizer), as a pod whose node is
/// gone does.
pub(crate) async fn hold(case: &Case, pod: &Pod) -> anyhow::Result<()> {
    let name = pod.metadata.name.clone().unwrap_or_default();
    let patch = serde_json::json!({"metadata": {"finalizers": [LINGER]}});
    pods(case)
        .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .with_context(|| format!("holding pod {name}"))?;
    Ok(())
}

/// Lets a held pod go.
pub(crate) async fn release(case: &Case, name: &str) -> anyhow::Result<()> {
    strip_finalizers(&pods(case), name).await
}

/// The pod of that name, if any.
pub(crate) async fn pod(case: &Case, name: &str) -> anyhow::Result<Option<Pod>> {
    Ok(pods(case).get_opt(name).await?)
}
