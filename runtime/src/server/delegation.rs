//! Delegated authentication and authorization of the secure admin port, as
//! kube-controller-manager's: a bearer token is checked by the API server
//! with a TokenReview, and what the user asks for (verb and non-resource
//! URL, e.g. `get /metrics`) with a SubjectAccessReview. Both answers are
//! kept for a short while (10 s by default, upstream's), so a burst of
//! scrapes costs one review each, not one per scrape; a review that fails
//! is not kept. The reviews go through a client of their own (the
//! process's [`Clients::reviews`](crate::client::Clients::reviews)), rate-limited
//! apart from the controllers'. The always-allowed paths (`/healthz`, `/readyz`, `/livez`
//! by default) are served to anyone, so the kubelet's probes need no token.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::Client;
use kube::api::{Api, PostParams};

use super::cache::ReviewCache;
use crate::api_message::ApiMessage;

/// How the secure port delegates its checks to the API server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DelegationConfig {
    /// Paths served without authentication or authorization
    /// (`--authorization-always-allow-paths`); a trailing `*` matches any
    /// rest.
    pub always_allow_paths: Vec<String>,
    /// How long a TokenReview's answer is kept
    /// (`--authentication-token-webhook-cache-ttl`).
    pub token_cache_ttl: Duration,
    /// How long an allowing SubjectAccessReview is kept
    /// (`--authorization-webhook-cache-authorized-ttl`).
    pub authorized_cache_ttl: Duration,
    /// How long a denying SubjectAccessReview is kept
    /// (`--authorization-webhook-cache-unauthorized-ttl`).
    pub unauthorized_cache_ttl: Duration,
}

/// kube-controller-manager's always-allowed paths.
pub const DEFAULT_ALWAYS_ALLOW_PATHS: [&str; 3] = ["/healthz", "/readyz", "/livez"];

/// kube-controller-manager's review cache time to live.
pub const DEFAULT_REVIEW_CACHE_TTL: Duration = Duration::from_secs(10);

impl Default for DelegationConfig {
    fn default() -> Self {
        Self {
            always_allow_paths: DEFAULT_ALWAYS_ALLOW_PATHS.map(str::to_string).to_vec(),
            token_cache_ttl: DEFAULT_REVIEW_CACHE_TTL,
            authorized_cache_ttl: DEFAULT_REVIEW_CACHE_TTL,
            unauthorized_cache_ttl: DEFAULT_REVIEW_CACHE_TTL,
        }
    }
}

/// How many tokens and how many decisions are kept at most.
const CACHE_CAPACITY: u64 = 4096;

/// Who a token stands for, as the TokenReview said.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct User {
    username: String,
    uid: String,
    groups: Vec<String>,
    extra: BTreeMap<String, Vec<String>>,
}

/// What one SubjectAccessReview asks.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Access {
    user: User,
    verb: String,
    path: String,
}

/// Why a request could not be checked (the API server could not be asked).
#[derive(Debug, thiserror::Error)]
#[error("{review}: {}", ApiMessage(source))]
struct ReviewError {
    review: &'static str,
    #[source]
    source: kube::Error,
}

/// The checks, with their caches.
pub struct Delegation {
    client: Client,
    config: DelegationConfig,
    /// By the token's SHA-256 (tokens themselves are not kept): the user,
    /// or `None` for a token the API server did not authenticate.
    tokens: ReviewCache<[u8; 32], Option<User>>,
    decisions: ReviewCache<Access, bool>,
}

impl Delegation {
    /// Checks through `client` (the review client) as `config` says.
    pub fn new(client: Client, config: DelegationConfig) -> Self {
        Self {
            client,
            config,
            tokens: ReviewCache::new(CACHE_CAPACITY),
            decisions: ReviewCache::new(CACHE_CAPACITY),
        }
    }

    fn always_allowed(&self, path: &str) -> bool {
        self.config
            .always_allow_paths
            .iter()
            .any(|allowed| match allowed.strip_suffix('*') {
                Some(prefix) => path.starts_with(prefix),
                None => allowed == path,
            })
    }

    async fn authenticate(&self, token: &str) -> Result<Option<User>, Arc<ReviewError>> {
        let digest = ring::digest::digest(&ring::digest::SHA256, token.as_bytes());
        let mut key = [0u8; 32];
        key.copy_from_slice(digest.as_ref());
        let ttl = self.config.token_cache_ttl;
        self.tokens
            .get_or_ask(key, || async move {
                let review = TokenReview {
                    spec: TokenReviewSpec {
                        token: Some(token.to_string()),
                        audiences: None,
                    },
                    ..TokenReview::default()
                };
                let answer = Api::<TokenReview>::all(self.client.clone())
                    .create(&PostParams::default(), &review)
                    .await
                    .map_err(|source| ReviewError {
                        review: "TokenReview",
                        source,
                    })?;
                let status = answer.status.unwrap_or_default();
                let user = status
                    .authenticated
                    .unwrap_or(false)
                    .then(|| status.user.unwrap_or_default())
                    .map(|user| User {
                        username: user.username.unwrap_or_default(),
                        uid: user.uid.unwrap_or_default(),
                        groups: user.groups.unwrap_or_default(),
                        extra: user.extra.unwrap_or_default(),
                    });
                Ok((user, ttl))
            })
            .await
    }

    async fn authorize(&self, access: Access) -> Result<bool, Arc<ReviewError>> {
        let (allowed_ttl, denied_ttl) = (
            self.config.authorized_cache_ttl,
            self.config.unauthorized_cache_ttl,
        );
        let asked = access.clone();
        self.decisions
            .get_or_ask(access, || async move {
                let review = SubjectAccessReview {
                    spec: SubjectAccessReviewSpec {
                        user: Some(asked.user.username),
                        uid: Some(asked.user.uid).filter(|uid| !uid.is_empty()),
                        groups: Some(asked.user.groups),
                        extra: Some(asked.user.extra).filter(|extra| !extra.is_empty()),
                        non_resource_attributes: Some(NonResourceAttributes {
                            path: Some(asked.path),
                            verb: Some(asked.verb),
                        }),
                        resource_attributes: None,
                    },
                    ..SubjectAccessReview::default()
                };
                let answer = Api::<SubjectAccessReview>::all(self.client.clone())
                    .create(&PostParams::default(), &review)
                    .await
                    .map_err(|source| ReviewError {
                        review: "SubjectAccessReview",
                        source,
                    })?;
                let allowed = answer.status.is_some_and(|status| status.allowed);
                Ok((allowed, if allowed { allowed_ttl } else { denied_ttl }))
            })
            .await
    }
}

/// The bearer token of a request, if it carries one.
fn bearer_token(request: &Request) -> Option<&str> {
    let value = request
        .headers()
        .get(header::AUTHORIZATION)?
        .to_str()
        .ok()?;
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// A Kubernetes `Status` answer, as the API server's own refusals look.
pub(super) fn status(code: StatusCode, reason: &str, message: &str) -> Response {
    let body = serde_json::json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code.as_u16(),
    });
    (
        code,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

/// `path` with its percent-escapes decoded, as the routes read it (and as
/// Go's `URL.Path`, which upstream authorizes); `None` for an escape that
/// is not two hex digits or bytes that are not UTF-8.
fn decoded(path: &str) -> Option<String> {
    let bytes = path.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut at = 0;
    while let Some(&byte) = bytes.get(at) {
        if byte == b'%' {
            let hex = bytes.get(at + 1..at + 3)?;
            let hex = std::str::from_utf8(hex).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            at += 3;
        } else {
            out.push(byte);
            at += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// The check in front of every route of the secure port: on the decoded
/// path, the one the routes serve.
pub async fn guard(
    State(delegation): State<Arc<Delegation>>,
    request: Request,
    next: Next,
) -> Response {
    let Some(path) = decoded(request.uri().path()) else {
        return status(
            StatusCode::BAD_REQUEST,
            "BadRequest",
            "the request's path has an invalid escape",
        );
    };
    if delegation.always_allowed(&path) {
        return next.run(request).await;
    }
    let Some(token) = bearer_token(&request) else {
        return status(StatusCode::UNAUTHORIZED, "Unauthorized", "Unauthorized");
    };
    let user = match delegation.authenticate(token).await {
        Ok(Some(user)) => user,
        Ok(None) => {
            tracing::debug!(%path, "bearer token not authenticated");
            return status(StatusCode::UNAUTHORIZED, "Unauthorized", "Unauthorized");
        }
        Err(error) => {
            tracing::warn!(%path, %error, "cannot authenticate a request");
            return status(StatusCode::UNAUTHORIZED, "Unauthorized", "Unauthorized");
        }
    };
    let verb = request.method().as_str().to_ascii_lowercase();
    let username = user.username.clone();
    let access = Access {
        user,
        verb: verb.clone(),
        path: path.clone(),
    };
    match delegation.authorize(access).await {
        Ok(true) => next.run(request).await,
        Ok(false) => {
            tracing::debug!(user = %username, %verb, %path, "request not authorized");
            status(
                StatusCode::FORBIDDEN,
                "Forbidden",
                &format!("forbidden: User {username:?} cannot {verb} path {path:?}"),
            )
        }
        Err(error) => {
            // The cause stays in the log: the caller learns nothing of the
            // process's connection to the API server.
            tracing::warn!(user = %username, %path, %error, "cannot authorize a request");
            status(
                StatusCode::INTERNAL_SERVER_ERROR,
                "InternalError",
                &format!("Internal Server Error: {path:?}"),
            )
        }
    }
}

#[cfg(test)]
mod tests;
