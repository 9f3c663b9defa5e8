//! Removing what a case left behind, on any cluster: objects are deleted
//! and their finalizers stripped (a controller-less cluster never removes
//! the protection finalizers), and the namespace is finalized when no
//! namespace controller does it.

use std::time::{Duration, Instant};

use anyhow::Context as _;
use k8s_openapi::api::core::v1::{Event, Namespace, Pod};
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::{Api, Resource};
use serde::de::DeserializeOwned;

use super::case::{Case, strip_finalizers};
use super::{CASE_LABEL, PATIENCE, wait};

/// How long the events about the case's objects must stay unchanged
/// before they and the namespace go. The controller writes events in the
/// background, seconds late when its client is busy; one written into a
/// terminating namespace is refused with 403, which the run counts as a
/// failure, and one written after the clean-up would be left behind.
const QUIET: Duration = Duration::from_secs(3);

/// Removes the case's objects and namespace; fails when something stays.
pub(crate) async fn case(case: &Case) -> anyhow::Result<()> {
    let labelled = ListParams::default().labels(&format!("{CASE_LABEL}={}", case.namespace));
    let mut problems = Vec::new();
    for claim in case.claims().list(&ListParams::default()).await? {
        note(
            &mut problems,
            remove(&case.claims(), &name_of(&claim)).await,
        );
    }
    note(&mut problems, claims_gone(case).await);
    for volume in case.volumes().list(&labelled).await? {
        note(
            &mut problems,
            remove(&case.volumes(), &name_of(&volume)).await,
        );
    }
    for class in case.classes().list(&labelled).await? {
        note(
            &mut problems,
            remove(&case.classes(), &name_of(&class)).await,
        );
    }
    let pods: Api<Pod> = Api::namespaced(case.client(), "default");
    let recycler_prefix = format!("recycler-for-{}-", case.namespace);
    for pod in pods.list(&ListParams::default()).await? {
        if name_of(&pod).starts_with(&recycler_prefix) {
            note(&mut problems, remove(&pods, &name_of(&pod)).await);
        }
    }
    note(&mut problems, events(case, &recycler_prefix).await);
    note(&mut problems, namespace(case).await);
    note(&mut problems, nothing_left(case, &labelled).await);
    match problems.is_empty() {
        true => Ok(()),
        false => anyhow::bail!("clean-up of {}: {}", case.namespace, problems.join("; ")),
    }
}

/// Waits until the case's claims are gone, so that no sync of the
/// controller finds one any more.
async fn claims_gone(case: &Case) -> anyhow::Result<()> {
    wait::until("the case's claims are gone", || async {
        let left = case
            .claims()
            .list(&ListParams::default())
            .await?
            .items
            .len();
        Ok(if left == 0 {
            Ok(())
        } else {
            Err(format!("{left} claims"))
        })
    })
    .await
}

/// Once they are quiet, deletes the events about the case's volumes and
/// recycler pods (in `default`) and those in the case's namespace.
async fn events(case: &Case, recycler_prefix: &str) -> anyhow::Result<()> {
    let prefix = format!("{}-", case.namespace);
    let ours = |event: &Event| {
        let about = event.involved_object.name.as_deref().unwrap_or_default();
        about.starts_with(&prefix) || about.starts_with(recycler_prefix)
    };
    let shared: Api<Event> = Api::namespaced(case.client(), "default");
    let own: Api<Event> = Api::namespaced(case.client(), &case.namespace);
    let started = Instant::now();
    let mut last = Vec::new();
    let mut since = Instant::now();
    while since.elapsed() < QUIET {
        anyhow::ensure!(
            started.elapsed() < PATIENCE,
            "events still written after {PATIENCE:?}"
        );
        let mut seen: Vec<(bool, String, String)> = shared
            .list(&ListParams::default())
            .await?
            .items
            .into_iter()
            .filter(|e| ours(e))
            .map(|e| (false, e))
            .chain(
                own.list(&ListParams::default())
                    .await?
                    .items
                    .into_iter()
                    .map(|e| (true, e)),
            )
            .map(|(in_own, e)| {
                (
                    in_own,
                    name_of(&e),
                    e.metadata.resource_version.unwrap_or_default(),
                )
            })
            .collect();
        seen.sort();
        if seen != last {
            last = seen;
            since = Instant::now();
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    for (in_own, name, _) in last {
        remove(if in_own { &own } else { &shared }, &name).await?;
    }
    Ok(())
}

fn note(problems: &mut Vec<String>, result: anyhow::Result<()>) {
    if let Err(error) = result {
        problems.push(format!("{error:#}"));
    }
}

fn name_of<K: Resource>(object: &K) -> String {
    object.meta().name.clone().unwrap_or_default()
}

/// Deletes an object at once and strips its finalizers; gone already is fine.
async fn remove<K>(api: &Api<K>, name: &str) -> anyhow::Result<()>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    match api
        .delete(name, &DeleteParams::default().grace_period(0))
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.is_not_found() => return Ok(()),
        Err(error) => return Err(error).with_context(|| format!("deleting {name}")),
    }
    strip_finalizers(api, name).await
}

/// Deletes the namespace, and finalizes it when no namespace controller
/// takes it up (one that does reports conditions on it within moments).
async fn namespace(case: &Case) -> anyhow::Result<()> {
    let namespaces: Api<Namespace> = Api::all(case.client());
    let name = &case.namespace;
    namespaces
        .delete(name, &DeleteParams::default())
        .await
        .with_context(|| format!("deleting namespace {name}"))?;
    let started = Instant::now();
    loop {
        let Some(mut left) = namespaces.get_opt(name).await? else {
            return Ok(());
        };
        let handled = left
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| !c.is_empty());
        if !handled && started.elapsed() > Duration::from_secs(3) {
            left.spec.get_or_insert_with(Default::default).finalizers = Some(Vec::new());
            namespaces
                .replace_subresource("finalize", name, &PostParams::default(), &left)
                .await
                .with_context(|| format!("finalizing namespace {name}"))?;
            return Ok(());
        }
        if started.elapsed() > PATIENCE {
            anyhow::bail!("namespace {name} still there after {PATIENCE:?}");
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Fails unless the case's volumes, classes and namespace are gone.
async fn nothing_left(case: &Case, labelled: &ListParams) -> anyhow::Result<()> {
    let namespaces: Api<Namespace> = Api::all(case.client());
    wait::until("the case's objects are gone", || async {
        let volumes = case.volumes().list(labelled).await?.items.len();
        let classes = case.classes().list(labelled).await?.items.len();
        let namespace = namespaces.get_opt(&case.namespace).await?.is_some();
        Ok(match (volumes, classes, namespace) {
            (0, 0, false) => Ok(()),
            _ => Err(format!(
                "{volumes} volumes, {classes} classes, namespace left: {namespace}"
            )),
        })
    })
    .await
}
