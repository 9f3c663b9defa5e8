//! The controller under test as a child process, and what the kernel says
//! about it: CPU seconds (user + system, `/proc/PID/stat`) and peak
//! resident memory (`VmHWM`, `/proc/PID/status`).

use std::fs;
use std::path::Path;
use std::process::{Child, Command, Stdio};

/// Which controller runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Which {
    /// pv-controller (this package's release binary).
    Ours,
    /// Upstream's kube-controller-manager 1.20, persistentvolume-binder only.
    Upstream,
}

impl Which {
    pub(crate) fn label(self) -> &'static str {
        match self {
            Which::Ours => "pv-controller",
            Which::Upstream => "kube-controller-manager",
        }
    }
}

/// Where upstream's binary lives on the test machine.
const UPSTREAM: &str = "/opt/k8s-1.20/bin/kube-controller-manager";

/// A running controller; killed when dropped.
pub(crate) struct Controller {
    child: Child,
}

impl Controller {
    /// Starts `which` on `kubeconfig` with `extra` flags, logging to `log`.
    pub(crate) fn start(which: Which, kubeconfig: &Path, extra: &[String], log: &Path) -> Self {
        let kubeconfig = kubeconfig.display().to_string();
        let mut command = match which {
            Which::Ours => {
                // Another build of the controller (one with debug symbols,
                // for a profiler): BIND_STORM_BINARY=PATH.
                let binary = std::env::var("BIND_STORM_BINARY")
                    .unwrap_or_else(|_| env!("CARGO_BIN_EXE_pv-controller").to_string());
                let mut command = Command::new(binary);
                // The PersistentVolume binder alone, as upstream's below,
                // unless the controller flags choose (`-- --controllers=*`).
                if !extra.iter().any(|flag| flag.starts_with("--controllers")) {
                    command.arg("--controllers=persistentvolume-binder");
                }
                command.args([
                    "--kubeconfig",
                    &kubeconfig,
                    "--leader-elect=false",
                    "--secure-port=0",
                ]);
                if !extra
                    .iter()
                    .any(|flag| flag.starts_with("--metrics-bind-address"))
                {
                    command.args(["--metrics-bind-address", "127.0.0.1:0"]);
                }
                command
            }
            Which::Upstream => {
                let mut command = Command::new(UPSTREAM);
                command.args([
                    "--controllers=persistentvolume-binder",
                    "--leader-elect=false",
                    "--port=0",
                    "--secure-port=0",
                    "--kubeconfig",
                    &kubeconfig,
                ]);
                command
            }
        };
        command.args(extra);
        // A heap profiler for the controller alone (docs/performance.md):
        // BIND_STORM_PRELOAD=/usr/lib/heaptrack/libheaptrack_preload.so
        // with DUMP_HEAPTRACK_OUTPUT naming the file it writes.
        if let Ok(preload) = std::env::var("BIND_STORM_PRELOAD") {
            command.env("LD_PRELOAD", preload);
        }
        let log = fs::File::create(log).expect("controller log file");
        let child = command
            .stdout(Stdio::null())
            .stderr(Stdio::from(log))
            .spawn()
            .expect("start the controller");
        Self { child }
    }

    /// CPU seconds used so far (user + system).
    pub(crate) fn cpu_seconds(&self) -> f64 {
        cpu_seconds(&self.child.id().to_string())
    }

    /// Peak resident memory so far, in MiB.
    pub(crate) fn peak_rss_mib(&self) -> f64 {
        let status =
            fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap_or_default();
        status
            .lines()
            .find(|l| l.starts_with("VmHWM:"))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|kb| kb.parse::<f64>().ok())
            .map_or(f64::NAN, |kb| kb / 1024.0)
    }

    /// Whether it still runs.
    pub(crate) fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

/// CPU seconds (user + system) the process `pid` used so far ("self" for
/// the bench's own).
pub(crate) fn cpu_seconds(pid: &str) -> f64 {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name in parentheses: state is field 3,
    // utime 14 and stime 15 (in clock ticks, 100 per second on Linux).
    let rest = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (ticks(11) + ticks(12)) / 100.0
}

impl Drop for Controller {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The first process whose command name is `name` (as `/proc/PID/comm`
/// shows it, at most 15 bytes), for the API server's and etcd's CPU.
pub(crate) fn pid_of(name: &str) -> Option<String> {
    fs::read_dir("/proc").ok()?.flatten().find_map(|entry| {
        let pid = entry.file_name().to_string_lossy().into_owned();
        let comm = fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
        (comm.trim_end() == name).then_some(pid)
    })
}
