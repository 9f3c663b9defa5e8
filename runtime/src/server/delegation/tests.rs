use super::decoded;

#[test]
fn paths_are_decoded_as_the_routes_read_them() {
    assert_eq!(
        decoded("/explain/team-a%62/x").as_deref(),
        Some("/explain/team-ab/x")
    );
    assert_eq!(decoded("/%6Civez").as_deref(), Some("/livez"));
    assert_eq!(decoded("/a%2Fb").as_deref(), Some("/a/b"));
    assert_eq!(decoded("/plain").as_deref(), Some("/plain"));
    for bad in ["/a%", "/a%2", "/a%zz", "/a%ff"] {
        assert_eq!(decoded(bad), None, "{bad}");
    }
}
