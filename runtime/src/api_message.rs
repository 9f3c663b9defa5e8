//! What the API server said of a failed request, in its words: the
//! `message` of its `Status` answer (`widgets "w" is forbidden: exceeded
//! quota: ...`), as upstream's events and logs carry
//! it, not the client's debug form of the whole answer (`ApiError: ...
//! (Status { ... })`). A request the server did not answer keeps the
//! client's own description (a broken connection, a timeout).
//!
//! This is the one way a client error becomes text a user reads (an event,
//! a status, a log line at info and above, the process's exit): every
//! error type holding one formats it through [`ApiMessage`] (a watch's,
//! through [`WatchMessage`]), and so does every line that shows one;
//! tests/it/messages.rs reads the source so that no other way appears.

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

/// Formats a watch's error with the API server's message
/// ([`ApiMessage`]) in place of the client's debug form.
#[derive(Clone, Copy, Debug)]
pub struct WatchMessage<'a>(pub &'a kube::runtime::watcher::Error);

impl fmt::Display for WatchMessage<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use kube::runtime::watcher::Error;
        match self.0 {
            Error::InitialListFailed(error) => write!(f, "listing: {}", ApiMessage(error)),
            Error::WatchStartFailed(error) => {
                write!(f, "starting the watch: {}", ApiMessage(error))
            }
            Error::WatchFailed(error) => write!(f, "watching: {}", ApiMessage(error)),
            Error::WatchError(status) if !status.message.is_empty() => {
                write!(f, "the API server ended the watch: {}", status.message)
            }
            Error::WatchError(status) => write!(
                f,
                "the API server ended the watch: {} ({})",
                status.reason, status.code
            ),
            other => other.fmt(f),
        }
    }
}

#[cfg(test)]
mod tests;
