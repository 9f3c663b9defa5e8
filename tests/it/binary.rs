//! The `pv-controller` binary against a cluster reached by kubeconfig: the
//! in-memory API server on a loopback port stands in for the cluster. The
//! binary binds a claim, and stops cleanly on SIGTERM; a --controllers
//! entry that names no controller stops its start-up; logs to a pipe carry
//! no terminal colours; a flag value that cannot work is refused before
//! anything starts; JSON logs are kube-controller-manager's and `-v`
//! picks lines as klog does; `--version`; the kubectl plugin.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use memapi::MemApi;
use testkit::*;

fn kubeconfig(server: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: mem\n  cluster:\n    server: {server}\ncontexts:\n- name: mem\n  context:\n    cluster: mem\n    user: nobody\nusers:\n- name: nobody\n  user: {{}}\ncurrent-context: mem\n"
    )
}

/// memapi with a fitting volume and claim (`claim-1`), served on a
/// loopback port, and a directory named after `test` holding a kubeconfig
/// that points at it.
async fn served_pair(test: &str) -> (MemApi, tokio::task::JoinHandle<()>, std::path::PathBuf) {
    let api = MemApi::new();
    api.create(&volume("volume-1", "1Gi").phase("Available").build())
        .expect("seed");
    api.create(&claim("claim-1", "uid-1", "1Gi").build())
        .expect("seed");
    let (addr, server) = api
        .serve("127.0.0.1:0".parse().expect("addr"))
        .await
        .expect("serve");
    let dir = std::env::temp_dir().join(format!("pv-controller-{test}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    std::fs::write(
        dir.join("kubeconfig"),
        kubeconfig(&format!("http://{addr}")),
    )
    .expect("kubeconfig");
    (api, server, dir)
}

/// Whether `claim-1` turned Bound within `deadline`.
async fn bound_by(api: &MemApi, deadline: Instant) -> bool {
    loop {
        let phase = api
            .get::<PersistentVolumeClaim>(Some("default"), "claim-1")
            .and_then(|c| c.status?.phase)
            .unwrap_or_default();
        if phase == "Bound" || Instant::now() > deadline {
            return phase == "Bound";
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binary_binds_through_a_kubeconfig_and_stops_on_sigterm() {
    let (api, _server, dir) = served_pair("binary-test").await;
    let mut child = Command::new(env!("CARGO_BIN_EXE_pv-controller"))
        .arg("--kubeconfig")
        .arg(dir.join("kubeconfig"))
        .arg("--pvclaimbinder-sync-period=1s")
        .arg("--secure-port=0")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the binary");

    let deadline = Instant::now() + Duration::from_secs(30);
    let bound = bound_by(&api, deadline).await;
    let killed = Command::new("kill")
        .arg("-TERM")
        .arg(child.id().to_string())
        .status();
    let exit = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break Some(status);
        }
        if Instant::now() > deadline + Duration::from_secs(10) {
            let _ = child.kill();
            break None;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let _ = std::fs::remove_dir_all(&dir);
    assert!(bound, "the binary bound the claim");
    assert!(killed.is_ok_and(|s| s.success()), "SIGTERM sent");
    assert!(
        exit.is_some_and(|s| s.success()),
        "clean exit on SIGTERM: {exit:?}"
    );
}

/// A write the server turns away with 429 reaches the controller's own
/// layers, not a retry hidden inside kube's client: the client pauses for
/// the `Retry-After`, the write door limits the writes in flight, and the
/// sync retried binds the claim.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_429_reaches_the_controllers_layers_and_the_claim_is_bound() {
    let (api, _server, dir) = served_pair("binary-429").await;
    api.add_reactor(memapi::Reactor::on(memapi::Verb::Patch, "persistentvolumes").throttle(1));
    let log = dir.join("stderr");
    let mut child = Command::new(env!("CARGO_BIN_EXE_pv-controller"))
        .arg("--kubeconfig")
        .arg(dir.join("kubeconfig"))
        .arg("--secure-port=0")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).expect("log file"))
        .spawn()
        .expect("start the binary");
    let bound = bound_by(&api, Instant::now() + Duration::from_secs(30)).await;
    let _ = child.kill();
    let _ = child.wait();
    let stderr = std::fs::read_to_string(&log).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(bound, "the claim is bound after the 429: {stderr}");
    assert_eq!(api.requests().total_with_code(429), 1);
    assert!(
        stderr.contains("the API server asked to slow down (429), pausing requests"),
        "the client paused: {stderr}"
    );
    assert!(
        stderr.contains("writes in flight limited"),
        "the write door limited its writes: {stderr}"
    );
}

#[test]
fn an_unknown_controller_name_stops_the_start_up() {
    let output = Command::new(env!("CARGO_BIN_EXE_pv-controller"))
        .args([
            "--master=http://127.0.0.1:1",
            "--leader-elect=false",
            "--metrics-bind-address=127.0.0.1:0",
            "--secure-port=0",
            "--controllers=*,-persistentvolume-binder,ephemeral-volumes",
        ])
        .output()
        .expect("run the binary");
    assert!(!output.status.success(), "the start-up fails");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("\"ephemeral-volumes\" in --controllers is not a known controller"),
        "{stderr}"
    );
}

#[test]
fn an_unknown_feature_gate_stops_the_start_up() {
    let run = |gates: &str| {
        Command::new(env!("CARGO_BIN_EXE_pv-controller"))
            .args([
                "--master=http://127.0.0.1:1",
                "--leader-elect=false",
                "--metrics-bind-address=127.0.0.1:0",
                "--secure-port=0",
                &format!("--feature-gates={gates}"),
                "--help",
            ])
            .output()
            .expect("run the binary")
    };
    let known = run("DRAAdminAccess=false,DRAPrioritizedList=true,DRAExtendedResource=true");
    assert!(known.status.success(), "known gates are taken");
    let unknown = run("DRAAdminAccess=false,CSIMigrationPortworx=true");
    assert!(!unknown.status.success(), "the start-up fails");
    let stderr = String::from_utf8_lossy(&unknown.stderr);
    assert!(
        stderr.contains("unrecognized feature gate: CSIMigrationPortworx"),
        "{stderr}"
    );
    assert!(
        stderr.contains("DRAAdminAccess, DRAExtendedResource"),
        "{stderr}"
    );
}

#[test]
fn logs_to_a_pipe_carry_no_terminal_colours() {
    let output = Command::new(env!("CARGO_BIN_EXE_pv-controller"))
        .args([
            "--embedded-cluster",
            concat!(env!("CARGO_MANIFEST_DIR"), "/examples/demo.yaml"),
            "--exit-when-settled",
        ])
        .env_remove("NO_COLOR")
        .env_remove("RUST_LOG")
        .output()
        .expect("run the binary");
    assert!(output.status.success(), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("INFO"), "logs were written: {stderr}");
    for (stream, bytes) in [("stdout", &output.stdout), ("stderr", &output.stderr)] {
        assert!(
            !bytes.contains(&0x1b),
            "an escape byte on {stream}: {}",
            String::from_utf8_lossy(bytes)
        );
    }
}

/// Runs the binary with `args`, killed if it has not exited in 60 s.
fn run_binary(program: &std::path::Path, args: &[&str]) -> std::process::Output {
    use std::io::Read;
    let mut child = Command::new(program)
        .args(args)
        .env_remove("RUST_LOG")
        .env("NO_COLOR", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run the binary");
    let drain = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            let _ = pipe.read_to_end(&mut bytes);
            bytes
        })
    };
    let stdout = drain(Box::new(child.stdout.take().expect("stdout")));
    let stderr = drain(Box::new(child.stderr.take().expect("stderr")));
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            break child.wait().expect("wait after kill");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    std::process::Output {
        status,
        stdout: stdout.join().expect("stdout"),
        stderr: stderr.join().expect("stderr"),
    }
}

fn demo() -> &'static str {
    concat!(env!("CARGO_MANIFEST_DIR"), "/examples/demo.yaml")
}

/// A period of 0 is refused when the flags are parsed, with the flag's
/// name and what it takes, in every mode: it once made a timer panic in a
/// worker task (in embedded mode the demo went on without its resync).
#[test]
fn a_value_that_cannot_work_is_refused_before_anything_starts() {
    let binary = std::path::Path::new(env!("CARGO_BIN_EXE_pv-controller"));
    for args in [
        &[
            "--embedded-cluster",
            demo(),
            "--exit-when-settled",
            "--pvclaimbinder-sync-period",
            "0",
        ][..],
        &["--master=http://127.0.0.1:1", "--api-discovery-period=0"][..],
        &["--master=http://127.0.0.1:1", "--concurrent-claim-syncs=0"][..],
    ] {
        let output = run_binary(binary, args);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        let flag = args
            .iter()
            .rev()
            .find(|a| a.starts_with("--"))
            .unwrap()
            .split('=')
            .next()
            .unwrap();
        assert!(
            stderr.contains(&format!("invalid value '0' for '{flag} <")),
            "{args:?}: {stderr}"
        );
        assert!(
            stderr.contains("must be more than 0") || stderr.contains("must be 1 or more"),
            "{stderr}"
        );
        assert!(!stderr.contains("panicked"), "{stderr}");
        assert!(output.stdout.is_empty(), "nothing started: {output:?}");
    }
}

/// `--logging-format=json` writes kube-controller-manager's JSON lines,
/// and `-v` picks lines as klog's levels do: the version line at 0, the
/// phase changes at 2.
#[test]
fn json_logs_are_shaped_as_kube_controller_managers_and_v_picks_levels() {
    let binary = std::path::Path::new(env!("CARGO_BIN_EXE_pv-controller"));
    let lines = |verbosity: &str| {
        let output = run_binary(
            binary,
            &[
                "--embedded-cluster",
                demo(),
                "--exit-when-settled",
                "--logging-format=json",
                "-v",
                verbosity,
            ],
        );
        assert!(output.status.success(), "{output:?}");
        String::from_utf8_lossy(&output.stderr)
            .lines()
            .map(|line| {
                serde_json::from_str::<serde_json::Value>(line)
                    .unwrap_or_else(|e| panic!("not a JSON line ({e}): {line}"))
            })
            .collect::<Vec<_>>()
    };
    let chatty = lines("2");
    for line in &chatty {
        assert!(line["ts"].as_f64().is_some_and(|ts| ts > 1.6e12), "{line}");
        assert!(
            line["caller"].as_str().is_some_and(|c| c.contains(".rs:")),
            "{line}"
        );
        assert!(line["msg"].is_string(), "{line}");
        assert!(line["v"].is_u64() || line["err"].is_string(), "{line}");
        assert!(
            line.get("level").is_none() && line.get("fields").is_none(),
            "{line}"
        );
    }
    let version = chatty
        .iter()
        .find(|line| line["msg"] == "Version")
        .expect("a version line");
    assert_eq!(version["v"], 0);
    assert_eq!(version["version"], env!("CARGO_PKG_VERSION"));
    assert!(
        chatty
            .iter()
            .any(|line| line["msg"] == "phase changed" && line["v"] == 2),
        "phase changes at level 2"
    );
    let quiet = lines("0");
    assert!(quiet.iter().any(|line| line["msg"] == "Version"));
    assert!(
        quiet
            .iter()
            .all(|line| line["v"] == 0 || line.get("v").is_none()),
        "{quiet:?}"
    );
    assert!(
        quiet.len() < chatty.len() / 2,
        "{} and {}",
        quiet.len(),
        chatty.len()
    );
}

#[test]
fn version_prints_the_build() {
    let binary = std::path::Path::new(env!("CARGO_BIN_EXE_pv-controller"));
    let output = run_binary(binary, &["--version"]);
    assert!(output.status.success());
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.starts_with(&format!(
            "pv-controller {} (revision ",
            env!("CARGO_PKG_VERSION")
        )),
        "{stdout}"
    );
}

/// Installed as `kubectl-pv_controller`, the binary is the kubectl plugin
/// `kubectl pv-controller`: it explains a claim from the cluster, and
/// refuses to start the controllers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_is_a_kubectl_plugin_that_only_runs_commands() {
    let api = MemApi::new();
    api.create(&volume("small", "1Gi").phase("Available").build())
        .expect("seed");
    api.create(&claim("data", "uid-1", "5Gi").build())
        .expect("seed");
    let (addr, _server) = api
        .serve("127.0.0.1:0".parse().expect("addr"))
        .await
        .expect("serve");
    let dir = std::env::temp_dir().join(format!("pv-controller-plugin-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let plugin = dir.join("kubectl-pv_controller");
    let _ = std::fs::remove_file(&plugin);
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_pv-controller"), &plugin)
        .expect("install the plugin");
    let config = dir.join("kubeconfig");
    std::fs::write(&config, kubeconfig(&format!("http://{addr}"))).expect("kubeconfig");
    let config_arg = config.display().to_string();
    let explained = tokio::task::spawn_blocking({
        let plugin = plugin.clone();
        let config_arg = config_arg.clone();
        move || run_binary(&plugin, &["explain", "data", "--kubeconfig", &config_arg])
    })
    .await
    .unwrap();
    let table = String::from_utf8_lossy(&explained.stdout);
    assert!(explained.status.success(), "{explained:?}");
    assert!(table.contains("default/data"), "{table}");
    assert!(table.contains("too small (1Gi < 5Gi)"), "{table}");
    let refused = run_binary(&plugin, &["--kubeconfig", &config_arg]);
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("kubectl pv-controller explain"),
        "{refused:?}"
    );
    // Through kubectl itself, where it is installed.
    let path = format!(
        "{}:{}",
        dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let kubectl = Command::new("kubectl")
        .args(["pv-controller", "explain", "default/data"])
        .env("PATH", &path)
        .env("KUBECONFIG", &config)
        .output();
    match kubectl {
        Ok(output) => {
            assert!(output.status.success(), "{output:?}");
            assert_eq!(String::from_utf8_lossy(&output.stdout), table);
        }
        Err(error) => eprintln!("kubectl not found, the plugin's own run stands: {error}"),
    }
    let _ = std::fs::remove_dir_all(&dir);
}
