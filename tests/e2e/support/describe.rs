//! The events of an object as `kubectl describe` shows them.

use super::Env;
use super::cluster::kubectl;

/// One row of the Events table of `kubectl describe`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct EventRow {
    /// `Normal` or `Warning`.
    pub(crate) kind: String,
    /// The reason.
    pub(crate) reason: String,
    /// The age column, e.g. `3s (x2 over 5s)`.
    pub(crate) age: String,
    /// The source, e.g. `persistentvolume-controller`.
    pub(crate) from: String,
    /// The message.
    pub(crate) message: String,
}

/// Runs `kubectl describe RESOURCE NAME` (in `namespace` when given) with
/// the admin kubeconfig and returns its Events table.
pub(crate) async fn events(
    env: &Env,
    resource: &str,
    namespace: Option<&str>,
    name: &str,
) -> anyhow::Result<Vec<EventRow>> {
    let mut args = vec!["describe", resource, name];
    if let Some(namespace) = namespace {
        args.extend(["--namespace", namespace]);
    }
    let text = kubectl(&env.kubeconfig, &args, None).await?;
    parse(&text).ok_or_else(|| anyhow::anyhow!("no Events table in:\n{text}"))
}

/// The Events table of a describe output; `None` when there is none.
pub(crate) fn parse(text: &str) -> Option<Vec<EventRow>> {
    let mut lines = text.lines().skip_while(|l| !l.starts_with("Events:"));
    let first = lines.next()?;
    if first.contains("<none>") {
        return Some(Vec::new());
    }
    let rows = lines
        .take_while(|l| l.starts_with(' '))
        .map(columns)
        .filter(|c| c.len() == 5 && c[0] != "Type" && !c[0].starts_with('-'))
        .map(|c| EventRow {
            kind: c[0].clone(),
            reason: c[1].clone(),
            age: c[2].clone(),
            from: c[3].clone(),
            message: c[4].clone(),
        })
        .collect();
    Some(rows)
}

/// The columns of a table row: separated by two or more spaces, the fifth
/// (the message) taking the rest of the line.
fn columns(line: &str) -> Vec<String> {
    let mut columns = Vec::new();
    let mut rest = line.trim();
    while columns.len() < 4 {
        match rest.find("  ") {
            Some(end) => {
                columns.push(rest[..end].to_string());
                rest = rest[end..].trim_start();
            }
            None => break,
        }
    }
    columns.push(rest.to_string());
    columns
}
