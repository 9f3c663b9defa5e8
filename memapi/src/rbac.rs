//! Who a request is, and what RBAC lets them do with resources.
//!
//! A request names its user as a real client does: a bearer token known
//! from [`MemApi::add_token`](crate::MemApi::add_token), or impersonation
//! headers (`Impersonate-User`, `Impersonate-Group`, as kubectl's `--as`
//! and a kubeconfig's `as:` send them; a caller may always impersonate
//! here). A request that names nobody is an administrator's, as every
//! request was before users existed: memapi's own tests stay unaffected.
//!
//! A named user's resource requests are authorized by the Roles,
//! ClusterRoles and bindings a test loads ([`MemApi::load_rbac`](crate::MemApi::load_rbac)),
//! as the RBAC authorizer does: a ClusterRoleBinding grants its
//! ClusterRole everywhere, a RoleBinding grants its Role (or a
//! ClusterRole) in its own namespace; `resourceNames` restrict to named
//! objects, so they never allow a create, a list or a watch of a
//! collection. The group `system:masters` may do anything. Denied: 403
//! with the API server's words. The bootstrap ClusterRole
//! `system:auth-delegator` is built in.

use std::collections::HashMap;

use serde_json::Value;

use super::error::MemApiError;
use super::status::ApiError;

/// The user a request acts as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct User {
    /// The user name (`system:serviceaccount:<ns>:<name>` for a
    /// ServiceAccount).
    pub(crate) name: String,
    /// The user's groups, `system:authenticated` included.
    pub(crate) groups: Vec<String>,
}

impl User {
    /// A user in `groups`, with the groups the API server adds: every
    /// authenticated user's, and a ServiceAccount's.
    pub(crate) fn new(name: &str, groups: impl IntoIterator<Item = String>) -> Self {
        let mut groups: Vec<String> = groups.into_iter().collect();
        if let Some(namespace) = name
            .strip_prefix("system:serviceaccount:")
            .and_then(|rest| rest.split_once(':').map(|(ns, _)| ns))
        {
            groups.push("system:serviceaccounts".to_string());
            groups.push(format!("system:serviceaccounts:{namespace}"));
        }
        groups.push("system:authenticated".to_string());
        Self {
            name: name.to_string(),
            groups,
        }
    }

    fn is_admin(&self) -> bool {
        self.groups.iter().any(|g| g == "system:masters")
    }

    fn is(&self, subject: &str) -> bool {
        self.name == subject || self.groups.iter().any(|g| g == subject)
    }
}

/// What a resource request asks to do: upstream's authorizer attributes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Attributes<'a> {
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`, …
    pub(crate) verb: &'a str,
    /// API group ("" for core).
    pub(crate) group: &'a str,
    /// Resource plural.
    pub(crate) resource: &'a str,
    /// Subresource (`status`, `finalizers`), if any.
    pub(crate) subresource: Option<&'a str>,
    /// Namespace ("" for a cluster-scoped resource or all namespaces).
    pub(crate) namespace: &'a str,
    /// Object name ("" for a collection or a create).
    pub(crate) name: &'a str,
}

impl Attributes<'_> {
    fn resource_path(&self) -> String {
        match self.subresource {
            Some(sub) => format!("{}/{sub}", self.resource),
            None => self.resource.to_string(),
        }
    }
}

/// One rule of a role.
#[derive(Debug, Clone, Default)]
struct Rule {
    api_groups: Vec<String>,
    resources: Vec<String>,
    verbs: Vec<String>,
    resource_names: Vec<String>,
}

impl Rule {
    fn of(value: &Value) -> Self {
        let list = |key: &str| -> Vec<String> {
            value
                .get(key)
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        };
        Self {
            api_groups: list("apiGroups"),
            resources: list("resources"),
            verbs: list("verbs"),
            resource_names: list("resourceNames"),
        }
    }

    fn allows(&self, attributes: &Attributes<'_>) -> bool {
        let any = |list: &[String], wanted: &str| list.iter().any(|v| v == "*" || v == wanted);
        any(&self.verbs, attributes.verb)
            && any(&self.api_groups, attributes.group)
            && any(&self.resources, &attributes.resource_path())
            && (self.resource_names.is_empty()
                || !attributes.name.is_empty()
                    && self.resource_names.iter().any(|n| n == attributes.name))
    }
}

/// A binding: who gets which role, where.
#[derive(Debug, Clone)]
struct Binding {
    /// `None` for a ClusterRoleBinding.
    namespace: Option<String>,
    role_kind: String,
    role_name: String,
    subjects: Vec<String>,
}

/// The roles and bindings of one server.
#[derive(Debug, Default)]
pub(crate) struct Rbac {
    /// Roles by (namespace, name); ClusterRoles under the namespace "".
    roles: HashMap<(String, String), Vec<Rule>>,
    bindings: Vec<Binding>,
}

/// The rules of `system:auth-delegator`, which every cluster has.
fn auth_delegator() -> Vec<Rule> {
    [
        "authentication.k8s.io/tokenreviews",
        "authorization.k8s.io/subjectaccessreviews",
    ]
    .iter()
    .filter_map(|path| path.split_once('/'))
    .map(|(group, resource)| Rule {
        api_groups: vec![group.to_string()],
        resources: vec![resource.to_string()],
        verbs: vec!["create".to_string()],
        resource_names: vec![],
    })
    .collect()
}

impl Rbac {
    /// Takes in the Roles, ClusterRoles, RoleBindings and ClusterRoleBindings
    /// of `objects`, skipping every other kind; returns how many it took.
    pub(crate) fn load(&mut self, objects: &[Value]) -> Result<usize, MemApiError> {
        let mut taken = 0;
        for object in objects {
            let kind = object.get("kind").and_then(Value::as_str).unwrap_or("");
            let metadata = |key: &str| {
                object
                    .pointer(&format!("/metadata/{key}"))
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string()
            };
            match kind {
                "Role" | "ClusterRole" => {
                    let namespace = if kind == "Role" {
                        metadata("namespace")
                    } else {
                        String::new()
                    };
                    let rules = object
                        .get("rules")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                        .map(Rule::of)
                        .collect();
                    self.roles.insert((namespace, metadata("name")), rules);
                }
                "RoleBinding" | "ClusterRoleBinding" => {
                    let subjects = object
                        .get("subjects")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                        .map(subject_name)
                        .collect::<Result<_, _>>()?;
                    self.bindings.push(Binding {
                        namespace: (kind == "RoleBinding").then(|| metadata("namespace")),
                        role_kind: object
                            .pointer("/roleRef/kind")
                            .and_then(Value::as_str)
                            .unwrap_or("")
                            .to_string(),
                        role_name: object
                            .pointer("/roleRef/name")
                            .and_then(Value::as_str)
                            .unwrap_or("")
                            .to_string(),
                        subjects,
                    });
                }
                _ => continue,
            }
            taken += 1;
        }
        Ok(taken)
    }

    /// The rules a binding grants.
    fn rules_of(&self, binding: &Binding) -> Vec<Rule> {
        if binding.role_kind == "ClusterRole" && binding.role_name == "system:auth-delegator" {
            return auth_delegator();
        }
        let namespace = match (&binding.namespace, binding.role_kind.as_str()) {
            (Some(namespace), "Role") => namespace.clone(),
            _ => String::new(),
        };
        self.roles
            .get(&(namespace, binding.role_name.clone()))
            .cloned()
            .unwrap_or_default()
    }

    /// Whether `user` may do what `attributes` ask.
    pub(crate) fn allows(&self, user: &User, attributes: &Attributes<'_>) -> bool {
        if user.is_admin() {
            return true;
        }
        self.bindings
            .iter()
            .filter(|b| b.subjects.iter().any(|s| user.is(s)))
            .filter(|b| {
                b.namespace
                    .as_deref()
                    .is_none_or(|namespace| namespace == attributes.namespace)
            })
            .any(|b| self.rules_of(b).iter().any(|rule| rule.allows(attributes)))
    }

    /// Answers 403 Forbidden, in the API server's words, unless `user` may
    /// do what `attributes` ask.
    pub(crate) fn authorize(
        &self,
        user: &User,
        attributes: &Attributes<'_>,
    ) -> Result<(), ApiError> {
        if self.allows(user, attributes) {
            return Ok(());
        }
        let scope = if attributes.namespace.is_empty() {
            "at the cluster scope".to_string()
        } else {
            format!("in the namespace \"{}\"", attributes.namespace)
        };
        let why = format!(
            "User \"{}\" cannot {} resource \"{}\" in API group \"{}\" {scope}",
            user.name,
            attributes.verb,
            attributes.resource_path(),
            attributes.group
        );
        Err(ApiError::forbidden(
            attributes.group,
            &attributes.resource_path(),
            attributes.name,
            &why,
        ))
    }
}

/// The user or group name a binding's subject stands for.
fn subject_name(subject: &Value) -> Result<String, MemApiError> {
    let field = |key: &str| subject.get(key).and_then(Value::as_str).unwrap_or("");
    match field("kind") {
        "ServiceAccount" => Ok(format!(
            "system:serviceaccount:{}:{}",
            field("namespace"),
            field("name")
        )),
        "User" | "Group" => Ok(field("name").to_string()),
        other => Err(ApiError::bad_request(format!("unknown subject kind {other:?}")).into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rbac() -> Rbac {
        let mut rbac = Rbac::default();
        let objects = [
            json!({ "kind": "ClusterRole", "metadata": { "name": "reader" },
                    "rules": [ { "apiGroups": [""], "resources": ["pods", "pods/status"], "verbs": ["get", "list"] } ] }),
            json!({ "kind": "ClusterRoleBinding", "metadata": { "name": "reader" },
                    "roleRef": { "kind": "ClusterRole", "name": "reader" },
                    "subjects": [ { "kind": "ServiceAccount", "namespace": "sys", "name": "ctl" } ] }),
            json!({ "kind": "Role", "metadata": { "name": "lease", "namespace": "sys" },
                    "rules": [ { "apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"] },
                               { "apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "update"], "resourceNames": ["ctl"] } ] }),
            json!({ "kind": "RoleBinding", "metadata": { "name": "lease", "namespace": "sys" },
                    "roleRef": { "kind": "Role", "name": "lease" },
                    "subjects": [ { "kind": "Group", "name": "system:serviceaccounts:sys" } ] }),
            json!({ "kind": "ConfigMap", "metadata": { "name": "skipped" } }),
        ];
        assert_eq!(rbac.load(&objects).unwrap(), 4);
        rbac
    }

    fn ask<'a>(
        verb: &'a str,
        group: &'a str,
        resource: &'a str,
        namespace: &'a str,
        name: &'a str,
    ) -> Attributes<'a> {
        Attributes {
            verb,
            group,
            resource,
            subresource: None,
            namespace,
            name,
        }
    }

    #[test]
    fn bindings_grant_their_roles_where_they_apply() {
        let rbac = rbac();
        let ctl = User::new("system:serviceaccount:sys:ctl", []);
        let other = User::new("system:serviceaccount:apps:ctl", []);
        assert!(rbac.allows(&ctl, &ask("get", "", "pods", "apps", "p")));
        assert!(!rbac.allows(&ctl, &ask("delete", "", "pods", "apps", "p")));
        let status = Attributes {
            subresource: Some("status"),
            ..ask("get", "", "pods", "a", "p")
        };
        assert!(rbac.allows(&ctl, &status));
        let finalizers = Attributes {
            subresource: Some("finalizers"),
            ..ask("update", "", "pods", "a", "p")
        };
        assert!(!rbac.allows(&ctl, &finalizers));
        // The Role holds in its namespace only, and resourceNames never
        // allow a create's empty name.
        assert!(rbac.allows(
            &ctl,
            &ask("create", "coordination.k8s.io", "leases", "sys", "")
        ));
        assert!(rbac.allows(
            &ctl,
            &ask("update", "coordination.k8s.io", "leases", "sys", "ctl")
        ));
        assert!(!rbac.allows(
            &ctl,
            &ask("update", "coordination.k8s.io", "leases", "sys", "x")
        ));
        assert!(!rbac.allows(
            &ctl,
            &ask("create", "coordination.k8s.io", "leases", "apps", "")
        ));
        assert!(!rbac.allows(&other, &ask("get", "", "pods", "apps", "p")));
        assert!(rbac.allows(
            &User::new("root", ["system:masters".to_string()]),
            &finalizers
        ));
        let denied = rbac.authorize(&ctl, &finalizers).unwrap_err();
        assert_eq!(denied.code, 403);
        assert!(
            denied.message.ends_with("User \"system:serviceaccount:sys:ctl\" cannot update resource \"pods/finalizers\" in API group \"\" in the namespace \"a\""),
            "{}",
            denied.message
        );
    }
}
