//! The reactors' faults around a request: delays, injected errors and
//! dropped connections, before it is served or after its write commits.

use super::*;

/// Runs the reactors that act before a request is served: waits out their
/// delays, and returns the injected error or drop, if any.
pub(super) async fn before_serving(shared: &Shared, info: &RequestInfo<'_>) -> Option<Outcome> {
    let actions = lock(&shared.reactors).react(info);
    let mut outcome = None;
    for action in actions {
        match action {
            Action::Delay(d) => tokio::time::sleep(d).await,
            Action::Error {
                code,
                message,
                retry_after,
            } => {
                outcome = Some(Outcome::Respond(injected_error(code, message, retry_after)));
            }
            Action::DropConnection => outcome = Some(Outcome::Drop),
        }
    }
    outcome
}

/// Runs the after-commit reactors on the answer of a successful write:
/// waits out their delays and replaces the answer with their error or
/// drop. Returns the outcome and, when the answer was replaced, its code.
pub(super) async fn after_commit(
    shared: &Shared,
    info: &RequestInfo<'_>,
    resp: http::Response<ResponseBody>,
) -> (Outcome, Option<u16>) {
    let code = resp.status().as_u16();
    if !info.verb.is_write() || !resp.status().is_success() {
        return (Outcome::Respond(resp), None);
    }
    let actions = lock(&shared.reactors).react_after_commit(info);
    let mut outcome = Outcome::Respond(resp);
    let mut lost = None;
    for action in actions {
        match action {
            Action::Delay(d) => tokio::time::sleep(d).await,
            Action::Error {
                code: c,
                message,
                retry_after,
            } => {
                outcome = Outcome::Respond(injected_error(c, message, retry_after));
                lost = Some(code);
            }
            Action::DropConnection => {
                outcome = Outcome::Drop;
                lost = Some(code);
            }
        }
    }
    (outcome, lost)
}

/// The answer of a reactor's error: a `Status`, with a `Retry-After`
/// header and `details.retryAfterSeconds` when the reactor gives one.
pub(super) fn injected_error(
    code: u16,
    message: String,
    retry_after: Option<u32>,
) -> http::Response<ResponseBody> {
    let error = ApiError::from_code(code, message);
    let Some(seconds) = retry_after else {
        return error_response(&error);
    };
    let mut status = error.to_status();
    status["details"] = json!({ "retryAfterSeconds": seconds });
    let mut response = json_response(code, &status);
    response
        .headers_mut()
        .insert(http::header::RETRY_AFTER, http::HeaderValue::from(seconds));
    response
}
