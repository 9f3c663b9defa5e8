//! Who may ask: whether a request's API is served now, and the user it
//! names (a bearer token, or impersonation headers).

use super::*;

/// Whether `route` addresses a group version the server does not serve
/// now ([`MemApi::withhold`](crate::MemApi::withhold)): the API server's
/// mux answers those with a plain 404 page.
pub(super) fn withheld(shared: &Shared, route: &Route) -> bool {
    let (group, version) = match route {
        Route::Resource(res) => (res.kind.group, res.kind.version),
        Route::GroupVersion(group, version) | Route::OpenApi(group, version) => {
            (group.as_str(), version.as_str())
        }
        _ => return false,
    };
    let withheld = lock(&shared.withheld);
    !group.is_empty() && withheld.contains(&format!("{group}/{version}"))
}

/// The user a request names: by its bearer token (401 when unknown) or by
/// impersonation headers; `None` when it names nobody.
pub(super) fn user_of(
    shared: &Shared,
    parts: &http::request::Parts,
) -> Result<Option<User>, ApiError> {
    let impersonated = header(parts, IMPERSONATE_USER);
    if !impersonated.is_empty() {
        let groups = parts
            .headers
            .get_all(IMPERSONATE_GROUP)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .map(str::to_string);
        return Ok(Some(User::new(&impersonated, groups)));
    }
    let authorization = header(parts, http::header::AUTHORIZATION);
    let Some(token) = authorization.strip_prefix("Bearer ") else {
        return Ok(None);
    };
    lock(&shared.access)
        .identity(token.trim())
        .map(|(name, groups)| Some(User::new(name, groups.iter().cloned())))
        .ok_or_else(|| ApiError::from_code(401, "Unauthorized"))
}

/// The header naming the user a request impersonates.
const IMPERSONATE_USER: &str = "impersonate-user";
/// The header naming a group of the impersonated user (repeated).
const IMPERSONATE_GROUP: &str = "impersonate-group";
