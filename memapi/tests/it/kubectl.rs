//! kubectl against memapi's TCP listener: get, get -o yaml, create -f,
//! patch (merge and json), delete and get -w. Skipped without kubectl.

use crate::support::pv;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use memapi::MemApi;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

fn kubectl_path() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("kubectl"))
        .find(|p| p.is_file())
}

struct Kubectl {
    bin: PathBuf,
    server: String,
    home: PathBuf,
}

impl Kubectl {
    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(&self.bin);
        cmd.arg("--kubeconfig")
            .arg(self.home.join("kubeconfig"))
            .arg("--server")
            .arg(&self.server)
            .args(args)
            .env("HOME", &self.home)
            .env_remove("KUBECONFIG")
            .stdin(Stdio::null())
            .kill_on_drop(true);
        cmd
    }

    async fn run(&self, args: &[&str]) -> String {
        let out = self.command(args).output().await.unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "kubectl {args:?} failed: {stdout}\n{stderr}"
        );
        stdout
    }
}

fn temp_home() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("memapi-kubectl-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("kubeconfig"), "").unwrap();
    dir
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p.to_string_lossy().into_owned()
}

#[tokio::test]
async fn kubectl_round_trip() {
    let Some(bin) = kubectl_path() else {
        eprintln!("kubectl not on PATH: skipping the kubectl test");
        return;
    };
    let mem = MemApi::new();
    let mut bound = pv("existing", "5Gi");
    bound.status = Some(serde_json::from_value(serde_json::json!({"phase": "Available"})).unwrap());
    mem.create(&bound).unwrap();
    let (addr, server) = mem.serve("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let home = temp_home();
    let k = Kubectl {
        bin,
        server: format!("http://{addr}"),
        home: home.clone(),
    };

    let out = k.run(&["get", "pv"]).await;
    println!("{out}");
    assert!(out.contains("existing"), "{out}");
    let out = k.run(&["get", "pvc", "-A"]).await;
    println!("{out}");

    let manifest = write(
        &home,
        "objects.yaml",
        r#"apiVersion: v1
kind: PersistentVolume
metadata:
  name: made
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteOnce]
  hostPath: {path: /tmp/made}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: claim
  namespace: ns1
spec:
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 1Gi}}
"#,
    );
    let out = k.run(&["create", "-f", &manifest]).await;
    println!("{out}");
    assert!(mem.get::<PersistentVolume>(None, "made").is_some());
    assert!(
        mem.get::<PersistentVolumeClaim>(Some("ns1"), "claim")
            .is_some()
    );

    let out = k.run(&["get", "pv", "made", "-o", "yaml"]).await;
    println!("{out}");
    assert!(
        out.contains("persistentVolumeReclaimPolicy: Retain"),
        "{out}"
    );

    k.run(&[
        "patch",
        "pv",
        "made",
        "--type=merge",
        "-p",
        r#"{"metadata":{"labels":{"m":"1"}}}"#,
    ])
    .await;
    k.run(&[
        "patch",
        "pv",
        "made",
        "--type=json",
        "-p",
        r#"[{"op":"add","path":"/metadata/annotations","value":{"j":"2"}}]"#,
    ])
    .await;
    let made = mem.get::<PersistentVolume>(None, "made").unwrap();
    assert_eq!(
        made.metadata.labels.unwrap().get("m").map(String::as_str),
        Some("1")
    );
    assert_eq!(
        made.metadata
            .annotations
            .unwrap()
            .get("j")
            .map(String::as_str),
        Some("2")
    );

    let out = k.run(&["get", "pvc", "-A"]).await;
    println!("{out}");
    assert!(out.contains("claim"), "{out}");

    k.run(&["delete", "pvc", "claim", "-n", "ns1"]).await;
    assert!(
        mem.get::<PersistentVolumeClaim>(Some("ns1"), "claim")
            .is_none()
    );

    let mut watch = k
        .command(&["get", "pv", "-w"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(watch.stdout.take().unwrap()).lines();
    let mut seen = Vec::new();
    let found = tokio::time::timeout(Duration::from_secs(10), async {
        // The initial listing shows both volumes; then the change arrives.
        while let Some(line) = lines.next_line().await.unwrap() {
            println!("watch: {line}");
            seen.push(line.clone());
            if line.starts_with("made")
                && seen.iter().filter(|l| l.starts_with("made")).count() == 1
            {
                let mut v = mem.get::<PersistentVolume>(None, "made").unwrap();
                v.spec.as_mut().unwrap().storage_class_name = Some("gold".into());
                mem.put(&v).unwrap();
            }
            if line.starts_with("made") && line.contains("gold") {
                return true;
            }
        }
        false
    })
    .await;
    let _ = watch.kill().await;
    assert_eq!(found, Ok(true), "watch output: {seen:?}");
    server.abort();
    let _ = std::fs::remove_dir_all(&home);
}
