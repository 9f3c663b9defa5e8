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

#[test]
fn a_watchs_error_in_the_servers_words() {
    use kube::runtime::watcher::Error;
    let refused = Error::InitialListFailed(kube::Error::Api(Box::new(Status {
        message: "widgets is forbidden: User \"x\" cannot list".into(),
        reason: "Forbidden".into(),
        code: 403,
        ..Status::default()
    })));
    assert!(refused.to_string().contains("Status {"), "kube's own form");
    assert_eq!(
        WatchMessage(&refused).to_string(),
        "listing: widgets is forbidden: User \"x\" cannot list"
    );
}
