//! A replica's admin endpoints over plain HTTP, and reading samples out of
//! the Prometheus text format.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use anyhow::Context as _;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// GETs `path` from `address`: status code and body.
pub(crate) async fn get(address: SocketAddr, path: &str) -> anyhow::Result<(u16, String)> {
    let mut stream = tokio::net::TcpStream::connect(address)
        .await
        .with_context(|| format!("connecting to {address}"))?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await?;
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    let code = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .with_context(|| format!("no status in {head:?}"))?;
    Ok((code, body.to_string()))
}

/// The samples of `/metrics` at `address`.
pub(crate) async fn scrape(address: SocketAddr) -> anyhow::Result<Samples> {
    let (code, body) = get(address, "/metrics").await?;
    anyhow::ensure!(code == 200, "/metrics at {address} answered {code}");
    Ok(Samples::parse(&body))
}

/// One scrape, parsed.
#[derive(Debug, Default)]
pub(crate) struct Samples(Vec<(String, BTreeMap<String, String>, f64)>);

impl Samples {
    /// Parses the text format; comments and lines it cannot read are skipped.
    pub(crate) fn parse(text: &str) -> Self {
        Self(
            text.lines()
                .filter(|l| !l.starts_with('#'))
                .filter_map(parse_line)
                .collect(),
        )
    }

    /// The sum of the samples of `name` whose labels include `labels`.
    pub(crate) fn value(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.0
            .iter()
            .filter(|(n, have, _)| {
                n == name
                    && labels
                        .iter()
                        .all(|(k, v)| have.get(*k).map(String::as_str) == Some(*v))
            })
            .map(|(_, _, value)| value)
            .sum()
    }

    /// The samples of `name` with their labels, for messages.
    pub(crate) fn show(&self, name: &str) -> String {
        self.0
            .iter()
            .filter(|(n, _, _)| n == name)
            .map(|(_, labels, value)| format!("{labels:?} {value}"))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

fn parse_line(line: &str) -> Option<(String, BTreeMap<String, String>, f64)> {
    let (series, value) = line.rsplit_once(' ')?;
    let value = value.parse().ok()?;
    let Some((name, rest)) = series.split_once('{') else {
        return Some((series.to_string(), BTreeMap::new(), value));
    };
    let mut labels = BTreeMap::new();
    let mut rest = rest.strip_suffix('}')?;
    while let Some((key, after)) = rest.split_once("=\"") {
        let mut text = String::new();
        let mut chars = after.char_indices();
        let end = loop {
            match chars.next()? {
                (_, '\\') => text.push(chars.next()?.1),
                (i, '"') => break i,
                (_, c) => text.push(c),
            }
        };
        labels.insert(key.trim_start_matches(',').to_string(), text);
        rest = &after[end + 1..];
    }
    Some((name.to_string(), labels, value))
}
