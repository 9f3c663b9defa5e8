//! Errors of the memapi Rust API (seeding, typed helpers, the TCP listener).
//!
//! HTTP-level failures are not errors of this kind: they become Kubernetes
//! `Status` responses (see `status.rs`).

use super::status::ApiError;

/// What can go wrong when a test drives memapi directly from Rust.
#[derive(Debug, thiserror::Error)]
pub enum MemApiError {
    /// A YAML stream could not be parsed.
    #[error("cannot parse seed YAML: {source}")]
    Yaml {
        /// The parser's complaint, with the line and column.
        #[source]
        source: serde_saphyr::Error,
    },
    /// A typed object could not be converted to or from JSON.
    #[error("cannot convert {what} to or from JSON: {source}")]
    Json {
        /// The object or kind being converted.
        what: String,
        /// The serde complaint.
        #[source]
        source: serde_json::Error,
    },
    /// The API server semantics refused the object (unknown kind, conflict...).
    #[error("rejected by the in-memory API server: {0}")]
    Api(#[from] ApiError),
    /// The TCP listener could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: std::net::SocketAddr,
        /// The socket error.
        #[source]
        source: std::io::Error,
    },
}
