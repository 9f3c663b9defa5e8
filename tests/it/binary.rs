//! The `pv-controller` binary against a cluster reached by kubeconfig: the
//! in-memory API server on a loopback port stands in for the cluster. The
//! binary binds a claim, and stops cleanly on SIGTERM; a --controllers
//! entry that names no controller stops its start-up; logs to a pipe carry
//! no terminal colours.

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binary_binds_through_a_kubeconfig_and_stops_on_sigterm() {
    let api = MemApi::new();
    api.create(&volume("volume-1", "1Gi").phase("Available").build())
        .expect("seed");
    api.create(&claim("claim-1", "uid-1", "1Gi").build())
        .expect("seed");
    let (addr, _server) = api
        .serve("127.0.0.1:0".parse().expect("addr"))
        .await
        .expect("serve");
    let dir =
        std::env::temp_dir().join(format!("pv-controller-binary-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let config = dir.join("kubeconfig");
    std::fs::write(&config, kubeconfig(&format!("http://{addr}"))).expect("kubeconfig");

    let mut child = Command::new(env!("CARGO_BIN_EXE_pv-controller"))
        .arg("--kubeconfig")
        .arg(&config)
        .arg("--pvclaimbinder-sync-period=1s")
        .arg("--secure-port=0")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the binary");

    let deadline = Instant::now() + Duration::from_secs(30);
    let bound = loop {
        let phase = api
            .get::<PersistentVolumeClaim>(Some("default"), "claim-1")
            .and_then(|c| c.status?.phase)
            .unwrap_or_default();
        if phase == "Bound" {
            break true;
        }
        if Instant::now() > deadline {
            break false;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
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
