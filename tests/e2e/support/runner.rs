//! Runs the suite: sets the cluster up, starts the replicas, runs the
//! cases all at once (each in its own namespace, cleaned up whatever
//! happened), then the cases that look back on the whole run, stops the
//! replicas and reports.

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{Case, Env};

/// How long one case may take, clean-up apart.
const CASE_TIMEOUT: Duration = Duration::from_secs(300);

/// A case's body.
pub(crate) type Body = Box<
    dyn Fn(Arc<Case>) -> Pin<Box<dyn Future<Output = anyhow::Result<()>> + Send>> + Send + Sync,
>;

/// One case of the suite.
pub(crate) struct Entry {
    /// Its name.
    pub(crate) name: &'static str,
    body: Body,
    after_all: bool,
}

/// The cases.
pub(crate) type Suite = Vec<Entry>;

fn entry<F, Fut>(name: &'static str, body: F, after_all: bool) -> Entry
where
    F: Fn(Arc<Case>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = anyhow::Result<()>> + Send + 'static,
{
    Entry {
        name,
        body: Box::new(move |case| Box::pin(body(case))),
        after_all,
    }
}

/// A case that runs alongside the others.
pub(crate) fn case<F, Fut>(name: &'static str, body: F) -> Entry
where
    F: Fn(Arc<Case>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = anyhow::Result<()>> + Send + 'static,
{
    entry(name, body, false)
}

/// A case that runs once the others are done (it checks the whole run).
pub(crate) fn after_all<F, Fut>(name: &'static str, body: F) -> Entry
where
    F: Fn(Arc<Case>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = anyhow::Result<()>> + Send + 'static,
{
    entry(name, body, true)
}

/// How a case ended.
enum Outcome {
    Passed,
    Skipped(String),
    Failed(String),
}

/// Runs the cases whose names contain one of `filters` (all without
/// filters) against the cluster of `kubeconfig`.
pub(crate) fn run(kubeconfig: PathBuf, suite: Suite, filters: &[String]) -> ExitCode {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build();
    match runtime {
        Ok(runtime) => runtime.block_on(run_suite(kubeconfig, suite, filters)),
        Err(error) => {
            println!("e2e: no tokio runtime: {error}");
            ExitCode::FAILURE
        }
    }
}

async fn run_suite(kubeconfig: PathBuf, suite: Suite, filters: &[String]) -> ExitCode {
    let started = Instant::now();
    let env = match start(kubeconfig).await {
        Ok(env) => Arc::new(env),
        Err(error) => {
            println!("e2e: setting up failed: {error:#}");
            return ExitCode::FAILURE;
        }
    };
    let selected: Vec<Entry> = suite
        .into_iter()
        .filter(|e| filters.is_empty() || filters.iter().any(|f| e.name.contains(f.as_str())))
        .collect();
    let (last, first): (Vec<Entry>, Vec<Entry>) = selected.into_iter().partition(|e| e.after_all);
    let mut outcomes = run_together(&env, first, 1).await;
    let offset = outcomes.len() + 1;
    outcomes.extend(run_together(&env, last, offset).await);
    let stopped = stop(&env).await;
    report(&env, &outcomes, &stopped, started)
}

/// Sets the cluster up and starts two replicas.
async fn start(kubeconfig: PathBuf) -> anyhow::Result<Env> {
    let env = Env::setup(kubeconfig).await?;
    println!(
        "e2e: Kubernetes {} at {}, as {}/{} (impersonated), run {}, kubelet {}",
        env.server_version,
        env.server,
        env.service_account.0,
        env.service_account.1,
        env.run,
        if env.plays_kubelet {
            "played by the test"
        } else {
            "real"
        },
    );
    env.pool.spawn().await?;
    env.pool.spawn().await?;
    let leader = env.pool.wait_for_leader(&env.client).await?;
    println!(
        "e2e: replicas {:?} started, {leader} leads",
        env.pool.names()
    );
    Ok(env)
}

/// Runs the cases at once; numbers their namespaces from `first`.
async fn run_together(
    env: &Arc<Env>,
    cases: Vec<Entry>,
    first: usize,
) -> Vec<(&'static str, Outcome)> {
    let runs = cases.into_iter().enumerate().map(|(i, entry)| {
        let env = Arc::clone(env);
        async move {
            let started = Instant::now();
            let outcome = run_case(env, first + i, &entry).await;
            let took = started.elapsed().as_secs_f64();
            match &outcome {
                Outcome::Passed => println!("e2e: {} ... ok ({took:.1} s)", entry.name),
                Outcome::Skipped(why) => println!("e2e: {} ... skipped: {why}", entry.name),
                Outcome::Failed(why) => {
                    println!("e2e: {} ... FAILED ({took:.1} s)\n{why}\n", entry.name);
                }
            }
            (entry.name, outcome)
        }
    });
    futures::future::join_all(runs).await
}

/// One case in its own namespace, with its clean-up.
async fn run_case(env: Arc<Env>, index: usize, entry: &Entry) -> Outcome {
    let case = match Case::new(env, index).await {
        Ok(case) => Arc::new(case),
        Err(error) => return Outcome::Failed(format!("{error:#}")),
    };
    let mut task = tokio::spawn((entry.body)(Arc::clone(&case)));
    let result = match tokio::time::timeout(CASE_TIMEOUT, &mut task).await {
        Ok(Ok(result)) => result.map_err(|e| format!("{e:#}")),
        Ok(Err(panic)) => Err(format!("panicked: {panic}")),
        Err(_) => {
            task.abort();
            Err(format!("did not finish within {CASE_TIMEOUT:?}"))
        }
    };
    let cleaned = case.cleanup().await.map_err(|e| format!("{e:#}"));
    match (result, cleaned, case.skipped()) {
        (Ok(()), Ok(()), Some(why)) => Outcome::Skipped(why),
        (Ok(()), Ok(()), None) => Outcome::Passed,
        (Err(error), _, _) | (Ok(()), Err(error), _) => Outcome::Failed(error),
    }
}

/// Stops the replicas; each must exit cleanly on SIGTERM.
async fn stop(env: &Env) -> Result<(), String> {
    let ended = env.pool.stop_all().await;
    let unclean: Vec<String> = ended
        .iter()
        .filter(|e| e.code != Some(0))
        .map(|e| {
            format!(
                "{} exited with {:?} (log {})",
                e.name,
                e.code,
                e.log.display()
            )
        })
        .collect();
    match unclean.is_empty() {
        true => Ok(()),
        false => Err(unclean.join("; ")),
    }
}

fn report(
    env: &Env,
    outcomes: &[(&'static str, Outcome)],
    stopped: &Result<(), String>,
    started: Instant,
) -> ExitCode {
    let count = |f: fn(&Outcome) -> bool| outcomes.iter().filter(|(_, o)| f(o)).count();
    let passed = count(|o| matches!(o, Outcome::Passed));
    let skipped = count(|o| matches!(o, Outcome::Skipped(_)));
    let failed = count(|o| matches!(o, Outcome::Failed(_)));
    if let Err(unclean) = stopped {
        println!("e2e: replicas did not stop cleanly: {unclean}");
    }
    println!(
        "e2e: {passed} passed, {skipped} skipped, {failed} failed in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    if failed == 0 && stopped.is_ok() {
        let _ = std::fs::remove_dir_all(&env.dir);
        ExitCode::SUCCESS
    } else {
        println!("e2e: replica logs kept in {}", env.dir.display());
        ExitCode::FAILURE
    }
}
