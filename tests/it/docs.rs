//! The documentation names what exists: every source path a document
//! names (`src/pv/cache.rs`, `runtime/src/write.rs:120`, `deploy/shadow/`)
//! is a file or a directory of the repository, and every link to another
//! document, with its section, leads somewhere. Renamed and deleted files
//! are caught here, not by a reader. And the README stays short.

use std::path::{Path, PathBuf};

/// The repository's root.
fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The documents read: the READMEs, docs/, and the policy files.
fn documents() -> Vec<PathBuf> {
    let mut found = vec![
        root().join("README.md"),
        root().join("CHANGELOG.md"),
        root().join("SECURITY.md"),
        root().join("resourceslice/README.md"),
    ];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    found.extend(docs);
    found
}

/// The top-level directories a source path starts with.
const TOPS: [&str; 13] = [
    "src",
    "runtime",
    "memapi",
    "testkit",
    "tests",
    "deploy",
    "docs",
    "benches",
    "examples",
    "resourceslice",
    "component-base",
    "k8s-names",
    "quantity",
];

/// The source paths `text` names: words starting with one of [`TOPS`] and
/// a slash (not inside a URL), without a line number or trailing
/// punctuation.
fn paths(text: &str) -> Vec<String> {
    let is_path_char = |c: char| c.is_ascii_alphanumeric() || "_./-*:#".contains(c);
    let mut found = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find(|c: char| c.is_ascii_alphabetic()) {
        let before = rest[..start].chars().last();
        let word_len = rest[start..]
            .find(|c: char| !is_path_char(c))
            .unwrap_or(rest.len() - start);
        let word = &rest[start..start + word_len];
        rest = &rest[start + word_len..];
        if before.is_some_and(|c| c == '/' || c.is_ascii_alphanumeric() || c == '-' || c == '.') {
            continue;
        }
        let Some((top, _)) = word.split_once('/') else {
            continue;
        };
        if !TOPS.contains(&top) || word.contains("://") {
            continue;
        }
        let path = word
            .split([':', '#'])
            .next()
            .unwrap_or(word)
            .trim_end_matches(['.', ',', ')']);
        // A glob names its directory.
        let path = path.split('*').next().unwrap_or(path);
        found.push(path.to_string());
    }
    found
}

/// GitHub's anchor of a heading.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors of a document's headings.
fn anchors(text: &str) -> Vec<String> {
    text.lines()
        .filter(|line| line.starts_with('#'))
        .map(|line| anchor(line.trim_start_matches('#')))
        .collect()
}

/// The local links of a document: `](target)` not to a URL.
fn links(text: &str) -> Vec<String> {
    text.match_indices("](")
        .filter_map(|(at, _)| {
            let rest = &text[at + 2..];
            let end = rest.find(')')?;
            let target = &rest[..end];
            (!target.contains("://") && !target.starts_with("mailto:")).then(|| target.to_string())
        })
        .collect()
}

/// What a document names that does not exist.
fn missing(document: &Path, text: &str) -> Vec<String> {
    let mut missing = Vec::new();
    for path in paths(text) {
        if !root().join(&path).exists() {
            missing.push(format!("path {path}"));
        }
    }
    let dir = document.parent().unwrap();
    for link in links(text) {
        let (file, section) = link.split_once('#').unwrap_or((&link, ""));
        let target = if file.is_empty() {
            document.to_path_buf()
        } else {
            dir.join(file)
        };
        if !target.exists() {
            missing.push(format!("link {link}"));
            continue;
        }
        if !section.is_empty() {
            let text = std::fs::read_to_string(&target).unwrap_or_default();
            if !anchors(&text).iter().any(|a| a == section) {
                missing.push(format!("section {link}"));
            }
        }
    }
    missing
}

#[test]
fn every_path_and_link_of_the_documentation_exists() {
    let mut broken = Vec::new();
    for document in documents() {
        let text = std::fs::read_to_string(&document)
            .unwrap_or_else(|e| panic!("{}: {e}", document.display()));
        for what in missing(&document, &text) {
            broken.push(format!("{}: {what}", document.display()));
        }
    }
    assert!(broken.is_empty(), "{}", broken.join("\n"));
}

/// The README reads in a minute: at most 120 lines, its two commands (the
/// demo and the tests) in the first 40.
#[test]
fn the_readme_is_short_and_starts_with_its_commands() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let lines: Vec<&str> = readme.lines().collect();
    assert!(lines.len() <= 120, "{} lines", lines.len());
    let commands: Vec<usize> = lines
        .iter()
        .enumerate()
        .filter(|(_, line)| **line == "```sh")
        .map(|(at, _)| at + 2)
        .collect();
    assert!(commands.len() >= 2 && commands[1] <= 40, "{commands:?}");
    assert!(lines[commands[0] - 1].contains("--embedded-cluster examples/demo.yaml"));
    assert!(lines[commands[1] - 1].starts_with("cargo test"));
}

#[test]
fn a_renamed_file_or_section_is_caught() {
    let readme = root().join("README.md");
    let text = "See `src/dry_run/nowhere.rs:12`, [the table](docs/operations.md#no-such-section), \
                `deploy/base/`, src/pv/*.rs and https://example.com/src/x.rs.";
    assert_eq!(
        missing(&readme, text),
        [
            "path src/dry_run/nowhere.rs",
            "section docs/operations.md#no-such-section"
        ]
    );
}
