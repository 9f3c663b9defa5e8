//! The floors of the source the compiler cannot hold, read from `src/`
//! and from the runtime's crate (`runtime/src/`, the node `runtime`):
//! which module imports which (every `crate::`, `super::` and `self::` path
//! of code that is not a test's, and every path through the other crate's
//! name), and that the imports run one way.
//!
//! The compiler holds the rest: the runtime is a crate of its own, so it
//! imports no module of the controllers' crate; each controller's modules
//! are private to it (`src/pv/mod.rs`, `src/ephemeral/mod.rs`,
//! `src/resourceclaim/mod.rs`), so the process, shadow mode and the other
//! controllers reach only what its module names for them.
//!
//! Read here: no controller imports another (not even what it names for
//! the process); the flags know only the runtime; nothing imports the
//! process (`app`, `embedded`) or goes through the crate root's
//! re-exports; the PersistentVolume controller's store layers run store →
//! (census, index, packed, objects) and nothing below the store imports
//! it; and the graph of modules has no circle (so decisions never reach
//! back into the wiring that builds them).
//!
//! A node is a top-level module, except inside the three controllers,
//! where each of their modules is a node of its own (`pv::store`,
//! `pv::controller`, `ephemeral::controller_base`, ...). The runtime's
//! crate is read as the module `runtime` of the crate, as the crate's code
//! names it (`crate::runtime::...`, through the crate root's alias): the
//! whole of it is the node `runtime`, except in the test of the runtime's
//! own floors, where each of its top-level modules is a node.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The top-level modules whose own modules are nodes of their own.
const SPLIT: [&str; 3] = ["pv", "ephemeral", "resourceclaim"];

/// A module of the crate, as its path (`["pv", "cache"]`; empty: the root).
type ModulePath = Vec<String>;

/// The crates read, as (directory of their source under the workspace,
/// crate name, the module they are read as): the controller's crate is the
/// root, the runtime's crate its module `runtime`.
const CRATES: [(&str, &str, &[&str]); 2] = [
    ("src", "pv_controller", &[]),
    ("runtime/src", "pv_controller_runtime", &["runtime"]),
];

/// One source file: its module, the module its crate's root is read as
/// (`crate::` starts there), its code without comments and tests, and the
/// modules it declares.
struct Source {
    module: ModulePath,
    root: ModulePath,
    code: String,
    children: BTreeSet<String>,
}

/// The workspace's directory (the controller's package is at its root).
fn workspace() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn the_floors_run_one_way() {
    let graph = Graph::read(workspace());
    assert!(
        graph.edges.contains_key("pv::store") && graph.edges.contains_key("runtime"),
        "the graph was read: {graph:#?}"
    );
    let mut broken = Vec::new();
    let mut only = |from: &str, allowed: &[&str]| {
        for to in graph.imports_of(from) {
            if !allowed.contains(&to.as_str()) {
                broken.push(format!("{from} imports {to}"));
            }
        }
    };
    only("feature_gates", &[]);
    only("kinds", &["runtime"]);
    only("version", &[]);
    only(
        "options",
        &["runtime", "feature_gates", "shadow", "version"],
    );
    // The volume index is pure over its entries: what they are made of,
    // nothing that holds them.
    only(
        "pv::index",
        &[
            "pv::census",
            "pv::keys",
            "pv::objects",
            "pv::packed",
            "runtime",
        ],
    );
    for (from, to) in graph.all_edges() {
        let (a, b) = (top(&from), top(&to));
        if a != b && SPLIT.contains(&a) && SPLIT.contains(&b) {
            broken.push(format!("a controller imports another: {from} imports {to}"));
        }
        let above = match b {
            "crate root" | "testing" => true,
            "app" => !["crate root", "embedded", "testing"].contains(&a),
            "embedded" | "explain_cli" => !["crate root", "testing"].contains(&a),
            _ => false,
        };
        if above && from != "crate root" {
            broken.push(format!("{from} imports {to}, above it"));
        }
        if to == "pv::store"
            && ![
                // The controller's module, naming the store for the tests.
                "pv",
                "pv::controller",
                "pv::controller_base",
                // A gauge read from the store's census at scrape time, as
                // the wiring's collector.
                "pv::consumer_wait",
                "testing",
                "crate root",
            ]
            .contains(&from.as_str())
        {
            broken.push(format!("{from} is below the store and imports it"));
        }
    }
    if let Some(circle) = graph.circle() {
        broken.push(format!("a circle: {}", circle.join(" → ")));
    }
    assert!(broken.is_empty(), "{}", broken.join("\n"));
}

/// Inside the runtime's crate, each of its top-level modules a node of its
/// own: no two import each other in a circle, and none goes through the
/// crate root's re-exports.
#[test]
fn the_runtimes_modules_run_one_way() {
    let graph = Graph::read_by(workspace(), runtime_module_node);
    assert!(
        graph.edges.contains_key("runtime::plan") && graph.edges.contains_key("runtime::write"),
        "the graph was read: {graph:#?}"
    );
    let mut broken: Vec<String> = graph
        .all_edges()
        .filter(|(from, to)| from.starts_with("runtime::") && to == "runtime")
        .map(|(from, to)| format!("{from} imports {to}, above it"))
        .collect();
    if let Some(circle) = graph.circle() {
        broken.push(format!("a circle: {}", circle.join(" → ")));
    }
    assert!(broken.is_empty(), "{}", broken.join("\n"));
}

/// The node of a module when the runtime's top-level modules are nodes of
/// their own (`runtime::plan`); its crate root is the node `runtime`.
fn runtime_module_node(path: &[String]) -> String {
    match path {
        [first, second, ..] if first == "runtime" => format!("runtime::{second}"),
        _ => node(path),
    }
}

/// The runtime's code names none of the controllers' kinds: they are
/// the controllers' (`src/kinds/`).
#[test]
fn the_runtime_names_no_controllers_kind() {
    const KINDS: [&str; 7] = [
        "PersistentVolume",
        "PersistentVolumeClaim",
        "StorageClass",
        "Node",
        "Pod",
        "ResourceClaim",
        "ResourceClaimTemplate",
    ];
    let mut named = Vec::new();
    let runtime = [String::from("runtime")];
    for source in all_sources(workspace()) {
        if !source.module.starts_with(&runtime) {
            continue;
        }
        for word in source
            .code
            .split(|c: char| !(c.is_alphanumeric() || c == '_'))
        {
            if KINDS.contains(&word) {
                named.push(format!("{}: {word}", source.module.join("::")));
            }
        }
    }
    assert!(named.is_empty(), "{named:#?}");
}

/// The runtime's source, comments included, speaks no controller's
/// language: no kind of theirs, and none of the words of their trade
/// (binding, provisioning, recycling). Tests are left out.
#[test]
fn the_runtime_speaks_no_controllers_words() {
    let mut files = Vec::new();
    collect(&workspace().join("runtime/src"), &mut files);
    assert!(!files.is_empty(), "the runtime's source was read");
    let mut spoken = Vec::new();
    for file in files {
        let Ok(relative) = file.strip_prefix(workspace()) else {
            continue;
        };
        let test_code = relative.ends_with("tests.rs")
            || relative
                .components()
                .any(|part| part.as_os_str() == "tests");
        if test_code {
            continue;
        }
        let text = without_tests(&std::fs::read_to_string(&file).unwrap());
        for (number, line) in text.lines().enumerate() {
            if let Some(word) = controllers_word(line) {
                spoken.push(format!(
                    "{}:{}: {word}: {}",
                    relative.display(),
                    number + 1,
                    line.trim()
                ));
            }
        }
    }
    assert!(spoken.is_empty(), "{spoken:#?}");
}

#[test]
fn controllers_words_are_found_as_grep_finds_them() {
    for (line, found) in [
        (
            "/// e.g. `update status of PersistentVolume pv1`",
            Some("persistentvolume"),
        ),
        ("fn f(storageClass: &str)", Some("storageclass")),
        ("    // a pod's name", Some("pod")),
        ("let pods = 1;", Some("pods")),
        ("PodPhase or pod_name", None),
        ("BindError::Listen", Some("bind")),
        ("TcpListener::bind(address).await", None),
        ("socket.bind(&address)?; binder", Some("bind")),
        ("rebind", None),
        ("ResourceClaims", Some("resourceclaim")),
        ("Reprovisioning, recycled", Some("provision")),
        ("a widget is forbidden", None),
    ] {
        assert_eq!(controllers_word(line), found, "{line}");
    }
    let text = "fn kept() {}\n#[cfg(test)]\nmod tests {\n    // a pod\n}\nfn also() {} // a bind\n";
    assert_eq!(
        without_tests(text),
        "fn kept() {}\n\n\n\n\nfn also() {} // a bind\n"
    );
}

/// The first word of the controllers' trade on `line`, as `grep -iE
/// 'persistentvolume|resourceclaim|\bpods?\b|storageclass|provision|recycl|\bbind'`
/// finds it, in lower case; calls of the socket API's `bind` (the system
/// call's name, not the controllers' word) excepted.
fn controllers_word(line: &str) -> Option<&'static str> {
    const SOCKET_CALLS: [&str; 2] = ["TcpListener::bind(", "socket.bind("];
    const ANYWHERE: [&str; 5] = [
        "persistentvolume",
        "resourceclaim",
        "storageclass",
        "provision",
        "recycl",
    ];
    let lower = SOCKET_CALLS
        .into_iter()
        .fold(line.to_string(), |line, call| line.replace(call, "("))
        .to_ascii_lowercase();
    if let Some(word) = ANYWHERE.into_iter().find(|word| lower.contains(word)) {
        return Some(word);
    }
    let is_word = |c: char| c.is_alphanumeric() || c == '_';
    lower
        .split(|c: char| !is_word(c))
        .find_map(|word| match word {
            "pod" => Some("pod"),
            "pods" => Some("pods"),
            _ if word.starts_with("bind") => Some("bind"),
            _ => None,
        })
}

/// The text of a file with its comments, without the items under
/// `#[cfg(test)]` (each left as its line breaks, so lines keep their
/// numbers). The items are found on the text with its comments and
/// character literals blanked out (so a quote or a brace in them misleads
/// nothing), then cut from the text itself.
fn without_tests(text: &str) -> String {
    let blanked: String = ["'\\\"'", "'\"'", "'{'", "'}'"]
        .into_iter()
        .fold(text.to_string(), |text, literal| {
            text.replace(literal, &format!("'{}'", " ".repeat(literal.len() - 2)))
        })
        .split_inclusive('\n')
        .map(|line| {
            let (line, end) = match line.strip_suffix('\n') {
                Some(line) => (line, "\n"),
                None => (line, ""),
            };
            let code = without_comment(line);
            format!("{code}{}{end}", " ".repeat(line.len() - code.len()))
        })
        .collect();
    let mut kept = String::with_capacity(text.len());
    let mut from = 0;
    while let Some(at) = blanked[from..].find("#[cfg(test)]").map(|at| from + at) {
        kept.push_str(&text[from..at]);
        let rest = skip_item(&blanked[at + "#[cfg(test)]".len()..]);
        from = blanked.len() - rest.len();
        kept.extend(text[at..from].matches('\n'));
    }
    kept.push_str(&text[from..]);
    kept
}

#[test]
fn a_circle_is_found() {
    let mut graph = Graph::default();
    for (from, to) in [("a", "b"), ("b", "c"), ("c", "a"), ("c", "d")] {
        graph.add(from.to_string(), to.to_string());
    }
    let circle = graph.circle().expect("a circle");
    assert_eq!(circle.first(), circle.last());
    assert_eq!(circle.len(), 4, "{circle:?}");
    graph.edges.get_mut("c").unwrap().remove("a");
    assert_eq!(graph.circle(), None);
}

#[test]
fn paths_are_read_as_the_compiler_reads_them() {
    let source = Source {
        module: vec!["pv".into(), "controller".into(), "claim".into()],
        root: Vec::new(),
        code: strip(
            "use crate::pv::{store::PvStore, index};\n\
             use super::writes::Edit; // crate::app::Nothing\n\
             use crate::ShadowConfig;\n\
             #[cfg(test)]\nuse crate::ephemeral::Something;\n\
             fn f() { crate::runtime::keys::ObjectKey::new(\"a\", \"b\"); }\n\
             #[cfg(test)]\nmod tests {\n    use crate::resourceclaim::X;\n    fn g() { let _ = \"}\"; }\n}\n",
        ),
        children: BTreeSet::new(),
    };
    let found: BTreeSet<String> = references(&source)
        .into_iter()
        .map(|path| node(&path))
        .collect();
    let expected: BTreeSet<String> = [
        "pv::store",
        "pv::index",
        "pv::controller",
        "crate root",
        "runtime",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    assert_eq!(found, expected);
}

#[test]
fn paths_between_the_crates_are_read_as_one_crates() {
    // A file of the runtime's crate, read as the module `runtime::server`.
    let source = Source {
        module: vec!["runtime".into(), "server".into()],
        root: vec!["runtime".into()],
        code: strip(
            "use crate::keys::ObjectKey;\n\
             use super::plan::Plan;\n\
             fn f() -> pv_controller::pv::Config { todo!() }\n\
             fn g() -> pv_controller_runtime::write::Writer { todo!() }\n",
        ),
        children: BTreeSet::new(),
    };
    let found: BTreeSet<ModulePath> = references(&source).into_iter().collect();
    let expected: BTreeSet<ModulePath> = [
        &["runtime", "keys", "ObjectKey"][..],
        &["runtime", "plan", "Plan"],
        &["pv", "Config"],
        &["runtime", "write", "Writer"],
    ]
    .into_iter()
    .map(|path| path.iter().map(ToString::to_string).collect())
    .collect();
    assert_eq!(found, expected);
}

/// Which node imports which.
#[derive(Debug, Default)]
struct Graph {
    edges: BTreeMap<String, BTreeSet<String>>,
}

impl Graph {
    /// The graph of every source file of the crates read ([`CRATES`]),
    /// under the workspace's directory.
    fn read(workspace: &Path) -> Self {
        Self::read_by(workspace, node)
    }

    /// The same graph with `node` telling the node of each module.
    fn read_by(workspace: &Path, node: fn(&[String]) -> String) -> Self {
        let sources = all_sources(workspace);
        let modules: BTreeSet<ModulePath> = sources.iter().map(|s| s.module.clone()).collect();
        let mut graph = Self::default();
        for source in &sources {
            let from = node(&source.module);
            graph.edges.entry(from.clone()).or_default();
            for path in references(source) {
                let to = known_prefix(&path, &modules)
                    .map_or_else(|| "crate root".to_string(), |module| node(&module));
                if to != from {
                    graph.add(from.clone(), to);
                }
            }
        }
        graph
    }

    fn add(&mut self, from: String, to: String) {
        self.edges.entry(to.clone()).or_default();
        self.edges.entry(from).or_default().insert(to);
    }

    fn imports_of(&self, node: &str) -> BTreeSet<String> {
        self.edges.get(node).cloned().unwrap_or_default()
    }

    fn all_edges(&self) -> impl Iterator<Item = (String, String)> + '_ {
        self.edges
            .iter()
            .flat_map(|(from, tos)| tos.iter().map(move |to| (from.clone(), to.clone())))
    }

    /// A circle of imports (its first node repeated at its end), if any.
    fn circle(&self) -> Option<Vec<String>> {
        #[derive(Clone, Copy, PartialEq)]
        enum Mark {
            Open,
            Done,
        }
        fn visit(
            graph: &Graph,
            node: &str,
            marks: &mut BTreeMap<String, Mark>,
            stack: &mut Vec<String>,
        ) -> Option<Vec<String>> {
            marks.insert(node.to_string(), Mark::Open);
            stack.push(node.to_string());
            for next in graph.edges.get(node).into_iter().flatten() {
                match marks.get(next) {
                    Some(Mark::Open) => {
                        let start = stack.iter().position(|n| n == next).unwrap_or(0);
                        let mut circle = stack[start..].to_vec();
                        circle.push(next.clone());
                        return Some(circle);
                    }
                    Some(Mark::Done) => {}
                    None => {
                        if let Some(circle) = visit(graph, next, marks, stack) {
                            return Some(circle);
                        }
                    }
                }
            }
            stack.pop();
            marks.insert(node.to_string(), Mark::Done);
            None
        }
        let mut marks = BTreeMap::new();
        for node in self.edges.keys() {
            if !marks.contains_key(node)
                && let Some(circle) = visit(self, node, &mut marks, &mut Vec::new())
            {
                return Some(circle);
            }
        }
        None
    }
}

/// The top-level module of a node.
fn top(node: &str) -> &str {
    node.split("::").next().unwrap_or(node)
}

/// The node a module belongs to; paths through the root's re-exports (a
/// first segment that is no module, e.g. `crate::ShadowConfig`) are the
/// node `crate root`.
fn node(path: &[String]) -> String {
    match path {
        [] => "crate root".to_string(),
        [first, ..] if first.starts_with(|c: char| c.is_ascii_uppercase()) => {
            "crate root".to_string()
        }
        [first, second, ..] if SPLIT.contains(&first.as_str()) => format!("{first}::{second}"),
        [first, ..] => first.clone(),
    }
}

/// The longest prefix of `path` that is a module of the crate (the rest
/// names items), so `crate::pv::Controller` is the module `pv` and
/// `crate::pv::store::PvStore` the module `pv::store`; `None` when not
/// even the first segment is a module: an item of the crate root.
fn known_prefix(path: &[String], modules: &BTreeSet<ModulePath>) -> Option<ModulePath> {
    (1..=path.len())
        .rev()
        .map(|len| path[..len].to_vec())
        .find(|prefix| modules.contains(prefix))
}

/// Every source file of the crates read ([`CRATES`]) that is not a
/// test's, nor the binary's, each with its module as the controller's
/// crate names it.
fn all_sources(workspace: &Path) -> Vec<Source> {
    CRATES
        .into_iter()
        .flat_map(|(dir, _, root)| {
            let root: ModulePath = root.iter().map(ToString::to_string).collect();
            sources(&workspace.join(dir), &root)
        })
        .collect()
}

/// Every source file under `src` (one crate's, its root read as the module
/// `root`) that is not a test's, nor the binary's.
fn sources(src: &Path, root: &ModulePath) -> Vec<Source> {
    let mut files = Vec::new();
    collect(src, &mut files);
    let read: Vec<(ModulePath, String)> = files
        .iter()
        .filter_map(|file| {
            let module = root
                .iter()
                .cloned()
                .chain(module_of(file.strip_prefix(src).ok()?)?)
                .collect();
            Some((module, std::fs::read_to_string(file).unwrap()))
        })
        .collect();
    let test_modules: Vec<ModulePath> = read
        .iter()
        .flat_map(|(module, text)| {
            declared(text, true).into_iter().map(|child| {
                let mut path = module.clone();
                path.push(child);
                path
            })
        })
        .collect();
    read.into_iter()
        .filter(|(module, _)| !test_modules.iter().any(|test| module.starts_with(test)))
        .map(|(module, text)| Source {
            root: root.clone(),
            children: declared(&text, false),
            code: strip(&text),
            module,
        })
        .collect()
}

pub(crate) fn collect(dir: &Path, files: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            collect(&path, files);
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
}

/// The module of a file under `src` (`pv/cache.rs`: `pv::store`); `None`
/// for the binary's `main.rs`.
fn module_of(relative: &Path) -> Option<ModulePath> {
    let mut parts: Vec<String> = relative
        .iter()
        .map(|part| part.to_string_lossy().into_owned())
        .collect();
    let file = parts.pop()?;
    match file.as_str() {
        "main.rs" if parts.is_empty() => None,
        "lib.rs" if parts.is_empty() => Some(parts),
        "mod.rs" => Some(parts),
        _ => {
            parts.push(file.trim_end_matches(".rs").to_string());
            Some(parts)
        }
    }
}

/// The modules a file declares in files of their own (`mod name;`): those
/// under `#[cfg(test)]` when `tests`, the others otherwise.
fn declared(text: &str, tests: bool) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let mut test_attribute = false;
    for line in text.lines().map(str::trim) {
        if line == "#[cfg(test)]" {
            test_attribute = true;
            continue;
        }
        if line.starts_with("#[") {
            continue;
        }
        let declaration = line
            .trim_start_matches("pub(crate) ")
            .trim_start_matches("pub(super) ")
            .trim_start_matches("pub ");
        if let Some(name) = declaration
            .strip_prefix("mod ")
            .and_then(|rest| rest.strip_suffix(';'))
            && test_attribute == tests
        {
            found.insert(name.to_string());
        }
        test_attribute = false;
    }
    found
}

/// The code of a file without its comments and without the items under
/// `#[cfg(test)]` (a test module written in the file, a test-only import).
pub(crate) fn strip(text: &str) -> String {
    // Character literals that would read as the start of a string or a
    // block.
    let text = ["'\\\"'", "'\"'", "'{'", "'}'"]
        .into_iter()
        .fold(text.to_string(), |text, literal| {
            text.replace(literal, "' '")
        });
    let mut code = String::with_capacity(text.len());
    for line in text.lines() {
        code.push_str(without_comment(line));
        code.push('\n');
    }
    let mut kept = String::with_capacity(code.len());
    let mut rest = code.as_str();
    while let Some(at) = rest.find("#[cfg(test)]") {
        kept.push_str(&rest[..at]);
        rest = skip_item(&rest[at + "#[cfg(test)]".len()..]);
    }
    kept.push_str(rest);
    kept
}

/// The line without a `//` comment (one outside a string literal).
fn without_comment(line: &str) -> &str {
    let mut in_string = false;
    let mut previous = ' ';
    for (at, c) in line.char_indices() {
        match c {
            '"' if previous != '\\' => in_string = !in_string,
            '/' if !in_string && previous == '/' => return &line[..at - 1],
            _ => {}
        }
        previous = c;
    }
    line
}

/// What follows the item at the start of `text`: after its `;`, or after
/// the `}` that closes its first `{` (braces in string literals are
/// passed over).
fn skip_item(text: &str) -> &str {
    let mut depth = 0usize;
    let mut in_string = false;
    let mut previous = ' ';
    for (at, c) in text.char_indices() {
        match c {
            '"' if previous != '\\' => in_string = !in_string,
            _ if in_string => {}
            '{' => depth += 1,
            '}' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return &text[at + 1..];
                }
            }
            ';' if depth == 0 => return &text[at + 1..],
            _ => {}
        }
        previous = c;
    }
    ""
}

/// Every module path the code names: `crate::` paths (from its crate's
/// root), paths through a crate's name (`pv_controller_runtime::keys`: the
/// module `runtime::keys`), `super::` and `self::` paths resolved from the
/// file's module, and paths into the modules it declares; use groups
/// (`crate::pv::{cache, index}`) give one path each.
fn references(source: &Source) -> Vec<ModulePath> {
    let code = &source.code;
    let mut found = Vec::new();
    for (at, _) in code.match_indices("::") {
        let start = start_of(code, at, |c| c.is_alphanumeric() || c == '_' || c == ':');
        if start != start_of(code, at, |c| c.is_alphanumeric() || c == '_') {
            // Not the first `::` of its path.
            continue;
        }
        let first = &code[start..at];
        let base: ModulePath = match first {
            "crate" => source.root.clone(),
            "super" | "self" => {
                let mut base = source.module.clone();
                let mut rest = &code[start..];
                while let Some(after) = rest.strip_prefix("super::") {
                    base.pop();
                    rest = after;
                }
                if let Some(after) = rest.strip_prefix("self::") {
                    rest = after;
                }
                let consumed = code[start..].len() - rest.len();
                for path in tree(&code[start + consumed..]) {
                    found.push(base.iter().cloned().chain(path).collect());
                }
                continue;
            }
            child if source.children.contains(child) => {
                let mut base = source.module.clone();
                base.push(child.to_string());
                base
            }
            other => match CRATES.iter().find(|(_, name, _)| *name == other) {
                Some((_, _, root)) => root.iter().map(ToString::to_string).collect(),
                None => continue,
            },
        };
        for path in tree(&code[at + 2..]) {
            found.push(base.iter().cloned().chain(path).collect());
        }
    }
    found
}

/// Where the run of characters that `part` takes, ending at `at`, starts.
fn start_of(code: &str, at: usize, part: impl Fn(char) -> bool) -> usize {
    code[..at]
        .char_indices()
        .rev()
        .find(|&(_, c)| !part(c))
        .map_or(0, |(i, c)| i + c.len_utf8())
}

/// The paths of a use tree at the start of `text`: `a::b::C` is one path,
/// `a::{b, c::{d, E}}` one per leaf.
fn tree(text: &str) -> Vec<ModulePath> {
    let text = text.trim_start();
    if let Some(group) = text.strip_prefix('{') {
        let mut paths = Vec::new();
        let mut depth = 0usize;
        let mut item_start = 0;
        for (at, c) in group.char_indices() {
            match c {
                '{' => depth += 1,
                '}' if depth == 0 => {
                    paths.extend(tree(&group[item_start..at]));
                    return paths;
                }
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    paths.extend(tree(&group[item_start..at]));
                    item_start = at + 1;
                }
                _ => {}
            }
        }
        return paths;
    }
    let word_end = text
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(text.len());
    let word = &text[..word_end];
    if word.is_empty() || word == "self" {
        return vec![Vec::new()];
    }
    match text[word_end..].strip_prefix("::") {
        Some(rest) => tree(rest)
            .into_iter()
            .map(|path| std::iter::once(word.to_string()).chain(path).collect())
            .collect(),
        None => vec![vec![word.to_string()]],
    }
}
