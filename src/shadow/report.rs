//! What shadow mode reports: `/shadow`'s answer (counts by controller and
//! kind, the newest differences), the route on the admin server that
//! serves it, and the handle an embedder reads it by.

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde::Serialize;
use serde_json::Value;

use super::Comparison;

/// One reported difference.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct Difference {
    pub(super) controller: &'static str,
    pub(super) kind: &'static str,
    pub(super) object: String,
    pub(super) ours: String,
    pub(super) upstream: String,
    pub(super) at: String,
}

/// `/shadow`'s answer.
#[derive(Debug, Serialize)]
pub(crate) struct Report {
    pub(super) window_seconds: u64,
    pub(super) pending: usize,
    pub(super) counts: Vec<CountRow>,
    pub(super) differences: Vec<Difference>,
}

/// One row of counts.
#[derive(Debug, Serialize)]
pub(super) struct CountRow {
    pub(super) controller: &'static str,
    pub(super) kind: &'static str,
    pub(super) agree: u64,
    pub(super) differ: u64,
}

impl Comparison {
    /// Counts and the newest differences, newest first.
    pub(crate) fn report(&self) -> Report {
        let state = self.lock();
        Report {
            window_seconds: self.window.as_secs(),
            pending: state.pending.values().map(Vec::len).sum::<usize>() + state.their_binds.len(),
            counts: state
                .counts
                .iter()
                .map(|((controller, kind), (agree, differ))| CountRow {
                    controller,
                    kind,
                    agree: *agree,
                    differ: *differ,
                })
                .collect(),
            differences: state.differences.iter().rev().cloned().collect(),
        }
    }

    /// Agree and differ totals over every kind.
    pub(crate) fn totals(&self) -> (u64, u64) {
        self.lock()
            .counts
            .values()
            .fold((0, 0), |(a, d), (agree, differ)| (a + agree, d + differ))
    }
}

/// A handle on shadow mode's judgements: what `/shadow` serves, for an
/// embedder or a test. Cheap to clone.
#[derive(Clone, Debug)]
pub struct ShadowReport(pub(crate) Arc<Comparison>);

impl ShadowReport {
    /// `/shadow`'s answer: the window, the decisions not yet judged, the
    /// agree and differ counts by controller and kind, and the newest
    /// differences.
    pub fn report(&self) -> Value {
        serde_json::to_value(self.0.report()).unwrap_or_default()
    }

    /// How many decisions agreed and how many differed, over every kind.
    pub fn totals(&self) -> (u64, u64) {
        self.0.totals()
    }
}

/// `GET /shadow`, answered from `shadow`: a route for the admin server,
/// behind its authentication and authorization as every route of it.
pub(crate) fn route(shadow: Arc<Comparison>) -> Router {
    Router::new()
        .route("/shadow", get(serve_report))
        .with_state(shadow)
}

/// The report as JSON.
async fn serve_report(State(shadow): State<Arc<Comparison>>) -> Response {
    match serde_json::to_string(&shadow.report()) {
        Ok(body) => ([(header::CONTENT_TYPE, "application/json")], body).into_response(),
        Err(error) => {
            tracing::error!(%error, "cannot render the shadow report");
            (StatusCode::INTERNAL_SERVER_ERROR, "Internal Server Error").into_response()
        }
    }
}

#[cfg(test)]
mod tests;
