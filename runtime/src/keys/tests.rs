use super::ObjectKey;

#[test]
fn keys_read_as_kubectl_names_them() {
    assert_eq!(ObjectKey::new("ns", "claim").to_string(), "ns/claim");
    assert_eq!(ObjectKey::cluster("pv1").to_string(), "pv1");
}
