//! The container image builds as users will build it. No container engine
//! is needed: the Dockerfile's build stage is read, exactly the files its
//! `COPY` lines name are assembled into a scratch build context, and cargo
//! must load the workspace from them, locked and offline, for the image's
//! target: `cargo metadata` resolves the workspace against the lock file,
//! and `cargo fetch` also reads every target the manifests name (metadata
//! alone does not notice a missing benchmark file). Neither compiles, so
//! the check is fast. The builder's Rust must be the workspace's
//! `rust-version`, the image is built without the embedded cluster, and its
//! version label is the workspace version.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The repository root.
fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The build stage of a Dockerfile: its base image, its `COPY` lines (sources,
/// destination) and its `RUN` commands, continuation lines joined.
struct BuildStage {
    image: String,
    copies: Vec<(Vec<String>, String)>,
    runs: Vec<String>,
}

fn build_stage(dockerfile: &str) -> BuildStage {
    let joined = dockerfile.replace("\\\n", " ");
    let mut stage = None;
    for line in joined.lines().map(str::trim) {
        let mut words = line.split_whitespace();
        match words.next() {
            Some("FROM") if stage.is_none() => {
                stage = Some(BuildStage {
                    image: words.next().unwrap_or_default().to_string(),
                    copies: vec![],
                    runs: vec![],
                });
            }
            Some("FROM") => break,
            Some("COPY") => {
                let Some(stage) = stage.as_mut() else {
                    continue;
                };
                let args: Vec<String> = words
                    .filter(|w| !w.starts_with("--"))
                    .map(str::to_string)
                    .collect();
                if let Some((dest, sources)) = args.split_last() {
                    stage.copies.push((sources.to_vec(), dest.clone()));
                }
            }
            Some("RUN") => {
                if let Some(stage) = stage.as_mut() {
                    stage.runs.push(words.collect::<Vec<_>>().join(" "));
                }
            }
            _ => {}
        }
    }
    stage.expect("the Dockerfile has a build stage")
}

/// Copies a file or a directory tree, as `COPY` does.
fn copy_tree(from: &Path, to: &Path) {
    if from.is_dir() {
        std::fs::create_dir_all(to).expect("create dir");
        for entry in std::fs::read_dir(from).expect("read dir") {
            let entry = entry.expect("entry");
            if entry.file_name() == "target" {
                continue; // .dockerignore keeps every target/ out
            }
            copy_tree(&entry.path(), &to.join(entry.file_name()));
        }
    } else {
        std::fs::copy(from, to).unwrap_or_else(|e| panic!("copy {}: {e}", from.display()));
    }
}

/// Assembles the build stage's context into `dir` and loads the workspace
/// there as the image's build would; returns cargo's complaint, if any.
fn load_workspace_as_the_image_does(dockerfile: &str, dir: &Path) -> Result<(), String> {
    let stage = build_stage(dockerfile);
    for (sources, dest) in &stage.copies {
        for source in sources {
            let from = root().join(source);
            if !from.exists() {
                return Err(format!("COPY {source}: not in the repository"));
            }
            let into_dir = dest.ends_with('/') || sources.len() > 1;
            let to = if into_dir {
                dir.join(dest).join(source)
            } else {
                dir.join(dest)
            };
            if let Some(parent) = to.parent() {
                std::fs::create_dir_all(parent).expect("create parent");
            }
            copy_tree(&from, &to);
        }
    }
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    // The image is built for musl: resolve for that platform only.
    let checks: [&[&str]; 2] = [
        &[
            "metadata",
            "--format-version",
            "1",
            "--filter-platform",
            MUSL,
        ],
        &["fetch", "--target", MUSL],
    ];
    for check in checks {
        let output = Command::new(&cargo)
            .args(check)
            .args(["--locked", "--offline"])
            .current_dir(dir)
            .output()
            .expect("run cargo");
        if !output.status.success() {
            return Err(String::from_utf8_lossy(&output.stderr).into_owned());
        }
    }
    Ok(())
}

/// The image's target.
const MUSL: &str = "x86_64-unknown-linux-musl";

/// A scratch directory, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scratch dir");
        Self(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A value of the workspace manifest's `[workspace.package]` table.
fn workspace_package(key: &str) -> String {
    let manifest = std::fs::read_to_string(root().join("Cargo.toml")).expect("manifest");
    let table = manifest
        .split("[workspace.package]")
        .nth(1)
        .expect("[workspace.package]");
    table
        .lines()
        .take_while(|l| !l.starts_with('['))
        .find_map(|l| l.strip_prefix(&format!("{key} = ")))
        .map(|v| v.trim_matches('"').to_string())
        .unwrap_or_else(|| panic!("{key} in [workspace.package]"))
}

fn dockerfile() -> String {
    std::fs::read_to_string(root().join("deploy/Dockerfile")).expect("deploy/Dockerfile")
}

#[test]
fn the_image_build_stage_loads_the_workspace() {
    let scratch = Scratch::new("image-context");
    load_workspace_as_the_image_does(&dockerfile(), &scratch.0)
        .expect("cargo loads the workspace from exactly the files the Dockerfile copies");
}

/// Build stages that miss a file the manifest names: the check must fail
/// on them the way `docker build` did, first on the Dockerfile as it once
/// was (only the manifest and src/), then on one that copies every member
/// but forgets the benchmark (the failure users saw: "can't find `binding`
/// bench").
#[test]
fn a_build_stage_missing_a_file_the_manifest_names_is_caught() {
    let head = "FROM rust:1.95-alpine AS build\nWORKDIR /src\nCOPY Cargo.toml Cargo.lock ./\nCOPY src ./src\n";
    let build = "RUN cargo build --release --locked --no-default-features --bin pv-controller\n";
    let members: String = [
        "component-base",
        "k8s-names",
        "quantity",
        "memapi",
        "resourceslice",
        "runtime",
        "testkit",
    ]
    .iter()
    .map(|m| format!("COPY {m} ./{m}\n"))
    .collect();
    let cases = [
        (
            "the original build stage",
            format!("{head}{build}"),
            "failed to load manifest",
        ),
        (
            "every member but no benches/",
            format!("{head}{members}{build}"),
            "can't find `binding` bench",
        ),
    ];
    for (name, dockerfile, expected) in cases {
        let scratch = Scratch::new("image-context-broken");
        let error = load_workspace_as_the_image_does(&dockerfile, &scratch.0).expect_err(name);
        assert!(error.contains(expected), "{name}: {error}");
    }
}

#[test]
fn the_builder_rust_is_the_workspace_rust_version() {
    let stage = build_stage(&dockerfile());
    let tag = stage
        .image
        .split(':')
        .nth(1)
        .expect("a tagged builder image");
    let builder_rust = tag.split('-').next().unwrap_or_default();
    let rust_version = workspace_package("rust-version");
    assert_eq!(
        builder_rust, rust_version,
        "the builder image ({}) must run the workspace's rust-version",
        stage.image
    );
}

#[test]
fn the_image_has_no_embedded_cluster_and_says_its_version() {
    let text = dockerfile();
    let stage = build_stage(&text);
    let build = stage
        .runs
        .iter()
        .find(|run| run.contains("cargo build"))
        .expect("the build stage runs cargo build");
    assert!(build.contains("--no-default-features"), "{build}");
    assert!(build.contains("--locked"), "{build}");
    let version = workspace_package("version");
    assert!(
        text.contains(&format!("ARG VERSION={version}")),
        "the version label defaults to the workspace version {version}"
    );
    for label in ["source", "version", "licenses"] {
        assert!(
            text.contains(&format!("org.opencontainers.image.{label}=")),
            "OCI label {label}"
        );
    }
    assert!(text.contains("USER 65532:65532"), "runs as nonroot");
    assert!(
        text.contains("EXPOSE 10281"),
        "exposes the secure admin port, the Deployment's"
    );
    assert!(text.contains("--bin dra-publish"), "{build}");
}
