//! URL routing: turns a request path and query string into what is being
//! asked for (a discovery document or a resource, namespace, name and
//! subresource) and its query parameters.

use super::resources::{self, ResourceKind};
use super::status::ApiError;

/// What a URL path addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Route {
    /// `/version`
    Version,
    /// `/api`
    CoreVersions,
    /// `/apis`
    Groups,
    /// `/api/v1` or `/apis/{group}/{version}`
    GroupVersion(String, String),
    /// `/openapi/v3`: the index of per-group-version OpenAPI documents.
    OpenApiIndex,
    /// `/openapi/v3/api/v1` or `/openapi/v3/apis/{group}/{version}`.
    OpenApi(String, String),
    /// A resource collection or object.
    Resource(ResourceRoute),
    /// A path outside every served API group version (an API the server
    /// does not have, such as resource.k8s.io/v1 before Kubernetes 1.34):
    /// a real apiserver's mux answers these with a plain-text
    /// `404 page not found`, not a `Status`.
    PageNotFound,
}

/// A resource collection, or one object, with an optional subresource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ResourceRoute {
    /// The resource.
    pub kind: &'static ResourceKind,
    /// Namespace from the URL (`None`: cluster-wide or all namespaces).
    pub namespace: Option<String>,
    /// Object name (`None`: the collection).
    pub name: Option<String>,
    /// Subresource, e.g. "status".
    pub subresource: Option<String>,
}

/// Parses a path such as `/api/v1/namespaces/ns/persistentvolumeclaims/c1/status`.
pub(crate) fn parse(path: &str) -> Result<Route, ApiError> {
    let segs: Vec<String> = path
        .split('/')
        .filter(|s| !s.is_empty())
        .map(percent_decode)
        .collect();
    let segs: Vec<&str> = segs.iter().map(String::as_str).collect();
    let (group, version, rest) = match segs.as_slice() {
        ["version"] => return Ok(Route::Version),
        ["api"] => return Ok(Route::CoreVersions),
        ["apis"] => return Ok(Route::Groups),
        ["openapi", "v3"] => return Ok(Route::OpenApiIndex),
        ["openapi", "v3", "api", version] if known_group_version("", version) => {
            return Ok(Route::OpenApi(String::new(), version.to_string()));
        }
        ["openapi", "v3", "apis", group, version] if known_group_version(group, version) => {
            return Ok(Route::OpenApi(group.to_string(), version.to_string()));
        }
        ["api", version, rest @ ..] => ("", *version, rest),
        ["apis", group, version, rest @ ..] => (*group, *version, rest),
        _ => return Ok(Route::PageNotFound),
    };
    if !known_group_version(group, version) {
        return Ok(Route::PageNotFound);
    }
    let lookup = |plural: &str| {
        resources::by_path(group, version, plural).ok_or_else(|| ApiError::no_route(path))
    };
    let route = |kind, namespace: Option<&str>, name: Option<&str>, sub: Option<&str>| {
        Route::Resource(ResourceRoute {
            kind,
            namespace: namespace.map(str::to_string),
            name: name.map(str::to_string),
            subresource: sub.map(str::to_string),
        })
    };
    let namespaced_plural =
        |p: &str| resources::by_path(group, version, p).filter(|k| k.namespaced);
    match rest {
        [] => Ok(Route::GroupVersion(group.to_string(), version.to_string())),
        ["namespaces", ns, plural, tail @ ..] if namespaced_plural(plural).is_some() => {
            let kind = lookup(plural)?;
            match tail {
                [] => Ok(route(kind, Some(ns), None, None)),
                [name] => Ok(route(kind, Some(ns), Some(name), None)),
                [name, sub] => Ok(route(kind, Some(ns), Some(name), Some(sub))),
                _ => Err(ApiError::no_route(path)),
            }
        }
        [plural] => Ok(route(lookup(plural)?, None, None, None)),
        [plural, name] => Ok(route(lookup(plural)?, None, Some(name), None)),
        [plural, name, sub] => Ok(route(lookup(plural)?, None, Some(name), Some(sub))),
        _ => Err(ApiError::no_route(path)),
    }
}

/// Whether any served resource lives in this group version.
fn known_group_version(group: &str, version: &str) -> bool {
    resources::KINDS
        .iter()
        .any(|k| k.group == group && k.version == version)
}

/// Decodes `%XX` escapes (and `+` as space when `plus` is set) in a URL part.
fn decode(s: &str, plus: bool) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or_default();
                if let Ok(b) = u8::from_str_radix(hex, 16) {
                    out.push(b);
                    i += 3;
                } else {
                    out.push(b'%');
                    i += 1;
                }
            }
            b'+' if plus => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn percent_decode(s: &str) -> String {
    decode(s, false)
}

/// The decoded query parameters of a request.
#[derive(Debug, Clone, Default)]
pub(crate) struct Query {
    pairs: Vec<(String, String)>,
}

impl Query {
    /// Parses `a=b&c=d` (the part after `?`).
    pub(crate) fn parse(raw: Option<&str>) -> Self {
        let pairs = raw
            .unwrap_or_default()
            .split('&')
            .filter(|p| !p.is_empty())
            .map(|p| match p.split_once('=') {
                Some((k, v)) => (decode(k, true), decode(v, true)),
                None => (decode(p, true), String::new()),
            })
            .collect();
        Self { pairs }
    }

    /// The last value of a parameter, if present.
    pub(crate) fn get(&self, key: &str) -> Option<&str> {
        self.pairs
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// Whether a boolean parameter is set to `true` or `1`.
    pub(crate) fn flag(&self, key: &str) -> bool {
        matches!(self.get(key), Some("true" | "1"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resource(path: &str) -> ResourceRoute {
        match parse(path) {
            Ok(Route::Resource(r)) => r,
            other => panic!("{path}: {other:?}"),
        }
    }

    #[test]
    fn namespaced_cluster_and_namespace_paths() {
        let r = resource("/api/v1/namespaces/ns1/persistentvolumeclaims/c1/status");
        assert_eq!(r.kind.plural, "persistentvolumeclaims");
        assert_eq!(
            (
                r.namespace.as_deref(),
                r.name.as_deref(),
                r.subresource.as_deref()
            ),
            (Some("ns1"), Some("c1"), Some("status"))
        );
        let r = resource("/api/v1/namespaces/ns1/status");
        assert_eq!(
            (r.kind.plural, r.name.as_deref()),
            ("namespaces", Some("ns1"))
        );
        let r = resource("/apis/storage.k8s.io/v1/storageclasses/gold");
        assert_eq!((r.kind.kind, r.namespace), ("StorageClass", None));
        assert_eq!(
            parse("/apis/storage.k8s.io/v2/storageclasses"),
            Ok(Route::PageNotFound),
            "a group version the server does not serve"
        );
        assert!(
            parse("/api/v1/nosuchthings").is_err(),
            "a resource a served group version does not have"
        );
        assert_eq!(
            parse("/openapi/v3/apis/events.k8s.io/v1"),
            Ok(Route::OpenApi("events.k8s.io".into(), "v1".into()))
        );
    }

    #[test]
    fn query_decoding() {
        let q = Query::parse(Some("labelSelector=a%3Db%2Cc+in+(x)&watch=1&bad=%zz"));
        assert_eq!(q.get("labelSelector"), Some("a=b,c in (x)"));
        assert!(q.flag("watch"));
        assert_eq!(q.get("bad"), Some("%zz"));
        assert_eq!(q.get("missing"), None);
    }
}
