use k8s_openapi::api::core::v1::{Node, PersistentVolumeClaim};

use super::*;

#[test]
fn a_kind_is_named_in_lower_case() {
    assert_eq!(Node::NAME, "node");
    assert_eq!(PersistentVolumeClaim::NAME, "persistentvolumeclaim");
}
