//! `authentication.k8s.io/v1` TokenReview and `authorization.k8s.io/v1`
//! SubjectAccessReview, answered from a table a test sets up: bearer tokens
//! and their users ([`crate::MemApi::add_token`]), and grants of
//! non-resource URLs ([`crate::MemApi::grant`]). A review is answered, not
//! stored, as the API server does.
//!
//! As the API server: an authenticated user also belongs to
//! `system:authenticated`, and the group `system:masters` may do anything.
//! Simplification: only non-resource URLs are granted; a review of a
//! resource is denied.

use std::collections::HashMap;

use serde_json::{Value, json};

use super::status::ApiError;

/// Who a token stands for.
#[derive(Debug, Clone)]
struct Identity {
    username: String,
    groups: Vec<String>,
}

/// One grant: `verb` on the non-resource URL `path` (a trailing `*`
/// matches any rest, as RBAC's `nonResourceURLs`) to a user or a group.
#[derive(Debug, Clone)]
struct Grant {
    subject: String,
    path: String,
    verb: String,
}

/// The tokens and grants of one server.
#[derive(Debug, Default)]
pub(crate) struct Access {
    tokens: HashMap<String, Identity>,
    grants: Vec<Grant>,
}

impl Access {
    /// Makes `token` stand for `username` in `groups`.
    pub(crate) fn add_token(&mut self, token: &str, username: &str, groups: &[&str]) {
        self.tokens.insert(
            token.to_string(),
            Identity {
                username: username.to_string(),
                groups: groups.iter().map(|g| (*g).to_string()).collect(),
            },
        );
    }

    /// Lets the user or group `subject` use `verb` on `path`.
    pub(crate) fn grant(&mut self, subject: &str, path: &str, verb: &str) {
        self.grants.push(Grant {
            subject: subject.to_string(),
            path: path.to_string(),
            verb: verb.to_string(),
        });
    }

    /// The user name and groups `token` stands for, if it is known.
    pub(crate) fn identity(&self, token: &str) -> Option<(&str, &[String])> {
        self.tokens
            .get(token)
            .map(|identity| (identity.username.as_str(), identity.groups.as_slice()))
    }

    fn allows(&self, username: &str, groups: &[&str], path: &str, verb: &str) -> bool {
        if groups.contains(&"system:masters") {
            return true;
        }
        self.grants.iter().any(|grant| {
            let subject = grant.subject == username || groups.contains(&grant.subject.as_str());
            let path_matches = match grant.path.strip_suffix('*') {
                Some(prefix) => path.starts_with(prefix),
                None => grant.path == path,
            };
            subject && path_matches && (grant.verb == verb || grant.verb == "*")
        })
    }
}

fn string_at<'a>(value: &'a Value, pointer: &str) -> &'a str {
    value.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

/// The review `body` of a `kind` with its answer (`status`).
pub(crate) fn answer(access: &Access, kind: &str, mut body: Value) -> Result<Value, ApiError> {
    let status = match kind {
        "TokenReview" => {
            let token = string_at(&body, "/spec/token");
            if token.is_empty() {
                return Err(ApiError::from_code(422, "spec.token: Required value"));
            }
            match access.tokens.get(token) {
                Some(identity) => {
                    let mut groups = identity.groups.clone();
                    groups.push("system:authenticated".to_string());
                    json!({
                        "authenticated": true,
                        "user": { "username": identity.username, "uid": format!("uid-{}", identity.username), "groups": groups },
                    })
                }
                None => {
                    json!({ "authenticated": false, "user": {}, "error": "invalid bearer token" })
                }
            }
        }
        "SubjectAccessReview" => {
            let username = string_at(&body, "/spec/user");
            let groups: Vec<&str> = body
                .pointer("/spec/groups")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            if username.is_empty() && groups.is_empty() {
                return Err(ApiError::from_code(
                    422,
                    "spec.user: Invalid value: at least one of user or group must be specified",
                ));
            }
            let Some(attributes) = body.pointer("/spec/nonResourceAttributes") else {
                return Ok(with_status(
                    body,
                    json!({ "allowed": false, "reason": "memapi grants non-resource URLs only" }),
                ));
            };
            let path = attributes.get("path").and_then(Value::as_str).unwrap_or("");
            let verb = attributes.get("verb").and_then(Value::as_str).unwrap_or("");
            if access.allows(username, &groups, path, verb) {
                json!({ "allowed": true, "reason": "granted by the test's table" })
            } else {
                json!({ "allowed": false })
            }
        }
        other => {
            return Err(ApiError::from_code(405, format!("{other} is not a review")));
        }
    };
    if let Some(object) = body.as_object_mut() {
        object.remove("status");
    }
    Ok(with_status(body, status))
}

fn with_status(mut body: Value, status: Value) -> Value {
    if let Some(object) = body.as_object_mut() {
        object.insert("status".to_string(), status);
    }
    body
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_authenticate_and_grants_allow() {
        let mut access = Access::default();
        access.add_token("t1", "alice", &["readers"]);
        access.grant("readers", "/metrics", "get");
        access.grant("bob", "/explain/*", "get");
        let review = answer(&access, "TokenReview", json!({ "spec": { "token": "t1" } })).unwrap();
        assert_eq!(review["status"]["authenticated"], true);
        assert_eq!(review["status"]["user"]["username"], "alice");
        let groups = review["status"]["user"]["groups"].as_array().unwrap();
        assert!(groups.contains(&json!("system:authenticated")));
        let forged = answer(&access, "TokenReview", json!({ "spec": { "token": "t2" } })).unwrap();
        assert_eq!(forged["status"]["authenticated"], false);

        let sar = |user: &str, groups: &[&str], path: &str| {
            answer(
                &access,
                "SubjectAccessReview",
                json!({ "spec": { "user": user, "groups": groups,
                    "nonResourceAttributes": { "path": path, "verb": "get" } } }),
            )
            .unwrap()["status"]["allowed"]
                .as_bool()
                .unwrap()
        };
        assert!(sar("alice", &["readers"], "/metrics"));
        assert!(!sar("alice", &["readers"], "/explain/ns/c"));
        assert!(sar("bob", &[], "/explain/ns/c"));
        assert!(!sar("bob", &[], "/metrics"));
        assert!(sar("root", &["system:masters"], "/anything"));
    }
}
