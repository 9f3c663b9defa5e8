use super::*;

#[test]
fn names_are_spelled_as_upstream() {
    let recycle = recycle("pv1", "u1");
    assert_eq!(recycle.to_string(), "recycle-pv1[u1]");
    assert_eq!(recycle.kind(), "recycle");
    let delete = delete("pv1", "u1");
    assert_eq!(delete.to_string(), "delete-pv1[u1]");
    assert_eq!(delete.kind(), "delete");
    let provision = provision("ns", "claim", "u2");
    assert_eq!(provision.to_string(), "provision-ns/claim[u2]");
    assert_eq!(provision.kind(), "provision");
}
