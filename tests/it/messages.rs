//! One way a client error becomes text a user reads (an event, a status,
//! a log line, the process's exit): through `ApiMessage` (a watch's,
//! `WatchMessage`), which gives the API server's words rather than the
//! client's debug form of its answer (`ApiError: ... (Status { ... })`).
//! Read from the production source of the controller and the runtime (code
//! only: comments and test modules left out):
//!
//! - every error type holding a client error (`kube::Error`, a watch's
//!   `watcher::Error`) formats it through them, never as `{source}`, `{0}`
//!   or `transparent`;
//! - no statement that awaits a call of the API client turns its error
//!   into text another way (`.to_string()` or `format!` in its `map_err`).

use std::path::{Path, PathBuf};

use crate::floors::{collect, strip};

/// The production source read: the controller's and the runtime's.
const SOURCES: [&str; 2] = ["src", "runtime/src"];

/// The ways a client error is formatted as the API server said it.
const THE_WAY: [&str; 2] = ["ApiMessage(", "WatchMessage("];

/// The client's error types.
const CLIENT_ERRORS: [&str; 2] = ["kube::Error", "watcher::Error"];

/// The methods of the API client (kube's `Api`, and the client's
/// discovery) whose errors are client errors.
const CLIENT_CALLS: [&str; 10] = [
    "get",
    "get_opt",
    "list",
    "create",
    "patch",
    "patch_status",
    "replace",
    "delete",
    "delete_collection",
    "list_api_group_resources",
];

/// The names `code` gives kube `Api`s: bindings and parameters typed
/// `Api<...>`, or made by `Api::...`.
fn api_names(code: &str) -> Vec<String> {
    let mut names = Vec::new();
    for (at, _) in code
        .match_indices("Api<")
        .chain(code.match_indices("Api::"))
    {
        let before = code[..at].trim_end_matches("kube::").trim_end_matches('&');
        let before = before.trim_end();
        // `name: Api<...>`, `name: &Api<...>`, or `let name = Api::...`.
        let declared = before
            .strip_suffix(':')
            .or_else(|| before.strip_suffix('='))
            .map(|text| {
                // Within the parameter or statement.
                let own = text
                    .rfind([';', '{', '}', '(', ','])
                    .map_or(text, |at| &text[at + 1..]);
                own.split_once(':').map_or(own, |(name, _)| name).trim_end()
            });
        if let Some(text) = declared {
            let name: String = text
                .chars()
                .rev()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect::<String>()
                .chars()
                .rev()
                .collect();
            if !name.is_empty() && name != "mut" {
                names.push(name);
            }
        }
    }
    names.sort();
    names.dedup();
    names
}

/// The chains of calls that start with a call of the API client: from the
/// call to the end of its statement.
fn client_chains(code: &str) -> Vec<&str> {
    let receivers: Vec<String> = api_names(code)
        .into_iter()
        .chain(["client".to_string(), ")".to_string(), ">".to_string()])
        .collect();
    let mut chains = Vec::new();
    for call in CLIENT_CALLS {
        for (at, _) in code.match_indices(&format!(".{call}(")) {
            let before = code[..at].trim_end();
            let direct = receivers.iter().any(|receiver| {
                before.ends_with(receiver.as_str())
                    && (receiver.len() == 1
                        || !before[..before.len() - receiver.len()]
                            .ends_with(|c: char| c.is_alphanumeric() || c == '_'))
            });
            // `)` and `>`: `Api::<K>::all(client)` or `Api::namespaced(..)`
            // just before, in the same statement.
            let statement_start = before.rfind([';', '{', '}']).map_or(0, |at| at + 1);
            let through_api = before[statement_start..].contains("Api::");
            let named = receivers[..receivers.len() - 2]
                .iter()
                .any(|receiver| before.ends_with(receiver.as_str()));
            if !(named || direct && through_api) {
                continue;
            }
            let end = [code[at..].find(';'), code[at..].find("\n}")]
                .into_iter()
                .flatten()
                .min()
                .map_or(code.len(), |end| at + end);
            chains.push(&code[at..end]);
        }
    }
    chains
}

/// The `#[error(...)]` attributes of `code`, each with the item text that
/// follows it (up to the next attribute or the end of the item).
fn error_attributes(code: &str) -> Vec<(&str, &str)> {
    let mut found = Vec::new();
    let starts: Vec<usize> = code.match_indices("#[error(").map(|(at, _)| at).collect();
    for (i, &start) in starts.iter().enumerate() {
        let Some(close) = code[start..].find(")]\n").map(|at| start + at + 2) else {
            continue;
        };
        let item_end = [
            starts.get(i + 1).copied(),
            code[close..].find("\n}").map(|at| close + at),
        ]
        .into_iter()
        .flatten()
        .min()
        .unwrap_or(code.len());
        found.push((&code[start..close], &code[close..item_end.max(close)]));
    }
    found
}

/// What in `code` formats a client error another way.
fn other_ways(code: &str) -> Vec<String> {
    let mut found = Vec::new();
    for (attribute, item) in error_attributes(code) {
        let holds = CLIENT_ERRORS.iter().any(|error| item.contains(error));
        let formatted = THE_WAY.iter().any(|way| attribute.contains(way));
        if holds && (!formatted || attribute.contains("transparent")) {
            found.push(format!(
                "{}{}",
                attribute.trim(),
                item.lines().next().unwrap_or_default()
            ));
        }
    }
    for chain in client_chains(code) {
        let Some(mapped) = chain.find("map_err(|") else {
            continue;
        };
        let closure = &chain[mapped..];
        // The closure's own error, made text: `e.to_string()`, `{e}`.
        let binding: String = closure["map_err(|".len()..]
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        let as_text = !binding.is_empty()
            && (closure.contains(&format!("{binding}.to_string()"))
                || closure.contains(&format!("{{{binding}}}"))
                || closure.contains(&format!("{{{binding}:")));
        if chain.contains(".await") && as_text && !THE_WAY.iter().any(|way| closure.contains(way)) {
            found.push(chain.trim().to_string());
        }
    }
    found
}

#[test]
fn a_client_error_becomes_text_one_way() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files: Vec<PathBuf> = Vec::new();
    for source in SOURCES {
        collect(&root.join(source), &mut files);
    }
    assert!(files.len() > 100, "the source was read: {}", files.len());
    let mut found = Vec::new();
    for file in files {
        // The crate's test support, built only for its tests.
        if file.ends_with("src/testing.rs") {
            continue;
        }
        let code = strip(&std::fs::read_to_string(&file).unwrap());
        for way in other_ways(&code) {
            found.push(format!(
                "{}: {way}",
                file.strip_prefix(root).unwrap().display()
            ));
        }
    }
    assert!(
        found.is_empty(),
        "client errors made text another way:\n{}",
        found.join("\n\n")
    );
}

/// The two shapes the rules catch, and what they let through.
#[test]
fn the_other_ways_are_found() {
    let leaks = r#"
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    #[error("{action}: {source}")]
    Api {
        action: String,
        source: kube::Error,
    },
    #[error(transparent)]
    Client(#[from] kube::Error),
    #[error("no writer")]
    NoWriter,
}
async fn f(pods: &Api<Pod>) {
    let existing = pods.get_opt(&name).await.map_err(|e| Create(e.to_string()))?;
    let found = Api::<Pod>::all(client)
        .list(&params)
        .await
        .map_err(|e| format!("listing: {e}"))?;
}
"#;
    assert_eq!(other_ways(leaks).len(), 4, "{:#?}", other_ways(leaks));
    let clean = r#"
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    #[error("{action}: {}", ApiMessage(source))]
    Api {
        action: String,
        source: kube::Error,
    },
    #[error("no writer of {0}")]
    NoWriter(String),
}
async fn f(pods: &Api<Pod>, writer: &Writer) {
    let existing = pods.get_opt(&name).await.map_err(|e| Create(ApiMessage(&e).to_string()))?;
    let n = map.get(&k).map_err(|e| e.to_string());
    // Not the client: a writer whose error formats itself the one way.
    writer.delete(&name).await.map_err(|e| e.to_string())
}
"#;
    assert_eq!(other_ways(clean), Vec::<String>::new());
}
