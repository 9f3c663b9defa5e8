//! What the API server said of a failed request, in its words: the
//! `message` of its `Status` answer (`widgets "w" is forbidden: exceeded
//! quota: ...`), as upstream's events and logs carry
//! it, not the client's debug form of the whole answer (`ApiError: ...
//! (Status { ... })`). A request the server did not answer keeps the
//! client's own description (a broken connection, a timeout).

use std::fmt;

/// Formats a client error as the API server's message ([module
/// documentation](self)).
#[derive(Clone, Copy, Debug)]
pub struct ApiMessage<'a>(pub &'a kube::Error);

impl fmt::Display for ApiMessage<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            kube::Error::Api(status) if !status.message.is_empty() => f.write_str(&status.message),
            kube::Error::Api(status) if !status.reason.is_empty() => {
                write!(f, "{} ({})", status.reason, status.code)
            }
            kube::Error::Api(status) => write!(f, "the API server answered {}", status.code),
            other => other.fmt(f),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::Status;

    #[test]
    fn the_servers_message_without_the_debug_dump() {
        let refused = kube::Error::Api(Box::new(Status {
            message: "persistentvolumeclaims \"c\" is forbidden: exceeded quota".into(),
            reason: "Forbidden".into(),
            code: 403,
            ..Status::default()
        }));
        assert!(refused.to_string().contains("Status {"), "kube's own form");
        assert_eq!(
            ApiMessage(&refused).to_string(),
            "persistentvolumeclaims \"c\" is forbidden: exceeded quota"
        );
        let bare = kube::Error::Api(Box::new(Status {
            reason: "Forbidden".into(),
            code: 403,
            ..Status::default()
        }));
        assert_eq!(ApiMessage(&bare).to_string(), "Forbidden (403)");
        let unanswered = kube::Error::LinesCodecMaxLineLengthExceeded;
        assert_eq!(ApiMessage(&unanswered).to_string(), unanswered.to_string());
    }
}
