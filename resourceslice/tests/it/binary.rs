//! The `dra-publish` binary against the in-memory API server on a loopback
//! port: it publishes a devices file of two pools, rewrites only the pool
//! an edit of the file touches, writes nothing when started again with
//! the same file, and `--wipe-node` deletes one node's slices of every
//! driver; its flags and logs are spelled as the controller's.

use super::support::*;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::resource::v1::ResourceSlice;
use memapi::{MemApi, Verb};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const DRIVER: &str = "gpu.example.com";

/// How long any awaited state may take to appear.
const DEADLINE: Duration = Duration::from_secs(10);

/// Two pools; `model` is the second GPU's model, the field the test edits.
fn devices_yaml(model: &str) -> String {
    format!(
        "pools:
  rack-1:
    devices:
    - name: gpu-0
      attributes: {{model: {{string: a100}}}}
      capacity: {{memory: {{value: 40Gi}}}}
    - name: gpu-1
      attributes: {{model: {{string: {model}}}}}
  rack-2:
    devices:
    - name: fpga-0
      attributes: {{model: {{string: u250}}}}
"
    )
}

fn kubeconfig(server: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: mem\n  cluster:\n    server: {server}\ncontexts:\n- name: mem\n  context:\n    cluster: mem\n    user: nobody\nusers:\n- name: nobody\n  user: {{}}\ncurrent-context: mem\n"
    )
}

/// A directory of its own for one test, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> Self {
        let dir = std::env::temp_dir().join(format!("dra-publish-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }

    fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.0.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A running `dra-publish` whose stderr is kept; killed when dropped, so
/// a failing test leaves no process behind.
struct Running {
    child: Child,
    log: Arc<Mutex<String>>,
    /// Reads stderr into `log` until the process closes it.
    reader: Option<std::thread::JoinHandle<()>>,
}

impl Running {
    fn start(args: &[&str]) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_dra-publish"))
            .args(args)
            .env("RUST_LOG", "info,resourceslice=trace")
            .env_remove("NO_COLOR")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start dra-publish");
        let log = Arc::new(Mutex::new(String::new()));
        let stderr = child.stderr.take().unwrap();
        let sink = log.clone();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let mut log = sink.lock().unwrap();
                log.push_str(&line);
                log.push('\n');
            }
        });
        Self {
            child,
            log,
            reader: Some(reader),
        }
    }

    fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }

    /// Waits for the process to exit by itself, and for its last log line.
    async fn exit(&mut self) -> ExitStatus {
        let deadline = Instant::now() + DEADLINE;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                if let Some(reader) = self.reader.take() {
                    reader.join().unwrap();
                }
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "dra-publish did not exit: {}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Sends SIGTERM and waits for the process to exit.
    async fn stop(&mut self) -> ExitStatus {
        let sent = Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status()
            .unwrap();
        assert!(sent.success(), "SIGTERM sent");
        self.exit().await
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Polls `done` until it holds; fails the test after [`DEADLINE`].
async fn until(what: &str, running: &Running, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + DEADLINE;
    while !done() {
        assert!(
            Instant::now() < deadline,
            "{what} within {DEADLINE:?}; dra-publish logged:\n{}",
            running.log()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The stored slice of `pool`.
fn pool_slice(mem: &MemApi, pool: &str) -> ResourceSlice {
    let mut found: Vec<_> = slices(mem)
        .into_iter()
        .filter(|s| s.spec.pool.name == pool)
        .collect();
    assert_eq!(found.len(), 1, "one slice of pool {pool}");
    found.remove(0)
}

fn device_names(slice: &ResourceSlice) -> Vec<&str> {
    slice
        .spec
        .devices
        .iter()
        .flatten()
        .map(|d| d.name.as_str())
        .collect()
}

fn model(slice: &ResourceSlice, device: &str) -> Option<String> {
    slice
        .spec
        .devices
        .iter()
        .flatten()
        .find(|d| d.name == device)?
        .attributes
        .as_ref()?
        .get("model")?
        .string
        .clone()
}

/// Whether the log says both pools were found up to date.
fn both_pools_up_to_date(log: &str) -> bool {
    ["pool=rack-1", "pool=rack-2"].iter().all(|pool| {
        log.lines()
            .any(|line| line.contains("pool up to date") && line.contains(pool))
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dra_publish_publishes_follows_edits_restarts_without_writes_and_wipes_a_node() {
    let mem = MemApi::new();
    node(&mem, "node-1");
    let (addr, _server) = mem.serve("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let server = format!("http://{addr}");
    let dir = TempDir::new();
    let config = dir.write("kubeconfig", &kubeconfig(&server));
    let devices = dir.write("devices.yaml", &devices_yaml("a100"));
    let publish_args = |config: &Path, devices: &Path| {
        [
            "--kubeconfig",
            config.to_str().unwrap(),
            "--driver",
            DRIVER,
            "--node",
            "node-1",
            "--devices",
            devices.to_str().unwrap(),
            "--sync-delay",
            "1s",
        ]
        .map(String::from)
    };
    let args = publish_args(&config, &devices);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();

    // Start: one slice per pool, one create each.
    let mut first = Running::start(&args);
    // memapi counts a write a moment after it stores it: wait for both.
    until("two slices published", &first, || {
        slices(&mem).len() == 2 && writes(&mem) >= 2
    })
    .await;
    assert_eq!(writes(&mem), 2);
    let node_uid = mem.get::<Node>(None, "node-1").unwrap().metadata.uid;
    for (pool, devices) in [
        ("rack-1", vec!["gpu-0", "gpu-1"]),
        ("rack-2", vec!["fpga-0"]),
    ] {
        let slice = pool_slice(&mem, pool);
        assert_eq!(slice.spec.driver, DRIVER);
        assert_eq!(slice.spec.node_name.as_deref(), Some("node-1"));
        assert_eq!(slice.spec.pool.generation, 1);
        assert_eq!(slice.spec.pool.resource_slice_count, 1);
        assert_eq!(device_names(&slice), devices);
        let owner = &slice.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), &owner.uid),
            ("Node", node_uid.as_ref().unwrap())
        );
    }
    let rack_1 = pool_slice(&mem, "rack-1");
    let rack_2 = pool_slice(&mem, "rack-2");
    assert_eq!(model(&rack_1, "gpu-1").as_deref(), Some("a100"));

    // An edit of one device: its pool's slice is updated in place, once.
    dir.write("devices.yaml", &devices_yaml("h100"));
    until("the edit published", &first, || {
        model(&pool_slice(&mem, "rack-1"), "gpu-1").as_deref() == Some("h100") && writes(&mem) >= 3
    })
    .await;
    assert_eq!(writes(&mem), 3);
    assert_eq!(
        mem.requests().count(Verb::Update, "resourceslices", None),
        1
    );
    let edited = pool_slice(&mem, "rack-1");
    assert_eq!(
        edited.metadata.name, rack_1.metadata.name,
        "updated in place"
    );
    assert_eq!(
        edited.spec.pool.generation, 1,
        "one changed slice keeps the generation"
    );
    assert_eq!(
        pool_slice(&mem, "rack-2"),
        rack_2,
        "the other pool is untouched"
    );
    assert!(first.stop().await.success(), "clean exit on SIGTERM");
    assert!(
        first.log().contains("creates=2 updates=1 deletes=0"),
        "{}",
        first.log()
    );

    // Started again with the same file: both pools found up to date.
    let mut second = Running::start(&args);
    until("both pools checked", &second, || {
        both_pools_up_to_date(&second.log())
    })
    .await;
    assert_eq!(writes(&mem), 3, "the restarted binary writes nothing");
    assert!(second.stop().await.success(), "clean exit on SIGTERM");
    assert!(
        second.log().contains("creates=0 updates=0 deletes=0"),
        "{}",
        second.log()
    );

    // The kubelet's clean-up: every driver's slices of node-1 go, node-2's stay.
    mem.create(&slice("other-driver-node-1", "nic.example.com", "node-1"))
        .unwrap();
    mem.create(&slice("other-node", DRIVER, "node-2")).unwrap();
    let mut wipe = Running::start(&["--server", &server, "--wipe-node", "node-1"]);
    assert!(wipe.exit().await.success(), "{}", wipe.log());
    let left: Vec<_> = slices(&mem)
        .into_iter()
        .map(|s| s.metadata.name.unwrap())
        .collect();
    assert_eq!(left, ["other-node"]);
    assert_eq!(
        mem.requests()
            .count(Verb::DeleteCollection, "resourceslices", None),
        1
    );
}

/// Flags and logs as pv-controller's and kube-controller-manager's:
/// `--master`, Go's durations (`1m30s`; 0 refused, naming the flag),
/// `--logging-format=json` lines of kube-controller-manager's shape.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dra_publish_spells_flags_and_logs_as_the_controller() {
    let mem = MemApi::new();
    let (addr, _server) = mem.serve("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let server = format!("http://{addr}");
    mem.create(&slice("gone", DRIVER, "node-1")).unwrap();
    let mut wipe = Running::start(&[
        "--master",
        &server,
        "--wipe-node",
        "node-1",
        "--sync-delay=1m30s",
        "--logging-format=json",
        "-v",
        "2",
    ]);
    assert!(wipe.exit().await.success(), "{}", wipe.log());
    assert!(slices(&mem).is_empty());
    let lines: Vec<serde_json::Value> = wipe
        .log()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
        .collect();
    let version = lines
        .iter()
        .find(|line| line["msg"] == "Version")
        .expect("a version line");
    assert_eq!(version["v"], 0);
    assert!(version["ts"].as_f64().is_some_and(|ts| ts > 1.6e12));
    assert!(version["caller"].is_string());

    let refused = Command::new(env!("CARGO_BIN_EXE_dra-publish"))
        .args([
            "--master",
            &server,
            "--wipe-node",
            "node-1",
            "--sync-delay=0",
        ])
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("invalid value '0' for '--sync-delay <duration>': must be more than 0"),
        "{stderr}"
    );
}
