//! The controller's replicas: processes of the binary on one Lease, each
//! with its log file and `/metrics` address.
//!
//! A replica runs under a small shell that holds the test's end of a pipe:
//! when the test process ends, however it ends, the pipe closes and the
//! shell stops the replica with SIGTERM, so no replica outlives its run.
//! Each replica's `/metrics` address is also written under
//! `WORK_ROOT/replicas/`, so a run can read the metrics of the leader even
//! when another run's replica holds the Lease.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use k8s_openapi::api::coordination::v1::Lease;
use kube::{Api, Client};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, ChildStdin};

use super::{LEASE_NAME, PATIENCE, WORK_ROOT, metrics};

/// Runs the replica (`$@`) and stops it with SIGTERM once stdin closes;
/// prints the replica's pid first; exits with the replica's status.
const WRAPPER: &str = r#""$@" >&2 &
pid=$!
echo "$pid"
read -r _
kill -TERM "$pid" 2>/dev/null
wait "$pid""#;

/// The log line that names the admin server's address.
const SERVING: &str =
    "serving /metrics and the health checks over plain HTTP without authentication";

/// One running replica.
struct Replica {
    name: String,
    pid: u32,
    metrics: SocketAddr,
    log: PathBuf,
    shell: Child,
    pipe: Option<ChildStdin>,
}

/// How a replica ended.
#[derive(Debug)]
pub(crate) struct Ended {
    /// The replica's name (`POD_NAME`).
    pub(crate) name: String,
    /// Its exit code; `None` when it was killed by a signal or could not
    /// be waited for.
    pub(crate) code: Option<i32>,
    /// Its log file.
    pub(crate) log: PathBuf,
}

/// The replicas of one run.
pub(crate) struct Pool {
    binary: PathBuf,
    kubeconfig: PathBuf,
    dir: PathBuf,
    run: String,
    lease_namespace: String,
    next: AtomicUsize,
    replicas: Mutex<Vec<Replica>>,
}

impl Pool {
    /// An empty pool of replicas of `binary` using `kubeconfig`, logging
    /// into `dir`, electing a leader on the Lease in `lease_namespace`.
    pub(crate) fn new(
        binary: PathBuf,
        kubeconfig: PathBuf,
        dir: PathBuf,
        run: String,
        lease_namespace: String,
    ) -> Self {
        Self {
            binary,
            kubeconfig,
            dir,
            run,
            lease_namespace,
            next: AtomicUsize::new(1),
            replicas: Mutex::new(Vec::new()),
        }
    }

    /// Starts one more replica and waits until it is ready (its caches
    /// synced); returns its name.
    pub(crate) async fn spawn(&self) -> anyhow::Result<String> {
        let number = self.next.fetch_add(1, Ordering::Relaxed);
        let name = format!("e2e-{}-{number}", self.run);
        let log = self.dir.join(format!("{name}.log"));
        let file =
            std::fs::File::create(&log).with_context(|| format!("creating {}", log.display()))?;
        let mut shell = tokio::process::Command::new("sh")
            .arg("-c")
            .arg(WRAPPER)
            .arg("pv-controller-e2e")
            .arg(&self.binary)
            .args(self.flags())
            .env("POD_NAME", &name)
            .env("RUST_LOG", log_filter())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(file))
            .spawn()
            .with_context(|| format!("starting {}", self.binary.display()))?;
        let stdout = shell.stdout.take().context("the shell's stdout")?;
        let mut first = String::new();
        BufReader::new(stdout).read_line(&mut first).await?;
        let pid = first
            .trim()
            .parse()
            .with_context(|| format!("pid {first:?}"))?;
        let metrics = wait_for_address(&log).await?;
        let pipe = shell.stdin.take();
        std::fs::create_dir_all(registry())?;
        std::fs::write(registry().join(&name), metrics.to_string())?;
        self.lock().push(Replica {
            name: name.clone(),
            pid,
            metrics,
            log: log.clone(),
            shell,
            pipe,
        });
        wait_ready(metrics, &log).await?;
        Ok(name)
    }

    fn flags(&self) -> Vec<String> {
        [
            format!("--kubeconfig={}", self.kubeconfig.display()),
            "--pvclaimbinder-sync-period=1s".to_string(),
            "--metrics-bind-address=127.0.0.1:0".to_string(),
            "--secure-port=0".to_string(),
            "--logging-format=json".to_string(),
            "--leader-elect=true".to_string(),
            format!("--leader-elect-resource-namespace={}", self.lease_namespace),
            format!("--leader-elect-resource-name={LEASE_NAME}"),
            "--leader-elect-lease-duration=8s".to_string(),
            "--leader-elect-renew-deadline=6s".to_string(),
            "--leader-elect-retry-period=1s".to_string(),
            "--watch-failure-limit=60s".to_string(),
        ]
        .into()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Replica>> {
        self.replicas
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The names of the replicas running now.
    pub(crate) fn names(&self) -> Vec<String> {
        self.lock().iter().map(|r| r.name.clone()).collect()
    }

    /// The `/metrics` address of a replica of this run, or of another run
    /// on this machine (from the registry).
    pub(crate) fn metrics_of(&self, name: &str) -> Option<SocketAddr> {
        let own = self
            .lock()
            .iter()
            .find(|r| r.name == name)
            .map(|r| r.metrics);
        own.or_else(|| {
            std::fs::read_to_string(registry().join(name))
                .ok()?
                .trim()
                .parse()
                .ok()
        })
    }

    /// The log file of a replica of this run.
    pub(crate) fn log_of(&self, name: &str) -> Option<PathBuf> {
        self.lock()
            .iter()
            .find(|r| r.name == name)
            .map(|r| r.log.clone())
    }

    /// The name (`POD_NAME`) of the Lease's holder, if any.
    pub(crate) async fn leader(&self, client: &Client) -> anyhow::Result<Option<String>> {
        let leases: Api<Lease> = Api::namespaced(client.clone(), &self.lease_namespace);
        let lease = leases
            .get_opt(LEASE_NAME)
            .await
            .context("reading the Lease")?;
        Ok(lease
            .and_then(|l| l.spec?.holder_identity)
            .filter(|h| !h.is_empty())
            .and_then(|h| h.rsplit_once('_').map(|(base, _)| base.to_string())))
    }

    /// Waits until some replica holds the Lease; returns its name.
    pub(crate) async fn wait_for_leader(&self, client: &Client) -> anyhow::Result<String> {
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let Some(name) = self.leader(client).await? {
                return Ok(name);
            }
            if Instant::now() > deadline {
                bail!("no replica took the Lease within {PATIENCE:?}");
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// The Lease holder's name and its `/metrics`, read through the
    /// registry when another run's replica leads.
    pub(crate) async fn leader_metrics(
        &self,
        client: &Client,
    ) -> anyhow::Result<(String, metrics::Samples)> {
        let leader = self.wait_for_leader(client).await?;
        let address = self
            .metrics_of(&leader)
            .with_context(|| format!("no /metrics address known for the leader {leader}"))?;
        Ok((leader, metrics::scrape(address).await?))
    }

    /// Kills a replica with SIGKILL (no chance to release the Lease) and
    /// waits for it to be gone.
    pub(crate) async fn kill_9(&self, name: &str) -> anyhow::Result<Ended> {
        let replica = self
            .take(name)
            .with_context(|| format!("no replica {name} in this run"))?;
        let status = tokio::process::Command::new("kill")
            .args(["-KILL", &replica.pid.to_string()])
            .status()
            .await?;
        anyhow::ensure!(status.success(), "kill -KILL {} failed", replica.pid);
        Ok(finish(replica).await)
    }

    /// Stops every replica with SIGTERM and waits for each.
    pub(crate) async fn stop_all(&self) -> Vec<Ended> {
        let replicas: Vec<Replica> = std::mem::take(&mut *self.lock());
        let mut ended = Vec::new();
        for replica in replicas {
            ended.push(finish(replica).await);
        }
        ended
    }

    fn take(&self, name: &str) -> Option<Replica> {
        let mut replicas = self.lock();
        let index = replicas.iter().position(|r| r.name == name)?;
        Some(replicas.remove(index))
    }
}

/// Closes the replica's pipe (its shell sends SIGTERM if it still runs)
/// and waits for it.
async fn finish(mut replica: Replica) -> Ended {
    drop(replica.pipe.take());
    let _ = std::fs::remove_file(registry().join(&replica.name));
    let waited = tokio::time::timeout(Duration::from_secs(30), replica.shell.wait()).await;
    let code = if let Ok(Ok(status)) = waited {
        status.code()
    } else {
        let _ = replica.shell.kill().await;
        None
    };
    Ended {
        name: replica.name,
        code,
        log: replica.log,
    }
}

/// The replicas' log filter: `RUST_LOG` when set, else info with the
/// events the server refused (logged at debug when expected) shown.
fn log_filter() -> String {
    std::env::var("RUST_LOG")
        .unwrap_or_else(|_| "info,pv_controller::runtime::events=debug".to_string())
}

/// Where replicas note their `/metrics` address, for every run on the machine.
fn registry() -> PathBuf {
    Path::new(WORK_ROOT).join("replicas")
}

/// Reads the admin server's address from the replica's JSON log.
async fn wait_for_address(log: &Path) -> anyhow::Result<SocketAddr> {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        let found = text.lines().find_map(|line| {
            let entry: serde_json::Value = serde_json::from_str(line).ok()?;
            (entry["msg"] == SERVING).then(|| entry["address"].as_str()?.parse().ok())?
        });
        if let Some(address) = found {
            return Ok(address);
        }
        if Instant::now() > deadline {
            bail!(
                "no {SERVING:?} line in {} within {PATIENCE:?}:\n{}",
                log.display(),
                tail(&text)
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until `/readyz` answers 200: every cache synced.
async fn wait_ready(address: SocketAddr, log: &Path) -> anyhow::Result<()> {
    let deadline = Instant::now() + PATIENCE;
    loop {
        if metrics::get(address, "/readyz")
            .await
            .is_ok_and(|(code, _)| code == 200)
        {
            return Ok(());
        }
        if Instant::now() > deadline {
            let text = std::fs::read_to_string(log).unwrap_or_default();
            bail!(
                "{address} not ready within {PATIENCE:?}; log {}:\n{}",
                log.display(),
                tail(&text)
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The last lines of a log, for an error message.
pub(crate) fn tail(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}
